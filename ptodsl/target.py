"""What the code generator's target, PyPTO 0.2.0, supports: op forms and tile limits.

An op *form* is its name with the kind of each operand, `t` for a tensor and `s` for a
compile-time scalar: `sub(s,t)` is `1.0 - x`. Legalization rewrites every form the target
lacks; the rewrites live in `ptodsl.passes.legalize`.
"""

from __future__ import annotations

import attrs

from ptodsl import ir


def form(node: ir.Op) -> str:
    kinds = ",".join("s" if ir.is_scalar(operand) else "t" for operand in node.operands)
    return f"{node.op}({kinds})"


def _forms(spec: str) -> frozenset[str]:
    return frozenset(spec.split())


@attrs.frozen
class Target:
    name: str
    forms: frozenset[str]
    max_rank: int
    max_tile_elements: int  # prod(tile) per op
    max_auto_tiles: int  # tiles one vector phase may expand to without a loop
    min_contiguous_bytes: int  # wanted bytes along the last axis of a tile
    reduce_align_bytes: int  # the reduced tensor's last-axis tile must be a multiple

    def supports(self, node: ir.Op) -> bool:
        return form(node) in self.forms


PYPTO_0_2_0 = Target(
    name="pypto-0.2.0",
    # Scalar-first arithmetic (`1.0 - x`), unary minus, tanh, clip, expm1, mean and the
    # softmax family are missing or crash on some builds: they are absent here, so
    # legalization rewrites them. prod is absent too: its SIM step fails, and nothing
    # rewrites it.
    forms=_forms(
        """
        add(t,t) add(t,s) sub(t,t) sub(t,s) mul(t,t) mul(t,s) div(t,t) div(t,s)
        exp(t) log(t) sqrt(t) rsqrt(t) abs(t) reciprocal(t) sigmoid(t) relu(t) log1p(t)
        sin(t) cos(t) sign(t)
        maximum(t,t) maximum(t,s) minimum(t,t) minimum(t,s) pow(t,s)
        lt(t,t) lt(t,s) le(t,t) le(t,s) gt(t,t) gt(t,s) ge(t,t) ge(t,s)
        eq(t,t) eq(t,s) ne(t,t) ne(t,s)
        where(t,t,t) where(t,s,t) where(t,t,s) where(t,s,s)
        sum(t) amax(t) amin(t) matmul(t,t)
        """
    ),
    max_rank=4,
    max_tile_elements=16384,
    max_auto_tiles=2048,
    min_contiguous_bytes=1024,
    reduce_align_bytes=32,
)
