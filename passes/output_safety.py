"""Makes every output write safe under PyPTO's move semantics.

`out[:] = t` moves `t` into `out`: reading `t` afterwards fails ("tile shape not set"), and
`out[:] = x` with `x` an input writes nothing. So a store clones its value when that value
is an input, or a named value that a later statement reads again; and when it is a crop of
a join (`y = cat([a, b], axis=0)[:, :15]`): pypto 0.2.0 assembles a view of a
`pypto.concat` result into the output with the join's extent (FB200F, "ASSEMBLE ...
dynValidShape"), where a copy of the view has the view's own; and when it is a let whose
phase assembles it into an allocated tensor (a convolution, a window, a matmul):
`y = h` after `let h = conv(x)` moved the allocation, not what was assembled into it, and
wrote garbage (1e37 at batch 2, found by the partition's kernels, which store intermediates
this way).
"""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _names_read(expr: ir.Expr) -> set[str]:
    return {node.name for node in ir.walk(expr) if isinstance(node, ir.Ref)}


def _is_join(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.Op) and ops.lookup(expr.op).kind is ops.Kind.CONCAT


def _crops_a_join(value: ir.Expr, joins: set[str]) -> bool:
    if not (isinstance(value, ir.Op) and isinstance(value.attrs, ir.Slice)):
        return False
    (operand,) = value.operands
    return _is_join(operand) or (isinstance(operand, ir.Ref) and operand.name in joins)


# Ops whose phases assemble their value, part by part, into a tensor allocated for it.
ASSEMBLED = frozenset({ops.Kind.CONV, ops.Kind.WINDOW, ops.Kind.MATMUL})


def is_assembled(expr: ir.Expr) -> bool:
    return isinstance(expr, ir.Op) and ops.lookup(expr.op).kind in ASSEMBLED


def output_safety(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    inputs = {tensor.name for tensor in kernel.inputs}
    joins = {s.name for s in kernel.body if isinstance(s, ir.Let) and _is_join(s.value)}
    assembled = {s.name for s in kernel.body if isinstance(s, ir.Let) and is_assembled(s.value)}
    body = []
    for index, stmt in enumerate(kernel.body):
        if isinstance(stmt, ir.Store) and _crops_a_join(stmt.value, joins):
            stmt = attrs.evolve(stmt, clone=True)
        elif isinstance(stmt, ir.Store) and isinstance(stmt.value, ir.Ref):
            name = stmt.value.name
            read_later = any(name in _names_read(s.value) for s in kernel.body[index + 1 :])
            stmt = attrs.evolve(stmt, clone=name in inputs or name in assembled or read_later)
        body.append(stmt)
    return attrs.evolve(kernel, body=tuple(body))
