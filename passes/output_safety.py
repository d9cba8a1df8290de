"""Makes every output write safe under PyPTO's move semantics.

`out[:] = t` moves `t` into `out`: reading `t` afterwards fails ("tile shape not set"), and
`out[:] = x` with `x` an input writes nothing. So a store clones its value when that value
is an input, or a named value that a later statement reads again.
"""

from __future__ import annotations

import attrs

from ptodsl import ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


def _names_read(expr: ir.Expr) -> set[str]:
    return {node.name for node in ir.walk(expr) if isinstance(node, ir.Ref)}


def output_safety(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    inputs = {tensor.name for tensor in kernel.inputs}
    body = []
    for index, stmt in enumerate(kernel.body):
        if isinstance(stmt, ir.Store) and isinstance(stmt.value, ir.Ref):
            name = stmt.value.name
            read_later = any(name in _names_read(s.value) for s in kernel.body[index + 1 :])
            stmt = attrs.evolve(stmt, clone=name in inputs or read_later)
        body.append(stmt)
    return attrs.evolve(kernel, body=tuple(body))
