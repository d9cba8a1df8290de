"""IR expressions as Python source text, for the PyPTO kernel and for the torch reference.

The two emitters share precedence handling and differ only in how they spell each op.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping

from ptodsl import ir, ops
from ptodsl.target import form

# Python precedence, higher binds tighter.
_ATOM, _POWER, _UNARY, _PRODUCT, _SUM, _COMPARE = 7, 6, 5, 4, 3, 2

_INFIX = {
    "add": (" + ", _SUM),
    "sub": (" - ", _SUM),
    "mul": (" * ", _PRODUCT),
    "div": (" / ", _PRODUCT),
    "lt": (" < ", _COMPARE),
    "le": (" <= ", _COMPARE),
    "gt": (" > ", _COMPARE),
    "ge": (" >= ", _COMPARE),
    "eq": (" == ", _COMPARE),
    "ne": (" != ", _COMPARE),
}

# How one dialect spells an op that is not infix: a format string over the operand texts,
# keyed on the op form (`maximum(t,s)`) or, failing that, on the op name.
# A plain call (`pypto.exp({0})`) takes its operands as they are; any other form names its
# own precedence in `_FORM_PRECEDENCE` and gets atom-level operands.
Spelling = Mapping[str, str]
Namer = Callable[[ir.Ref], str]

# Generated lines stay within ruff's 100 columns, a margin of one kept.
CODE_WIDTH = 99


class PythonEmitter:
    def __init__(self, tensor_spelling: Spelling, scalar_spelling: Spelling, name: Namer):
        self.tensor_spelling = tensor_spelling
        self.scalar_spelling = scalar_spelling
        self.name = name

    def emit(self, expr: ir.Expr) -> str:
        return self._emit(expr)[0]

    def _emit(self, expr: ir.Expr) -> tuple[str, int]:
        if isinstance(expr, ir.Const):
            text = ir.format_number(expr.value)
            return text, (_UNARY if expr.value < 0 else _ATOM)
        if isinstance(expr, ir.Ref):
            return self.name(expr), _ATOM
        if expr.op in _INFIX:
            symbol, precedence = _INFIX[expr.op]
            lhs, rhs = expr.operands
            # Left-associative: the right operand needs parentheses at equal precedence.
            return (
                self._wrap(lhs, precedence) + symbol + self._wrap(rhs, precedence + 1),
                precedence,
            )
        if expr.op == "neg":
            return "-" + self._wrap(expr.operands[0], _UNARY), _UNARY
        spelling = self.scalar_spelling if ir.is_scalar(expr) else self.tensor_spelling
        template = spelling.get(form(expr), spelling.get(expr.op))
        if template is None:
            raise ValueError(f"no spelling for `{form(expr)}` in this dialect")
        if template in _FORM_PRECEDENCE:
            operands = [self._wrap(operand, _ATOM) for operand in expr.operands]
            return template.format(*operands), _FORM_PRECEDENCE[template]
        operands = [self.emit(operand) for operand in expr.operands]
        return template.format(*operands, **_attributes(expr)), _ATOM

    def _wrap(self, expr: ir.Expr, precedence: int) -> str:
        text, own = self._emit(expr)
        return f"({text})" if own < precedence else text


_FORM_PRECEDENCE = {
    "{0} ** {1}": _POWER,
    "1.0 / math.sqrt({0})": _PRODUCT,
    "1.0 / {0}": _PRODUCT,
    "1.0 / (1.0 + math.exp(-{0}))": _PRODUCT,
    "{0}.T": _ATOM,
}

SCALAR_SPELLING: Spelling = ops.spellings("scalar")


def _attributes(expr: ir.Op) -> dict[str, str]:
    """An op's attributes as template arguments; a reduction over a single axis (every
    reduction after `chain_reductions`) also offers it as `axis`, the form PyPTO's calls take.
    A tensor op's result also offers its `shape` and PyPTO `dtype` (for ops that create), and
    one along an axis that axis's `last` position."""
    items = ir.attribute_items(expr.attrs)
    attributes = {name: _attribute_text(value) for name, value in items}
    if isinstance(expr.type, ir.TensorType):
        attributes.setdefault("shape", _attribute_text(expr.type.shape))
        attributes["dtype"] = expr.type.dtype.pypto_name
    if isinstance(expr.attrs, ir.Reduce) and len(expr.attrs.axes) == 1:
        attributes["axis"] = str(expr.attrs.axes[0])
    if ops.lookup(expr.op).kind is ops.Kind.REVERSE:
        attributes["last"] = str(expr.type.shape[expr.attrs.axis] - 1)  # the first index
    return attributes


def _attribute_text(value: object) -> str:
    """Shapes and axes print as Python lists, the form PyPTO's calls take."""
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return repr(value)


