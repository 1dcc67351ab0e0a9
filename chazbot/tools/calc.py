"""``calculate``: arithmetic read with ``ast`` and evaluated over a whitelist of nodes, never
``eval``. Numbers, + - * / // % **, parentheses, and a few functions and constants; the sizes
a model could blow up (long input, deep nesting, huge powers and factorials) are bounded."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from chazbot.errors import InputError

MAX_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 10_000
MAX_MAGNITUDE = 10**300
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\s+", re.IGNORECASE)
Number = int | float

BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
}
CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _bounded(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError("only numbers can be calculated")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError("the result is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise InputError("the result is too large")
    return value


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise InputError(f"exponents are at most {MAX_EXPONENT:,}")
        if (
            isinstance(node.op, ast.Pow)
            and abs(left) > 1
            and abs(right) * math.log10(abs(left)) > math.log10(MAX_MAGNITUDE)
        ):
            raise InputError("the result is too large")
        try:
            return _bounded(BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise InputError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return _bounded(UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        args = [_eval(a) for a in node.args]
        try:
            return _bounded(FUNCTIONS[node.func.id](*args))
        except (ValueError, TypeError, OverflowError) as exc:
            raise InputError(f"{node.func.id}: {exc}") from None
    what = type(node).__name__
    if isinstance(node, ast.Name | ast.Call):
        known = ", ".join([*FUNCTIONS, *CONSTANTS])
        raise InputError(f"unknown name; known functions and constants: {known}")
    raise InputError(f"{what} is not arithmetic; use numbers, + - * / // % ** and ( )")


def calculate(expression: str) -> str:
    """The value of ``expression`` as text ("17 % of 2,340" reads as 17/100*2340)."""
    if not isinstance(expression, str) or not expression.strip():
        raise InputError("expression must be arithmetic such as (2 + 3) * 4")
    if len(expression) > MAX_CHARS:
        raise InputError(f"expression is at most {MAX_CHARS} characters")
    text = _THOUSANDS.sub("", expression.replace("×", "*").replace("÷", "/").replace("^", "**"))
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InputError("expression is not arithmetic I can read, e.g. (2 + 3) * 4") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise InputError(f"expression is too long (at most {MAX_NODES} parts)")
    try:
        value = _eval(tree)
    except RecursionError:
        raise InputError("expression is nested too deeply") from None
    shown = f"{value:.12g}" if isinstance(value, float) else str(value)
    return shown


__all__ = ["calculate"]
