"""IR expressions as Python syntax trees, for the PyPTO kernel and for the torch reference.

Each op is spelled by its registry entry (`ops.OpDef.spelling`): a template parsed into a
tree whose holes take the operands' trees (ptodsl.emission.pytree), so the printed
parentheses follow the tree and never a table of spellings. Compile-time scalars are spelled
in the "scalar" dialect wherever they stand; tensors in the emitter's own dialect ("pypto"
or "torch").
"""

from __future__ import annotations

import ast

from ptodsl.emission import pytree
from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.target import form


class PythonEmitter:
    def __init__(self, dialect: str):
        self.dialect = dialect

    def expr(self, expr: ir.Expr) -> ast.expr:
        if isinstance(expr, ir.Const):
            return pytree.value(float(expr.value))
        if isinstance(expr, ir.Ref):
            return pytree.name(expr.name)
        template = spelling(expr, self.dialect)
        operands = [self.expr(operand) for operand in expr.operands]
        keys = pytree.holes(template)
        attributes = {key: _attribute(expr, key) for key in keys if not key.isdigit()}
        return pytree.fill(template, operands, attributes)


def spelling(expr: ir.Op, dialect: str) -> str:
    """The registry's template for this op in `dialect` ("scalar" for a scalar result)."""
    dialect = "scalar" if ir.is_scalar(expr) else dialect
    template = ops.lookup(expr.op).spelling(dialect, form(expr))
    if template is None:
        raise ValueError(f"no {dialect} spelling for `{form(expr)}`")
    return template


def _attribute(expr: ir.Op, key: str) -> object:
    """An attribute hole's value: the op's attribute of that name (a shape or axes as a
    list, the form PyPTO's calls take); a reduction over a single axis (every reduction after
    `chain_reductions`) also offers it as `axis`; a tensor result offers its `shape` and
    PyPTO `dtype` name, and an op along an axis that axis's `last` position."""
    own = dict(ir.attribute_items(expr.attrs))
    if key == "dtype" and isinstance(expr.type, ir.TensorType):
        return expr.type.dtype.pypto_name
    if key == "axis" and isinstance(expr.attrs, ir.Reduce) and len(expr.attrs.axes) == 1:
        return expr.attrs.axes[0]
    if key == "last" and ops.lookup(expr.op).kind is ops.Kind.REVERSE:
        return expr.type.shape[expr.attrs.axis] - 1  # the first index
    if key == "shape" and key not in own:
        own["shape"] = expr.type.shape
    if key not in own:
        raise ValueError(f"`{form(expr)}` has no attribute `{key}` for its spelling")
    found = own[key]
    return list(found) if isinstance(found, tuple) else found


def uses_math(kernel: ir.Kernel) -> bool:
    """Whether some scalar arithmetic spells itself with the `math` module."""
    return any(
        isinstance(node, ir.Op) and ir.is_scalar(node) and "math." in spelling(node, "scalar")
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
    )


def spec_filename(filename: str) -> str:
    """The spec's file name as generated docstrings quote it: the last path part (the
    printer escapes what a docstring cannot hold as it is)."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1]


# Names pycodestyle's E741 finds ambiguous (they read as 1 and 0); a spec may use them.
AMBIGUOUS_NAMES = frozenset({"l", "O", "I"})


def ambiguous_names_noqa(spec_names: frozenset[str]) -> list[pytree.Comment]:
    """The module header's comment that keeps the spec's ambiguous names as written."""
    ambiguous = sorted(spec_names & AMBIGUOUS_NAMES)
    if not ambiguous:
        return []
    names = ", ".join(f"`{n}`" for n in ambiguous)
    return [pytree.Comment(f"ruff: noqa: E741 (the spec's names {names} are kept as written)")]
