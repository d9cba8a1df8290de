"""parse -> check -> lower (pass, pass, ...) -> emit, with every stage printable."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

import attrs

from ptodsl import ir
from ptodsl.diagnostics import Source, Span, SpecError
from ptodsl.parser import parse
from ptodsl.passes import PassContext
from ptodsl.passes.align_axes import align_axes
from ptodsl.passes.chain_reductions import chain_reductions
from ptodsl.passes.cse import cse
from ptodsl.passes.expand_broadcasts import expand_broadcasts
from ptodsl.passes.fold_constants import fold_constants
from ptodsl.passes.fold_reshapes import fold_reshapes
from ptodsl.passes.hoist_scalars import hoist_scalars
from ptodsl.passes.isolate_reductions import isolate_reductions
from ptodsl.passes.launches import split_launches
from ptodsl.passes.legalize import legalize
from ptodsl.passes.loops import insert_loops
from ptodsl.passes.materialise import materialise
from ptodsl.passes.merge_axes import merge_axes
from ptodsl.passes.output_safety import output_safety
from ptodsl.passes.tiling import tile_phases
from ptodsl.passes.twin_operands import twin_operands
from ptodsl.syntax import Spec
from ptodsl.target import PYPTO_0_2_0, Target
from ptodsl.typecheck import typecheck
from ptodsl.verify import verify

Pass = Callable[[ir.Kernel, PassContext], ir.Kernel]
RECURSION_LIMIT = 20_000  # frames while lowering: statements of up to MAX_TERMS nodes fit

# In order. Each name is also an `--emit` stage showing the IR after that pass.
PASSES: tuple[tuple[str, Pass], ...] = (
    ("fold_reshapes", fold_reshapes),
    ("twin_operands", twin_operands),
    ("launches", split_launches),
    ("fold_constants", fold_constants),
    ("legalize", legalize),
    ("hoist_scalars", hoist_scalars),
    ("align_axes", align_axes),
    ("cse", cse),
    ("isolate_reductions", isolate_reductions),
    ("output_safety", output_safety),
    ("merge_axes", merge_axes),
    ("chain_reductions", chain_reductions),
    ("expand_broadcasts", expand_broadcasts),
    ("tiling", tile_phases),
    ("loops", insert_loops),
    ("materialise", materialise),
)
PASS_NAMES = tuple(name for name, _ in PASSES)


@attrs.frozen
class Lowered:
    """Every stage of one compilation that later stages and `--emit` need."""

    source: Source
    syntax: Spec
    checked: ir.Kernel  # the spec's meaning, before any pass: the torch reference's input
    stages: tuple[tuple[str, ir.Kernel], ...]  # the IR after each pass
    tuning: ir.Tuning = ir.Tuning()  # the plan choices the planning passes were given

    @property
    def kernel(self) -> ir.Kernel:
        return self.stages[-1][1] if self.stages else self.checked

    def after(self, pass_name: str) -> ir.Kernel:
        return dict(self.stages)[pass_name]


def lower(
    source: Source,
    dim_sizes: Mapping[str, int] | None = None,
    target: Target = PYPTO_0_2_0,
    until: str | None = None,
    tuning: ir.Tuning | None = None,
) -> Lowered:
    """Runs the front end and the passes, or stops after the stage named `until` ("check"
    or a pass name); every `SpecError` comes out with its source. Every pass gets the same
    context: the target's forms and limits and the plan choices `tuning`. The IR's invariants
    are checked after the front end and after every pass, always (ptodsl.verify): a
    violation is a bug in that pass, an internal error, never a kernel emitted from it."""
    context = PassContext(target, tuning or ir.Tuning())
    depth_limit = sys.getrecursionlimit()
    # The passes recurse over expressions, a few frames per level: a flat sum of 331
    # terms is a tree 331 deep, past Python's default limit of 1000 frames.
    sys.setrecursionlimit(max(depth_limit, RECURSION_LIMIT))
    try:
        syntax = parse(source.text)
        checked = typecheck(syntax, dim_sizes)
        stages = []
        kernel = checked
        verify(kernel, "check", target)
        for name, run in PASSES if until != "check" else ():
            before, kernel = kernel, run(kernel, context)
            verify(kernel, name, target, before)
            stages.append((name, kernel))
            if name == until:
                break
    except SpecError as error:
        raise error.attach(source) from None
    except RecursionError:
        # The parse tree recurses over expressions before typecheck can bound them: a spec
        # nested thousands deep ends here rather than in a traceback.
        raise SpecError(
            "expressions are nested too deeply for ptodsl",
            Span.point(1, 1),
            note="bind inner parts with `let` to flatten the expression",
        ).attach(source) from None
    finally:
        sys.setrecursionlimit(depth_limit)
    return Lowered(source, syntax, checked, tuple(stages), tuning or ir.Tuning())
