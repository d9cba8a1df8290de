"""Common subexpression elimination: a tensor subexpression that occurs more than once is
computed once, into a `let` named `_t<n>` (spec names cannot start with `_`).

Library rewrites such as softmax repeat `exp(x - max(x))`; so may people. Structural
equality ignores spans, so two occurrences written in different places still match.
"""

from __future__ import annotations

from collections import Counter

import attrs

from ptodsl import ir


def _key(node: ir.Expr) -> tuple:
    if isinstance(node, ir.Const):
        return ("const", node.value)
    if isinstance(node, ir.Ref):
        return ("ref", node.name)
    return (node.op, node.attrs, node.type, tuple(map(_key, node.operands)))


def _size(key: tuple) -> int:
    return 1 if key[0] in ("const", "ref") else 1 + sum(map(_size, key[3]))


def _repeated(body: tuple[ir.Stmt, ...]) -> tuple | None:
    """The largest tensor subexpression that occurs twice or more, if any."""
    counts = Counter(
        _key(node)
        for stmt in body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and isinstance(node.type, ir.TensorType)
    )
    repeated = [key for key, count in counts.items() if count > 1]
    return max(repeated, key=_size) if repeated else None


def cse(kernel: ir.Kernel) -> ir.Kernel:
    body = kernel.body
    index = 0
    while (key := _repeated(body)) is not None:
        name = f"_t{index}"
        index += 1
        first = next(i for i, s in enumerate(body) if any(_key(n) == key for n in ir.walk(s.value)))
        value = next(n for n in ir.walk(body[first].value) if _key(n) == key)
        ref = ir.Ref(name, value.type, value.span)

        def replace(node: ir.Expr, key=key, ref=ref) -> ir.Expr:
            return ref if isinstance(node, ir.Op) and _key(node) == key else node

        rest = tuple(attrs.evolve(s, value=ir.map_expr(s.value, replace)) for s in body[first:])
        body = body[:first] + (ir.Let(name, value, value.span),) + rest
    return attrs.evolve(kernel, body=body)
