"""parse -> check -> partition -> lower (pass, pass, ...) per kernel -> forward program -> emit,
with every stage printable."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping

import attrs

from ptodsl.frontend.blocks import expand_blocks
from ptodsl.frontend.diagnostics import FrameError, Source, Span, SpecError
from ptodsl.frontend.parser import parse
from ptodsl.frontend.syntax import Spec
from ptodsl.frontend.typecheck import refuse_oversized_values, typecheck
from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import Forward, build_forward
from ptodsl.ir.target import PYPTO_0_2_0, Target
from ptodsl.ir.verify import verify, verify_forward
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
from ptodsl.passes.partition import partition
from ptodsl.passes.tiling import tile_phases
from ptodsl.passes.twin_operands import twin_operands

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
class KernelStages:
    """One kernel of the forward program: the part of the spec it computes (as checked),
    and its IR after each pass."""

    checked: ir.Kernel
    stages: tuple[tuple[str, ir.Kernel], ...]
    cut_because: FrameError | None = None  # why the spec was cut after this kernel

    @property
    def kernel(self) -> ir.Kernel:
        return self.stages[-1][1] if self.stages else self.checked


@attrs.frozen
class Lowered:
    """Every stage of one compilation that later stages and `--emit` need."""

    source: Source
    syntax: Spec
    expanded: Spec  # the syntax with every block instance inlined (frontend/blocks.py)
    checked: ir.Kernel  # the spec's meaning, before any pass: the torch reference's input
    parts: tuple[KernelStages, ...]  # the kernels, in the order forward calls them
    forward: Forward | None  # None when lowering stopped before the last pass
    tuning: ir.Tuning = ir.Tuning()  # the plan choices the planning passes were given
    # A spec whose result depends on the module mode is lowered for training mode, and
    # again for eval mode here (None: one program serves both)
    eval: Lowered | None = None

    @property
    def kernels(self) -> tuple[ir.Kernel, ...]:
        return tuple(part.kernel for part in self.parts)

    @property
    def kernel(self) -> ir.Kernel:
        """The one kernel of a one-kernel program (what most tools report on)."""
        (part,) = self.parts
        return part.kernel

    @property
    def stages(self) -> tuple[tuple[str, ir.Kernel], ...]:
        (part,) = self.parts
        return part.stages

    def after(self, pass_name: str) -> ir.Kernel:
        return dict(self.stages)[pass_name]


def lower(
    source: Source,
    dim_sizes: Mapping[str, int] | None = None,
    target: Target = PYPTO_0_2_0,
    until: str | None = None,
    tuning: ir.Tuning | None = None,
    mode: ir.Mode = ir.Mode.TRAINING,
) -> Lowered:
    """Runs the front end, cuts the spec into kernels (passes/partition.py) and runs the
    passes on each, or stops after the stage named `until` ("check" or a pass name); every
    `SpecError` comes out with its source. Every pass gets the same context: the target's
    forms and limits and the plan choices `tuning`. The IR's invariants are checked after
    the front end, after every pass and on the forward program, always (ptodsl.ir.verify): a
    violation is a bug in that pass, an internal error, never a kernel emitted from it."""
    context = PassContext(target, tuning or ir.Tuning())
    depth_limit = sys.getrecursionlimit()
    # The passes recurse over expressions, a few frames per level: a flat sum of 331
    # terms is a tree 331 deep, past Python's default limit of 1000 frames.
    sys.setrecursionlimit(max(depth_limit, RECURSION_LIMIT))
    try:
        syntax = parse(source.text)
        expanded = expand_blocks(syntax)
        checked = typecheck(expanded, dim_sizes, mode)
        verify(checked, "check", target)
        if until == "check":
            parts = (KernelStages(checked, ()),)
        else:
            refuse_oversized_values(checked)
            # a time loop's step is what is lowered; the spec's body holds it unrolled
            lowered = checked if checked.recurrence is None else checked.recurrence.step
            parts = _lowered_parts(lowered, context, until)
        program = eval_lowered = None
        if checked.mode is ir.Mode.TRAINING:
            eval_lowered = lower(source, dim_sizes, target, until, tuning, ir.Mode.EVAL)
        if until is None or until == PASS_NAMES[-1]:
            called = [(part.kernel, part.cut_because) for part in parts]
            eval_program = eval_lowered.forward if eval_lowered is not None else None
            program = build_forward(checked, called, eval_program)
            verify_forward(program)
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
    tuning = tuning or ir.Tuning()
    return Lowered(source, syntax, expanded, checked, parts, program, tuning, eval_lowered)


def _lowered_parts(
    checked: ir.Kernel, context: PassContext, until: str | None
) -> tuple[KernelStages, ...]:
    """The spec's kernels, each lowered through every pass (the partition's judge), their
    stages up to `until`. A spec that fails after `until` for another reason than its frame
    still shows its stages up to there."""
    try:
        per_op = context.tuning.kernels == "per_op"
        parts = partition(checked, lambda kernel: _passes(kernel, context), per_op)
    except SpecError:
        if until is None:
            raise
        return (KernelStages(checked, _passes(checked, context, until)),)
    kept = PASS_NAMES[: PASS_NAMES.index(until) + 1] if until else PASS_NAMES
    return tuple(
        KernelStages(
            part.kernel,
            tuple(stage for stage in part.lowering if stage[0] in kept),
            part.cut_because,
        )
        for part in parts
    )


def _passes(
    kernel: ir.Kernel, context: PassContext, until: str | None = None
) -> tuple[tuple[str, ir.Kernel], ...]:
    """`kernel` after each pass, up to `until`, each verified, under the plan choices for
    this kernel."""
    context = attrs.evolve(context, tuning=context.tuning.for_kernel(kernel.name))
    stages = []
    for index, (name, run) in enumerate(PASSES):
        later = PASSES[index + 1 :]
        planned = functools.partial(_lowered_by, later, context)
        before, kernel = kernel, run(kernel, attrs.evolve(context, planned=planned))
        verify(kernel, name, context.target, before)
        stages.append((name, kernel))
        if name == until:
            break
    return tuple(stages)


def _lowered_by(
    passes: tuple[tuple[str, Pass], ...], context: PassContext, kernel: ir.Kernel
) -> ir.Kernel:
    """`kernel` after `passes`, unverified: an estimate's input, not a plan that is emitted."""
    for _, run in passes:
        kernel = run(kernel, context)
    return kernel
