"""The `where` filter of a sweep spec: a small arithmetic language, parsed by `ast`, never eval'd.

Allowed: numbers, strings, booleans, config field names (`width`, `data.seed`), the derived
`n_params` (Kaplan's non-embedding N) and `aspect` (width / depth, Kaplan Figure 5), + - * / //
% **, comparisons (also `in [..]`), and/or/not, and the functions in FUNCTIONS. Every
intermediate value is bounded before it is computed (integers to the range of a float, strings
and lists to MAX_ITEMS), so a filter cannot exhaust the planner's memory or time.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any


class WhereError(ValueError):
    """A where expression that does not parse, names an unknown thing, or cannot be evaluated."""


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "log3": lambda x: math.log(x, 3),  # Levine et al.'s L_th = log_3(d_x), docs/science.md §1
    "exp": math.exp,
    "sqrt": math.sqrt,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
}
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_QUALIFIERS = ("model", "data", "train")
MAX_TEXT = 4000  # characters of one expression
MAX_INT_BITS = 1024  # |int| < 2**1024, the range of a float: far beyond any config value
MAX_ITEMS = 10_000  # characters of a string, elements of a list
MAX_NDIGITS = 64  # round(x, n): |n| digits


class Where:
    def __init__(self, text: str, tree: ast.Expression):
        self.text, self.tree = text, tree


def compile_where(text: str) -> Where:
    if len(text) > MAX_TEXT:
        raise WhereError(
            f"where = {text[:40]!r}... is invalid: it is {len(text)} characters long, "
            f"more than the {MAX_TEXT} allowed."
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise WhereError(f"where = {text!r} is invalid: it does not parse ({exc.msg}).") from None
    except (RecursionError, MemoryError):
        raise WhereError(f"where = {text!r} is invalid: it is nested too deeply.") from None
    for node in ast.walk(tree):
        _check_node(node, text)
    return Where(text, tree)


def _check_node(node: ast.AST, text: str) -> None:
    ok = (
        ast.Expression,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.Not,
        ast.USub,
        ast.UAdd,
        ast.BinOp,
        ast.Compare,
        ast.Name,
        ast.Load,
        ast.Constant,
        ast.Call,
        ast.Attribute,
        ast.List,
        ast.Tuple,
        *_BINOPS,
        *_CMPOPS,
    )
    if not isinstance(node, ok):
        raise WhereError(
            f"where = {text!r} is invalid: {type(node).__name__} is not allowed "
            f"(arithmetic, comparisons, and/or/not and {', '.join(FUNCTIONS)} only)."
        )
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise WhereError(
                f"where = {text!r} is invalid: function {name!r} is not one of {', '.join(FUNCTIONS)}."
            )
        if node.keywords:
            raise WhereError(
                f"where = {text!r} is invalid: function {node.func.id!r} takes its "
                f"arguments by position only, not by name ({ast.unparse(node.keywords[0])})."
            )
    if isinstance(node, ast.Attribute):
        if not (isinstance(node.value, ast.Name) and node.value.id in _QUALIFIERS):
            raise WhereError(
                f"where = {text!r} is invalid: {ast.unparse(node)!r} is not a field; "
                f"qualify fields only as model.X, data.X or train.X."
            )
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool)):
        raise WhereError(f"where = {text!r} is invalid: constant {node.value!r} is not allowed.")


def where_names(w: Where) -> set[str]:
    """The field names an expression reads ('width', 'data.seed', 'n_params')."""
    names: set[str] = set()
    for node in ast.walk(w.tree):
        if isinstance(node, ast.Attribute):
            names.add(f"{node.value.id}.{node.attr}")  # type: ignore[attr-defined]
        elif isinstance(node, ast.Name) and node.id not in FUNCTIONS and node.id not in _QUALIFIERS:
            names.add(node.id)
    return names


def evaluate_where(w: Where, env: dict[str, Any]) -> bool:
    try:
        return _truth(_eval(w.tree.body, env, w.text), w.text)
    except WhereError:
        raise
    except RecursionError:
        raise WhereError(f"where = {w.text!r} is invalid: it is nested too deeply.") from None
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise WhereError(f"where = {w.text!r} cannot be evaluated: {exc}.") from None


def _eval(node: ast.AST, env: dict[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise WhereError(
                f"where = {text!r} is invalid: {node.id!r} is not a config field "
                f"(or is ambiguous; qualify it as model.X, data.X or train.X)."
            )
        return env[node.id]
    if isinstance(node, ast.Attribute):
        key = f"{node.value.id}.{node.attr}"  # type: ignore[attr-defined]
        if key not in env:
            raise WhereError(f"where = {text!r} is invalid: {key!r} is not a config field.")
        return env[key]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, env, text) for e in node.elts]
    if isinstance(node, ast.BoolOp):
        values = (_truth(_eval(v, env, text), text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, text)
        if isinstance(node.op, ast.Not):
            return not _truth(v, text)
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env, text), _eval(node.right, env, text)
        _check_size(node.op, a, b, text)
        return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env, text)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        args = [_eval(a, env, text) for a in node.args]
        name = node.func.id  # type: ignore[attr-defined]
        if name == "round" and len(args) > 1 and _is_int(args[1]) and abs(args[1]) > MAX_NDIGITS:
            raise WhereError(
                f"where = {text!r} is invalid: round(x, {args[1]}) asks for more than {MAX_NDIGITS} digits."
            )
        return FUNCTIONS[name](*args)
    raise WhereError(f"where = {text!r} is invalid: {type(node).__name__} is not allowed.")


def _truth(v: Any, text: str) -> bool:
    """A filter keeps or drops a point: a number or a string there (`where = "depth"`) is a
    mistake that Python's truthiness would hide, so it is refused."""
    if not isinstance(v, bool):
        raise WhereError(
            f"where = {text!r} is invalid: it gives {v!r}, not true or false; "
            f"write a comparison such as 'depth <= 4'."
        )
    return v


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_size(op: ast.operator, a: Any, b: Any, text: str) -> None:
    """Refuse an operation whose result would be too large, before computing it."""

    def too_big(what: str) -> WhereError:
        return WhereError(f"where = {text!r} is invalid: {what}.")

    if isinstance(a, str) and isinstance(op, ast.Mod):
        raise too_big("% formats strings, which a filter has no use for; compare them instead")
    seq = next((v for v in (a, b) if isinstance(v, (str, list))), None)
    if seq is not None and isinstance(op, ast.Mult):
        n = b if seq is a else a
        if _is_int(n) and len(seq) * max(n, 0) > MAX_ITEMS:
            raise too_big(
                f"repeating a {_kind(seq)} {_short(n)} times makes more than {MAX_ITEMS} {_items(seq)}"
            )
    elif seq is not None and isinstance(op, ast.Add) and isinstance(a, type(b)):
        if len(a) + len(b) > MAX_ITEMS:
            raise too_big(f"joining two {_kind(a)}s makes more than {MAX_ITEMS} {_items(a)}")
    if not (_is_int(a) and _is_int(b)):
        return
    if isinstance(op, ast.Pow) and b > 0:
        size = b * math.log2(abs(a)) if abs(a) > 1 else 0.0
    elif isinstance(op, ast.Mult):
        size = abs(a).bit_length() + abs(b).bit_length()
    else:
        return
    if size > MAX_INT_BITS:
        sym = "**" if isinstance(op, ast.Pow) else "*"
        raise too_big(
            f"{_short(a)} {sym} {_short(b)} would be larger than 2**{MAX_INT_BITS}, the range of a float"
        )


def _short(v: int) -> str:
    """A huge integer as '(about 10**N)' rather than thousands of digits."""
    bits = abs(v).bit_length()
    return str(v) if bits <= 64 else f"(about {'-' if v < 0 else ''}10**{int(bits * math.log10(2))})"


def _kind(seq: str | list) -> str:
    return "string" if isinstance(seq, str) else "list"


def _items(seq: str | list) -> str:
    return "characters" if isinstance(seq, str) else "elements"
