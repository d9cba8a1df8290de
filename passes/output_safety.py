"""Makes every output write safe under PyPTO's move semantics.

`out[:] = t` moves `t` into `out`: reading `t` afterwards fails, and `out[:] = x` with `x` an
input writes nothing. So stores go after every `let` (outputs are never read, so this keeps
the meaning), and a store clones its value when that value is an input, or a named value
that a later store reads again.
"""

from __future__ import annotations

import attrs

from ptodsl import ir


def _names_read(expr: ir.Expr) -> set[str]:
    return {node.name for node in ir.walk(expr) if isinstance(node, ir.Ref)}


def output_safety(kernel: ir.Kernel) -> ir.Kernel:
    lets = [stmt for stmt in kernel.body if isinstance(stmt, ir.Let)]
    stores = [stmt for stmt in kernel.body if isinstance(stmt, ir.Store)]
    inputs = {tensor.name for tensor in kernel.inputs}
    safe_stores = []
    for index, store in enumerate(stores):
        value = store.value
        read_later = set().union(*(_names_read(s.value) for s in stores[index + 1 :]))
        moves_shared_value = isinstance(value, ir.Ref) and (
            value.name in inputs or value.name in read_later
        )
        safe_stores.append(attrs.evolve(store, clone=moves_shared_value))
    return attrs.evolve(kernel, body=tuple(lets + safe_stores))
