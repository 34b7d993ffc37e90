"""MkDocs hooks of the guide: the example gallery's figures (experiments/gallery/*.png)
are part of the site as gallery/NAME.png, so that the pages show the figures the examples
draw without a copy of them in docs/."""

from pathlib import Path

from mkdocs.structure.files import File

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def on_files(files, config):
    for figure in sorted((EXPERIMENTS / "gallery").glob("*.png")):
        files.append(
            File(
                f"gallery/{figure.name}",
                str(EXPERIMENTS),
                config["site_dir"],
                config["use_directory_urls"],
            )
        )
    return files
