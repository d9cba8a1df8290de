"""Lowering passes. Each module holds one pass with one signature: `(kernel, ctx) -> kernel`,
where `ctx` carries what a pass may depend on besides the IR: the target's forms and limits,
and the plan choices of a tuned plan."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0, Target


@attrs.frozen
class PassContext:
    target: Target = PYPTO_0_2_0
    tuning: ir.Tuning = ir.Tuning()
    # The kernel as the passes after the running one leave it, for a decision that depends
    # on the final plan (launches weighs a launch's memory by the loops planned for it).
    # None: the kernel as it stands.
    planned: Callable[[ir.Kernel], ir.Kernel] | None = None

    def plan(self, kernel: ir.Kernel) -> ir.Kernel:
        return kernel if self.planned is None else self.planned(kernel)


DEFAULT_CONTEXT = PassContext()
