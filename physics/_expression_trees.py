"""Walking and printing the syntax trees of the expression language, at any depth.

A checked tree (`physics._expressions.parse`) may be deeper than Python's recursion
allows once it is differentiated, so everything done to it after the check walks it with
an explicit stack: `_postorder` visits each node once, after its operands; `unparse`
writes a tree's text with the parentheses it needs, and `_text_length` counts that text
before it is written (a shared subtree is written each time it occurs).
"""

from __future__ import annotations

import ast
from collections.abc import Callable


def _children(node: ast.AST) -> list[ast.expr]:
    """The operands of a checked node (a call's arguments, never the function's name)."""
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.IfExp):
        return [node.test, node.body, node.orelse]
    if isinstance(node, ast.Call):
        return list(node.args)
    return []


def _postorder(
    tree: ast.expr, children: Callable[[ast.AST], list[ast.expr]] = _children
) -> list[ast.expr]:
    """Each node of `tree` once (a subtree shared by several parents too), every node
    after its `children`: without recursion, so at any depth."""
    order: list[ast.expr] = []
    seen: set[int] = set()
    stack: list[tuple[ast.expr, bool]] = [(tree, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(children(node)))
    return order


def _own(node: ast.AST) -> tuple:
    """What a node says besides its operands: its kind, operator, name or value."""
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp)):
        return (type(node).__name__, type(node.op).__name__)
    if isinstance(node, ast.Compare):
        return ("Compare", *(type(op).__name__ for op in node.ops))
    if isinstance(node, ast.Name):
        return ("Name", node.id)
    if isinstance(node, ast.Constant):
        return ("Constant", type(node.value).__name__, repr(node.value))
    if isinstance(node, ast.Call):
        return ("Call", ast.unparse(node.func))
    return (type(node).__name__,)


def tree_key(tree: ast.expr) -> tuple:
    """A value equal for equal trees (whatever subtrees they share) and for no others:
    each distinct subtree once, as its own part and the positions of its operands among
    those before it, in the order `_postorder` meets them. Without recursion, and as long
    as the number of distinct subtrees, where a text would repeat every shared one."""
    index: dict[tuple, int] = {}
    of_node: dict[int, int] = {}
    for node in _postorder(tree):
        part = (*_own(node), tuple(of_node[id(child)] for child in _children(node)))
        of_node[id(node)] = index.setdefault(part, len(index))
    return tuple(index)


def _symbols(tree: ast.expr) -> set[str]:
    return {node.id for node in _postorder(tree) if isinstance(node, ast.Name)}


# Python's binding strengths, from the conditional expression (weakest) to a call.
_IFEXP, _OR, _AND, _NOT, _COMPARISON, _SUM, _PRODUCT, _UNARY, _POWER, _ATOM = range(1, 11)
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.USub: "-",
    ast.UAdd: "+",
}
_COMPARISON_SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}


def _strength(node: ast.expr) -> int:
    if isinstance(node, ast.BinOp):
        return (
            _POWER
            if isinstance(node.op, ast.Pow)
            else _SUM
            if isinstance(node.op, (ast.Add, ast.Sub))
            else _PRODUCT
        )
    if isinstance(node, ast.UnaryOp):
        return _NOT if isinstance(node.op, ast.Not) else _UNARY
    if isinstance(node, ast.Compare):
        return _COMPARISON
    if isinstance(node, ast.BoolOp):
        return _AND if isinstance(node.op, ast.And) else _OR
    return _IFEXP if isinstance(node, ast.IfExp) else _ATOM


def _pieces(node: ast.expr) -> list[str | tuple[ast.expr, int]]:
    """A node's text: words, and operands with the least strength each must bind with
    (weaker ones are put in parentheses)."""
    if isinstance(node, ast.Constant):
        return [repr(node.value)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, ast.Pow
    ):  # right-associative; -x ** 2 is -(x ** 2)
        return [(node.left, _ATOM), " ** ", (node.right, _UNARY)]
    if isinstance(node, ast.BinOp):
        strength = _strength(node)
        return [(node.left, strength), f" {_SYMBOL[type(node.op)]} ", (node.right, strength + 1)]
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return ["not ", (node.operand, _NOT)]
        return [_SYMBOL[type(node.op)], (node.operand, _UNARY)]
    if isinstance(node, ast.Compare):
        return [
            (node.left, _SUM),
            f" {_COMPARISON_SYMBOL[type(node.ops[0])]} ",
            (node.comparators[0], _SUM),
        ]
    if isinstance(node, ast.BoolOp):
        word, strength = (" and ", _AND) if isinstance(node.op, ast.And) else (" or ", _OR)
        pieces: list[str | tuple[ast.expr, int]] = [(node.values[0], strength + 1)]
        for value in node.values[1:]:
            pieces += [word, (value, strength + 1)]
        return pieces
    if isinstance(node, ast.IfExp):
        return [(node.body, _OR), " if ", (node.test, _OR), " else ", (node.orelse, _IFEXP)]
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    pieces = [f"{node.func.id}("]
    for i, arg in enumerate(node.args):
        pieces += [", "] * (i > 0) + [(arg, _IFEXP)]
    return [*pieces, ")"]


def _text_length(tree: ast.expr) -> int:
    """The number of characters `unparse` writes (a shared subtree is written each time
    it occurs, so a derivative's text may be far longer than its tree is large)."""
    length: dict[int, int] = {}
    for node in _postorder(tree):
        length[id(node)] = sum(
            len(p) if isinstance(p, str) else length[id(p[0])] + 2 * (_strength(p[0]) < p[1])
            for p in _pieces(node)
        )
    return length[id(tree)]


def unparse(tree: ast.expr) -> str:
    """The text of a checked tree with the parentheses it needs, as `ast.unparse` writes
    it but at any depth."""
    out: list[str] = []
    stack: list[str | tuple[ast.expr, int]] = [(tree, _IFEXP)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, least = item
        pieces = _pieces(node)
        stack.extend(reversed(pieces if _strength(node) >= least else ["(", *pieces, ")"]))
    return "".join(out)
