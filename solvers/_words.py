"""Suggestions for misspelt names, in a module of its own: configs, registries and error
messages use it without importing the numerics."""

import difflib


def did_you_mean(word: object, choices) -> str:
    """A ' Perhaps you meant X?' suffix, or '' when nothing is close.

    Arguments:
        word: the name that was not found (compared as `str(word)`).
        choices: the names it may have meant to be (each compared as `str(c)`).

    Returns:
        `" Perhaps you meant 'X'?"` with the closest of `choices` (difflib's ratio at
        least 0.6), or `""` when none is that close.
    """
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" Perhaps you meant {close[0]!r}?" if close else ""