def _chain(expr: ir.Expr, precedence: int) -> list[tuple[str, ir.Expr]]:
    """A left-associative run of infix ops at one precedence: [("", a), (" + ", b), ...]."""
    if isinstance(expr, ir.Op) and expr.op in _INFIX and _INFIX[expr.op][1] == precedence:
        lhs, rhs = expr.operands
        return _chain(lhs, precedence) + [(_INFIX[expr.op][0], rhs)]
    return [("", expr)]


_CALL = re.compile(r"^(?P<head>[\w.]+)\((?P<arguments>.*)\)$")
_OPERAND = re.compile(r"^\{(\d)\}$")


def _layout(
    emitter: PythonEmitter,
    expr: ir.Expr,
    indent: str,
    prefix: str,
    suffix: str,
    precedence: int,
    width: int,
) -> list[str]:
    """Lines of `prefix expr suffix` within `width` where possible, broken Black-style: a
    long sum or product one operand per line in parentheses, a long call one argument per
    line."""
    line = f"{indent}{prefix}{emitter._wrap(expr, precedence)}{suffix}"
    if len(line) <= width or not isinstance(expr, ir.Op):
        return [line]
    inner = indent + "    "
    if expr.op in _INFIX:
        own = _INFIX[expr.op][1]
        lines = [f"{indent}{prefix}("]
        for symbol, operand in _chain(expr, own):
            operator = symbol.strip() + " " if symbol else ""
            lines += _layout(emitter, operand, inner, operator, "", own + bool(symbol), width)
        return lines + [f"{indent}){suffix}"]
    spelling = emitter.scalar_spelling if ir.is_scalar(expr) else emitter.tensor_spelling
    call = _CALL.match(spelling.get(form(expr), spelling.get(expr.op, "")))
    if call is None or expr.op in _INFIX:
        return [line]
    lines = [f"{indent}{prefix}{call['head']}("]
    operand_texts = [emitter.emit(operand) for operand in expr.operands]
    attributes = _attributes(expr)
    for argument in _top_level_arguments(call["arguments"]):
        operand = _OPERAND.match(argument)
        if operand:
            lines += _layout(emitter, expr.operands[int(operand[1])], inner, "", ",", 0, width)
        else:
            lines.append(f"{inner}{argument.format(*operand_texts, **attributes)},")
    return lines + [f"{indent}){suffix}"]


def _top_level_arguments(text: str) -> list[str]:
    """A template's call arguments, split at the commas outside brackets and parentheses
    (`{0}, 1, pypto.arange({last}, -1, -1)` is three)."""
    arguments, depth, start = [], 0, 0
    for position, character in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(character, 0)
        if character == "," and depth == 0:
            arguments.append(text[start:position].strip())
            start = position + 1
    return [*arguments, text[start:].strip()]


def emit_assignment(
    emitter: PythonEmitter, target: str, expr: ir.Expr, indent: str, width: int = CODE_WIDTH
) -> list[str]:
    """`target = expr` as source lines of at most `width` characters where possible."""
    return _layout(emitter, expr, indent, f"{target} = ", "", 0, width)


def emit_def(name: str, parameters: list[str], indent: str, width: int = CODE_WIDTH) -> list[str]:
    """`def name(parameters):` on one line within `width`, else one parameter per line."""
    return _wrapped(f"def {name}(", parameters, "):", indent, width)


def emit_call(name: str, arguments: list[str], indent: str, width: int = CODE_WIDTH) -> list[str]:
    """`name(arguments)` on one line within `width`, else one argument per line."""
    return _wrapped(f"{name}(", arguments, ")", indent, width)


def _wrapped(head: str, items: list[str], tail: str, indent: str, width: int) -> list[str]:
    line = f"{indent}{head}{', '.join(items)}{tail}"
    if len(line) <= width:
        return [line]
    return [f"{indent}{head}", *(f"{indent}    {item}," for item in items), f"{indent}{tail}"]


def uses_math(kernel: ir.Kernel) -> bool:
    """Whether some scalar arithmetic spells itself with the `math` module."""
    return any(
        isinstance(node, ir.Op)
        and ir.is_scalar(node)
        and "math." in SCALAR_SPELLING.get(node.op, "")
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
    )


def paragraph(lines: list[str], indent: str = "", width: int = 100) -> list[str]:
    """Lines of prose as given when each fits within `width`, else their words wrapped
    there at spaces only (long names stay whole)."""
    if all(len(indent + line) <= width for line in lines):
        return [indent + line for line in lines]
    return textwrap.wrap(
        " ".join(lines),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def docstring_filename(filename: str) -> str:
    """The spec's file name as generated docstrings quote it: the last path part, with
    backslashes, quotes and control characters escaped, so that no file name can end the
    docstring, break its escapes, or end the string a kernelbench module embeds it in."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    escaped = name.encode("unicode_escape").decode("ascii")
    return escaped.replace('"', '\\"').replace("'", "\\'")
