"""Common subexpression elimination: a tensor subexpression that occurs more than once is
computed once, into a `let` named `_t<n>` (spec names cannot start with `_`).

Library rewrites such as softmax repeat `exp(x - max(x))`; so may people. Structural
equality ignores spans, so two occurrences written in different places still match. Lets
that merely rename another value are dropped first, so that renamed copies match too.
"""

from __future__ import annotations

from collections import Counter

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.passes import DEFAULT_CONTEXT, PassContext


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


def _without_aliases(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """`let a = b` only renames `b` (a CSE binding, or the user's): read `b` directly, so
    that expressions over `a` and over `b` are seen to be the same."""
    aliases: dict[str, ir.Ref] = {}

    def resolve(node: ir.Expr) -> ir.Expr:
        if isinstance(node, ir.Ref) and node.name in aliases:
            return attrs.evolve(aliases[node.name], span=node.span)
        return node

    kept = []
    for stmt in body:
        stmt = attrs.evolve(stmt, value=ir.map_expr(stmt.value, resolve))
        if isinstance(stmt, ir.Let) and isinstance(stmt.value, ir.Ref):
            aliases[stmt.name] = stmt.value
            continue
        kept.append(stmt)
    return tuple(kept)


def cse(kernel: ir.Kernel, ctx: PassContext = DEFAULT_CONTEXT) -> ir.Kernel:
    body = _without_aliases(kernel.body)
    index = 0
    while (key := _repeated(body)) is not None:
        first = next(i for i, s in enumerate(body) if any(_key(n) == key for n in ir.walk(s.value)))
        value = next(n for n in ir.walk(body[first].value) if _key(n) == key)
        if isinstance(body[first], ir.Let) and _key(body[first].value) == key:
            # Already named by a `let`: later occurrences read that name.
            name, binding = body[first].name, ()
            first += 1
        else:
            name, index = f"_t{index}", index + 1
            binding = (ir.Let(name, value, value.span),)
        ref = ir.Ref(name, value.type, value.span)

        def replace(node: ir.Expr, key=key, ref=ref) -> ir.Expr:
            return ref if isinstance(node, ir.Op) and _key(node) == key else node

        rest = tuple(attrs.evolve(s, value=ir.map_expr(s.value, replace)) for s in body[first:])
        body = _without_aliases(body[:first] + binding + rest)
    return attrs.evolve(kernel, body=body)
