"""Lowering passes. Each module holds one pass with one signature: `(kernel, ctx) -> kernel`,
where `ctx` carries what a pass may depend on besides the IR: the target's forms and limits,
and the plan choices of a tuned plan."""

from __future__ import annotations

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0, Target


@attrs.frozen
class PassContext:
    target: Target = PYPTO_0_2_0
    tuning: ir.Tuning = ir.Tuning()


DEFAULT_CONTEXT = PassContext()
