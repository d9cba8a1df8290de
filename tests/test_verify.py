"""The IR verifier holds after every pass for every example and random specs (every tuning
candidate: test_tuning, which lowers each once), and it catches IR that breaks an
invariant (as a bug in a pass would)."""

from __future__ import annotations

import attrs
import pytest
from conftest import EXAMPLES, TINY_TILES, example_dims
from hypothesis import given
from specgen import specs

import ptodsl
from ptodsl import pipeline
from ptodsl.frontend.diagnostics import Source, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.ir.verify import VerifyError, verify
from ptodsl.pipeline import lower
from ptodsl.tools import cli


def source_of(path):
    return Source(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_verifies_after_every_pass(path):
    lower(source_of(path), example_dims(path))  # lower verifies after every pass, always


@given(specs())
def test_random_specs_verify_after_every_pass(spec):
    try:
        lower(Source(spec.text, "random.pto"))
    except SpecError:
        pass  # a legal rejection (e.g. a plan PyPTO cannot take); the verifier ran before it


ELU = Source(
    "kernel k\ndims M = 64, N = 512\ninput x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(x > 0.0, x, exp(x) - 1.0)\n",
    "k.pto",
)
SUM = Source("kernel s\ninput x: f32[8, 16]\noutput y: f32[8]\ny = sum(x, axis=1)\n", "s.pto")


def broken(kernel: ir.Kernel, stage: str, message: str, before: ir.Kernel | None = None) -> None:
    with pytest.raises(VerifyError, match=message):
        verify(kernel, stage, PYPTO_0_2_0, before)


def test_the_verifier_catches_broken_ir():
    checked = lower(ELU, until="check").checked
    (store,) = checked.body
    undefined = attrs.evolve(store, value=ir.Ref("z", store.value.type, store.span))
    broken(attrs.evolve(checked, body=(undefined,)), "check", "reads `z` before it is defined")
    broken(attrs.evolve(checked, body=()), "check", "output `y` is never stored")
    unknown = checked.map_body(lambda n: attrs.evolve(n, op="cummax") if n is store.value else n)
    broken(unknown, "check", "no op `cummax`")
    reshaped = attrs.evolve(store.value, type=ir.TensorType((64, 1), ir.DType.F32))
    wrong_type = r"`where` of f32\[64, 512\].* has type f32\[64, 1\], not f32\[64, 512\]"
    broken(attrs.evolve(checked, body=(attrs.evolve(store, value=reshaped),)), "check", wrong_type)
    # a form the target lacks, in IR that claims only target forms (as legalize's does)
    tanh = lower(Source(ELU.text.replace("exp(x) - 1.0", "tanh(x)"), "t.pto"), until="check")
    verify(tanh.checked, "check", PYPTO_0_2_0)  # claiming nothing, it may hold any form
    legal = attrs.evolve(tanh.checked, target_forms=True)
    broken(legal, "legalize", "`tanh.t.` is not a pypto-0.2.0 form")

    summed = lower(SUM, until="check").checked
    (total,) = summed.body
    wrong_axes = attrs.evolve(total.value, attrs=ir.Reduce((0,), keepdim=False))
    wrong_sum = r"`sum` of f32\[8, 16\] has type f32\[8\], not f32\[16\]"
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=wrong_axes),)), "check", wrong_sum)
    # attributes of another op family, or none where the entry names a class
    untyped = attrs.evolve(total.value, attrs=ir.Along(0))
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=untyped),)), "check", "not Reduce")
    bare = attrs.evolve(total.value, attrs=None)
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=bare),)), "check", "not Reduce")

    looped = lower(ELU).kernel
    (phase,) = looped.schedule.phases
    too_big = attrs.evolve(phase, tile=(64, 512))
    broken(attrs.evolve(looped, schedule=ir.Schedule((too_big,))), "loops", "tile budget")
    short = attrs.evolve(phase, loop=ir.Loop(count=1, chunk=16, tail=0))
    broken(attrs.evolve(looped, schedule=ir.Schedule((short,))), "loops", "loop covers 16")


# Tiny limits make small kernels loop, with tails (as tests/test_loops_in_sim.py does).
# Phase 0 assembles `t` into a temporary and `s`'s partial results, phase 1 the output `y`;
# both loops have a tail, which runs first: [SetVecTiles, Allocate t, Allocate _parts_s,
# BlockLoop, Comment, SetVecTiles, Assign s] and [SetVecTiles, BlockLoop].
PARTS = Source(
    "kernel p\ninput x: f32[50, 64]\noutput y: f32[50, 64]\n"
    "let t = exp(x)\nlet s = sum(t * t)\ny = t / s\n",
    "p.pto",
)
# [SetVecTiles, BlockLoop] whose blocks accumulate into `y`.
TOTAL = Source("kernel t\ninput x: f32[23, 512]\noutput y: f32[]\ny = sum(x)\n", "t.pto")


def replace(instructions: tuple, index: int, *new) -> tuple:
    return (*instructions[:index], *new, *instructions[index + 1 :])


class Materialised:
    """A lowered kernel whose materialised program a test breaks, one change at a time."""

    def __init__(self, source: Source, target=TINY_TILES):
        self.target = target
        self.kernel = lower(source, target=target).kernel
        verify(self.kernel, "materialise", target)  # intact, it verifies

    def code(self, phase: int) -> tuple:
        return self.kernel.program.phases[phase].instructions

    def loop(self, phase: int) -> ir.BlockLoop:
        (loop,) = (i for i in self.code(phase) if isinstance(i, ir.BlockLoop))
        return loop

    def with_code(self, phase: int, instructions: tuple) -> ir.Kernel:
        phases = self.kernel.program.phases
        changed = attrs.evolve(phases[phase], instructions=instructions)
        return attrs.evolve(self.kernel, program=ir.Program(replace(phases, phase, changed)))

    def with_loop(self, phase: int, **changes) -> ir.Kernel:
        code = self.code(phase)
        index = code.index(self.loop(phase))
        return self.with_code(
            phase, replace(code, index, attrs.evolve(self.loop(phase), **changes))
        )

    def broken(self, kernel: ir.Kernel, message: str) -> None:
        with pytest.raises(VerifyError, match=message):
            verify(kernel, "materialise", self.target)


def test_the_verifier_catches_broken_materialised_names_and_types():
    parts = Materialised(PARTS)
    span = parts.kernel.body[0].span
    f32 = ir.DType.F32
    # a block-local name read after its loop, which does not export it
    s_chunk = ir.Ref("_chunk_s", ir.TensorType((1, 1), f32), span)
    combine = parts.code(0)[6]
    local = attrs.evolve(combine, value=attrs.evolve(combine.value, operands=(s_chunk,)))
    parts.broken(parts.with_code(0, replace(parts.code(0), 6, local)), "reads `_chunk_s` before")
    # a name read as another type than it was defined with
    misread = ir.Ref("_parts_s", ir.TensorType((4, 1), f32), span)
    wrong = attrs.evolve(combine, value=attrs.evolve(combine.value, operands=(misread,)))
    parts.broken(
        parts.with_code(0, replace(parts.code(0), 6, wrong)),
        r"reads `_parts_s` as f32\[4, 1\], defined as f32\[3, 1\]",
    )
    # an expression that is not well typed at the block's size
    body = parts.loop(0).body
    mistyped = attrs.evolve(body[1], value=attrs.evolve(body[1].value, type=combine.value.type))
    parts.broken(parts.with_loop(0, body=replace(body, 1, mistyped)), "`exp` of f32")
    # a kernel tensor bound again
    rebinds = replace(parts.code(0), 6, attrs.evolve(combine, name="x"))
    parts.broken(parts.with_code(0, rebinds), "binds `x`, a kernel tensor")
    # a loop variable outside its loop
    tail = parts.loop(0).tail
    outside = attrs.evolve(tail[1], offsets=("offset", 0))
    parts.broken(parts.with_loop(0, tail=replace(tail, 1, outside)), "`offset` is not a variable")
    # code missing for a phase
    one_phase = attrs.evolve(parts.kernel, program=ir.Program(parts.kernel.program.phases[:1]))
    parts.broken(one_phase, r"code for phases \[0\], but the schedule has 2 phases")


def test_the_verifier_catches_broken_views_assembles_and_coverage():
    parts = Materialised(PARTS)
    # [SetVecTiles, View _tail_x, Assign, Assemble t, Assign, Assemble, SetVecTiles]
    tail = parts.loop(0).tail
    past_the_end = attrs.evolve(tail[1], offsets=(49, 0))
    parts.broken(
        parts.with_loop(0, tail=replace(tail, 1, past_the_end)),
        r"view `_tail_x` of `x`: \[2, 64\] at \[49, 0\] exceeds \[50, 64\]",
    )
    body = parts.loop(0).body  # [View, Assign _chunk_t, Assemble t, Assign _chunk_s, Assemble]
    too_long = attrs.evolve(body[0], type=ir.TensorType((30, 64), ir.DType.F32))
    parts.broken(
        parts.with_loop(0, body=replace(body, 0, too_long)), r"\[30, 64\] at \[24, 0\] exceeds"
    )
    outside = attrs.evolve(tail[5], offsets=(3, 0))
    parts.broken(parts.with_loop(0, tail=replace(tail, 5, outside)), "in `_parts_s`: .* exceeds")
    overlapping = attrs.evolve(tail[3], offsets=(47, 0))
    parts.broken(parts.with_loop(0, tail=replace(tail, 3, overlapping)), "overlaps in `t` at 47")
    # an output left partly unwritten
    y_tail = parts.loop(1).tail  # [SetVecTiles, View, Assign, Assemble y, SetVecTiles]
    parts.broken(parts.with_loop(1, tail=replace(y_tail, 3)), "assembles `y` up to 48 of 50")
    parts.broken(parts.with_code(1, parts.code(1)[:1]), "output `y` is never written whole")
    # a temporary never assembled, and so read before it is written
    unassembled = attrs.evolve(parts.loop(0), body=replace(body, 2), tail=replace(tail, 3))
    code = replace(parts.code(0), 3, unassembled)
    parts.broken(parts.with_code(0, code), "temporary `t` is never written whole")
    parts.broken(parts.with_code(0, code), "reads `t` before it is written whole")


def test_the_verifier_catches_broken_loops_tiles_and_accumulations():
    parts = Materialised(PARTS)
    parts.broken(parts.with_loop(0, chunk=1000), "is not its phase's planned loop")
    parts.broken(parts.with_loop(0, tail=()), "has a tail of 2 but 0 tail instructions")
    parts.broken(parts.with_loop(0, offset="i"), "variables shadow a name")
    untiled = attrs.evolve(parts.loop(1), tail=parts.loop(1).tail[1:])  # the tail's tiles too
    no_tiles = parts.with_code(1, (untiled,))
    parts.broken(no_tiles, "vector work runs before vector tiles")
    too_big = ir.SetVecTiles((16, 64))
    parts.broken(parts.with_code(1, replace(parts.code(1), 0, too_big)), "exceeds the tile budget")

    total = Materialised(TOTAL)
    body = total.loop(0).body  # [View _chunk_x, Assign _chunk_y, Accumulate]
    tail = total.loop(0).tail  # the same, run first: its Accumulate writes `y`
    accumulate = body[2]
    unwritten = attrs.evolve(tail[2], overwrites=False)
    total.broken(total.with_loop(0, tail=replace(tail, 2, unwritten)), "into `y` before it is")
    rewritten = attrs.evolve(accumulate, first_iteration="i")
    total.broken(total.with_loop(0, body=replace(body, 2, rewritten)), "dropping earlier blocks")
    every_time = attrs.evolve(accumulate, overwrites=True)
    total.broken(total.with_loop(0, body=replace(body, 2, every_time)), "in every iteration")
    other_variable = attrs.evolve(accumulate, first_iteration="offset")
    total.broken(
        total.with_loop(0, tail=replace(tail, 2, unwritten), body=replace(body, 2, other_variable)),
        "not its loop's index",
    )
    whole_block = attrs.evolve(accumulate, part="_chunk_x")
    total.broken(
        total.with_loop(0, body=replace(body, 2, whole_block)),
        r"accumulates f32\[5, 512\] into output `y` of f32\[1, 1\]",
    )
    no_combine = attrs.evolve(accumulate, reduction="exp")
    total.broken(total.with_loop(0, body=replace(body, 2, no_combine)), "no combine rule")

    decls = "input a: f32[16, 300]\ninput b: f32[300, 16]\noutput c: f32[16, 16]\n"
    long_k = attrs.evolve(PYPTO_0_2_0, max_inner_axis=128)
    long = Materialised(Source(f"kernel m\n{decls}c = a @ b\n", "m.pto"), long_k)
    long.broken(long.with_code(0, long.code(0)[1:]), "a matmul runs before cube tiles are set")
    (phase,) = long.kernel.schedule.phases
    short = attrs.evolve(phase, k_loop=attrs.evolve(phase.k_loop, count=1))
    long.broken(
        attrs.evolve(long.kernel, schedule=ir.Schedule((short,))),
        r"loop covers 100 of axis 2 \(300\)",
    )


def test_lower_verifies_without_being_asked(monkeypatch, tmp_path, capsys):
    """Every compile verifies after every pass: a pass that breaks an invariant makes the
    compile an internal error naming it, never a kernel (there is no option to skip it)."""

    def drops_the_body(kernel, ctx):
        return attrs.evolve(kernel, body=())

    passes = tuple(
        (name, drops_the_body if name == "cse" else run) for name, run in pipeline.PASSES
    )
    monkeypatch.setattr(pipeline, "PASSES", passes)
    spec = tmp_path / "k.pto"
    spec.write_text(ELU.text, encoding="utf-8")
    assert cli.main(["compile", str(spec), "--emit", "ir"]) == 0  # before the broken pass
    capsys.readouterr()
    assert cli.main(["compile", str(spec)]) == cli.EXIT_INTERNAL
    assert "the IR after `cse` is invalid" in capsys.readouterr().err
    with pytest.raises(VerifyError, match="the IR after `cse` is invalid"):
        ptodsl.compile(ELU.text, name="k.pto", tuning=None)
    # the option that once turned verification on is gone: a usage error
    with pytest.raises(SystemExit) as usage:
        cli.main(["compile", str(spec), "--verify-each"])
    assert usage.value.code == cli.EXIT_USAGE


def test_lower_catches_a_pass_that_merges_a_reduced_axis_with_a_kept_one(monkeypatch):
    """merge_axes as it was: BatchNorm3d's statistics at batch 1 reduced every group holding
    a reduced axis, the batch merged with the channels among them (pypto then failed at
    simulation, F21004 at expand_clone)."""
    from ptodsl.passes import merge_axes

    def every_group_holding_one(reduced, result, groups):
        return tuple(i for i, group in enumerate(groups) if reduced & set(group))

    lower(BATCH_NORM_3D)
    monkeypatch.setattr(merge_axes, "_reduced_groups", every_group_holding_one)
    with pytest.raises(VerifyError, match="after `merge_axes`") as raised:
        lower(BATCH_NORM_3D)
    assert (
        "`sum` keeps axes [1] of [1, 4, 4, 6, 6], but reduces axis 0 of [4, 4, 6, 6], which "
        "holds them"
    ) in str(raised.value)


BATCH_NORM_3D = Source(
    "kernel bn\ninput x: f32[1, 3, 6, 8, 8]\nweight conv: conv3d(3, 4, 3, bias=false)\n"
    "output y: f32[1, 4, 4, 6, 6]\nlet a = conv(x)\n"
    "y = a - mean(a, axis=[0, 2, 3, 4], keepdim=true)\n",
    "bn.pto",
)


def framed(text: str, until: str = "align_axes") -> ir.Kernel:
    """The kernel of a one-statement spec in its frame, as merge_axes gets it."""
    return lower(Source(text, "f.pto"), until=until).kernel


def with_value(kernel: ir.Kernel, value: ir.Expr) -> ir.Kernel:
    """`kernel` with its one statement's value replaced (as a broken pass would)."""
    (stmt,) = kernel.body
    return attrs.evolve(kernel, body=(attrs.evolve(stmt, value=value),))


def test_the_verifier_rejects_axes_merged_across_what_an_op_does_along_them():
    f32 = ir.DType.F32
    # a sum over axis 2 of [2, 4, 8] merged into [2, 32]: well typed, but the kept axis 1
    # is summed with the reduced one
    before = framed(
        "kernel r\ninput x: f32[2, 4, 8]\noutput y: f32[2, 4, 1]\n"
        "y = sum(x, axis=2, keepdim=true)\n"
    )
    (stmt,) = before.body
    x = ir.Ref("x", ir.TensorType((2, 32), f32), stmt.span)
    summed = attrs.evolve(
        stmt.value,
        operands=(x,),
        type=ir.TensorType((2, 1), f32),
        attrs=ir.Reduce((1,), keepdim=True),
    )
    after = with_value(before, summed)
    verify(after, "merge_axes", PYPTO_0_2_0)  # alone, the merged IR is consistent
    broken(
        after,
        "merge_axes",
        r"`sum` keeps axis 1 of \[2, 4, 8\] and reduces axis 2, but they are merged into "
        r"axis \[1\] of \[2, 32\]",
        before,
    )
    # the batch (1 long) left out of the merged reduction is right; the channels it keeps
    # reduced with it is not
    before = framed(
        "kernel b\ninput x: f32[1, 4, 8]\noutput y: f32[1, 4, 8]\n"
        "y = x - sum(x, axis=[0, 2], keepdim=true)\n"
    )
    (stmt,) = before.body
    reduction = stmt.value.operands[1]
    x = ir.Ref("x", ir.TensorType((4, 8), f32), stmt.span)

    def merged_reduction(axes: tuple[int, ...]) -> ir.Kernel:
        shape = tuple(1 if axis in axes else size for axis, size in enumerate((4, 8)))
        reduced = attrs.evolve(
            reduction,
            operands=(x,),
            type=ir.TensorType(shape, f32),
            attrs=ir.Reduce(axes, keepdim=True),
        )
        value = attrs.evolve(stmt.value, operands=(x, reduced), type=ir.TensorType((4, 8), f32))
        return with_value(before, value)

    verify(merged_reduction((1,)), "merge_axes", PYPTO_0_2_0, before)
    broken(
        merged_reduction((0, 1)),
        "merge_axes",
        r"`sum` keeps axes \[1\] of \[1, 4, 8\], but reduces axis 0 of \[4, 8\], which holds",
        before,
    )
    # a running total along axis 1 of [2, 4, 8] merged with axis 0: it would run across rows
    before = framed(
        "kernel s\ninput x: f32[2, 4, 8]\noutput y: f32[2, 4, 8]\ny = cumsum(x, axis=1)\n"
    )
    (stmt,) = before.body
    x = ir.Ref("x", ir.TensorType((8, 8), f32), stmt.span)
    scan = attrs.evolve(
        stmt.value, operands=(x,), type=x.type, attrs=attrs.evolve(stmt.value.attrs, axis=0)
    )
    broken(
        with_value(before, scan),
        "merge_axes",
        r"`cumsum` keeps axis 0 of \[2, 4, 8\] and runs along axis 1, but they are merged",
        before,
    )


def test_the_verifier_rejects_dropped_claims_and_a_program_without_a_schedule():
    parts = Materialised(PARTS)
    kernel = parts.kernel
    assert kernel.target_forms and kernel.target_ranks
    broken(attrs.evolve(kernel, target_forms=False), "loops", "drops the target forms", kernel)
    broken(attrs.evolve(kernel, target_ranks=False), "loops", "drops the target ranks", kernel)
    broken(attrs.evolve(kernel, program=None), "loops", "drops the program", kernel)
    broken(attrs.evolve(kernel, schedule=None), "loops", "a program without a schedule")


def test_the_verifier_checks_partial_results():
    """PARTS's phase 0 loops over axis 0 with `s = sum(t * t)`: one partial result per
    block (3: two chunks and the tail), combined after the loop."""
    parts = Materialised(PARTS)
    kernel = parts.kernel
    phases = kernel.schedule.phases
    (partial,) = phases[0].partials
    assert partial.shape == (3, 1)

    def with_partials(*partials) -> ir.Kernel:
        phase = attrs.evolve(phases[0], partials=partials)
        return attrs.evolve(kernel, schedule=ir.Schedule((phase, *phases[1:])), program=None)

    verify(with_partials(partial), "loops", TINY_TILES)
    # accumulating into a temporary: pypto 0.2.0 computes that as zeros
    broken(with_partials(), "loops", "`s` reduces over the loop's axis 0 without partial")
    broken(
        with_partials(attrs.evolve(partial, shape=(2, 1))), "loops", r"in \[2, 1\], not \[3, 1\]"
    )
    broken(
        with_partials(attrs.evolve(partial, statement=0)), "loops", "partial results of statement 0"
    )
    broken(with_partials(attrs.evolve(partial, tile=(3,))), "loops", r"tile \[3\] for the partials")


# A convolution with two groups whose rows loop (blocks of 2, a tail of 1) nests in its
# batch loop: each group's block is assembled into its own cell of `y`.
CONV = Source(
    "kernel c\ninput x: f32[2, 4, 9, 10]\nweight w: f32[4, 2, 3, 3] = randn\n"
    "output y: f32[2, 4, 7, 12]\ny = conv(x, w, padding=[1, 2], dilation=[2, 1], groups=2)\n",
    "c.pto",
)


def rewritten(instructions: tuple, change) -> tuple:
    """The instructions with `change` applied to every one, inside loops too."""
    result = []
    for instruction in instructions:
        if isinstance(instruction, ir.BlockLoop):
            instruction = attrs.evolve(
                instruction,
                body=rewritten(instruction.body, change),
                tail=rewritten(instruction.tail, change),
            )
        result.append(change(instruction))
    return tuple(result)


def test_the_verifier_catches_a_broken_convolution():
    checked = lower(CONV, until="check").checked
    (store,) = checked.body
    wrong = attrs.evolve(store.value, type=ir.TensorType((2, 4, 7, 11), ir.DType.F32))
    broken(attrs.evolve(checked, body=(attrs.evolve(store, value=wrong),)), "check", "not")

    small_blocks = attrs.evolve(PYPTO_0_2_0, conv_block_elements=18 * 12 * 2)  # 2 rows
    conv = Materialised(CONV, small_blocks)
    (phase,) = conv.kernel.schedule.phases
    short = attrs.evolve(phase.conv, rows=ir.Loop(3, 2, 0, 2))
    schedule = ir.Schedule((attrs.evolve(phase, conv=short),))
    conv.broken(attrs.evolve(conv.kernel, schedule=schedule), "loops")

    def moved(group_offset: int, rows: ir.Index | None = None):
        def change(instruction):
            if isinstance(instruction, ir.Assemble) and instruction.part == "_chunk_part1":
                batch, _, row, column = instruction.offsets
                at = (batch, group_offset, row if rows is None else rows, column)
                return attrs.evolve(instruction, offsets=at)
            return instruction

        return conv.with_code(0, rewritten(conv.code(0), change))

    conv.broken(moved(0), "overlaps in `y`")  # group 1 over group 0
    conv.broken(moved(2, rows=0), "overlaps in `y`")  # every block on the first rows
    conv.broken(moved(3), "exceeds")  # past the channels

    def without_tail(instruction):
        if isinstance(instruction, ir.BlockLoop) and instruction.tail_size:
            return attrs.evolve(instruction, tail=())
        return instruction

    conv.broken(conv.with_code(0, rewritten(conv.code(0), without_tail)), "tail")

    def stacked(position: int, part: str = "_chunk_col8g1"):
        """The view `part` stacked at `position` in its block's stack, not in its own place."""

        def change(instruction):
            if isinstance(instruction, ir.Assemble) and instruction.part == part:
                return attrs.evolve(instruction, offsets=(0, position, 0))
            return instruction

        return conv.with_code(0, rewritten(conv.code(0), change))

    conv.broken(stacked(7), "overlaps in `_chunk_stack1`")  # over tap 7's view
    conv.broken(stacked(9), "exceeds")  # past the taps

    def unstacked(instruction):
        if isinstance(instruction, ir.Assemble) and instruction.part == "_chunk_col8g1":
            return ir.Comment("tap 8 left out")
        return instruction

    left_out = conv.with_code(0, rewritten(conv.code(0), unstacked))
    conv.broken(left_out, "reads `_chunk_stack1` before it is written whole")


def test_the_verifier_catches_a_broken_staging_launch():
    conv = Materialised(CONV, PYPTO_0_2_0)
    program = conv.kernel.program
    (staging,) = program.staging
    assert conv.kernel.schedule.phases[staging.phase].conv.staged

    def staged(**changes) -> ir.Kernel:
        program_staging = (attrs.evolve(staging, **changes),)
        return attrs.evolve(conv.kernel, program=attrs.evolve(program, staging=program_staging))

    def assembled(change) -> tuple:
        def each(instruction):
            if isinstance(instruction, ir.Assemble) and instruction.into == staging.buffer:
                return change(instruction)
            return instruction

        return rewritten(staging.instructions, each)

    # every sample's padded input written into the first sample's place
    first = assembled(lambda a: attrs.evolve(a, offsets=(0, *a.offsets[1:])))
    conv.broken(staged(instructions=first), "overlaps in `_padded_x`")
    # nothing written: the kernel would read the buffer's old contents
    unwritten = assembled(lambda a: ir.Comment("left out"))
    conv.broken(staged(instructions=unwritten), "`_padded_x` is never written whole")
    # a staging launch reading another tensor than its input (the output)
    reads_y = rewritten(
        staging.instructions,
        lambda i: attrs.evolve(i, source="y") if isinstance(i, ir.View) else i,
    )
    conv.broken(staged(instructions=reads_y), "reads `y` before it is defined")
    conv.broken(staged(source="w"), "reads `x` before it is defined")
    # the launch left out: the kernel reads a buffer nothing defines
    no_staging = attrs.evolve(conv.kernel, program=attrs.evolve(program, staging=()))
    conv.broken(no_staging, "reads `_padded_x` before it is defined")
    # a buffer named as a kernel tensor, a launch for a phase that stages nothing
    conv.broken(staged(buffer="w"), "writes `w`, a name the kernel already has")
    conv.broken(staged(phase=1), "stages an input for phase 1, which does not read one")


ONE_CHANNEL_CONV = Source(
    "kernel c\ninput x: f32[2, 3, 12, 12]\nweight w: f32[1, 3, 3, 3] = randn\n"
    "output y: f32[2, 1, 10, 10]\ny = conv(x, w)\n",
    "c.pto",
)


def test_the_verifier_catches_broken_row_launches():
    """A sample too big for one launch even of one output channel: 5 launches of 2 rows
    each (a budget just big enough for them)."""
    from ptodsl.ir import sim_memory
    from ptodsl.passes.launches import _rows_cut, _shrunk

    whole = lower(ONE_CHANNEL_CONV, until="twin_operands").kernel
    per_launch = _rows_cut(_shrunk(whole, ("x",), 1), 2, "first_row")
    budget = sim_memory.verification_bytes(per_launch)
    conv = Materialised(ONE_CHANNEL_CONV, attrs.evolve(PYPTO_0_2_0, verify_memory_budget=budget))
    launches = conv.kernel.launches
    assert launches.rows == ir.RowLaunches(5, 2)
    # a launch past the output's rows: its views read past the sample
    beyond = attrs.evolve(launches, rows=attrs.evolve(launches.rows, count=6))
    conv.broken(attrs.evolve(conv.kernel, launches=beyond), "cover 12 of the output's 10 rows")

    # a tap's view one row further: within the sample for every launch but the last
    def further(instruction):
        if isinstance(instruction, ir.View) and isinstance(instruction.offsets[2], ir.Affine):
            row = instruction.offsets[2]
            at = (*instruction.offsets[:2], attrs.evolve(row, constant=row.constant + 1))
            return attrs.evolve(instruction, offsets=(*at, *instruction.offsets[3:]))
        return instruction

    conv.broken(conv.with_code(0, rewritten(conv.code(0), further)), "at .* exceeds")
    short = attrs.evolve(launches, rows=attrs.evolve(launches.rows, count=4))
    conv.broken(attrs.evolve(conv.kernel, launches=short), "cover 8 of the output's 10 rows")
    # rows launched without their convolution computing a launch's rows, and the reverse
    (store,) = conv.kernel.body
    whole_rows = attrs.evolve(store.value, attrs=attrs.evolve(store.value.attrs, rows=0))
    conv.broken(
        attrs.evolve(conv.kernel, body=(attrs.evolve(store, value=whole_rows),)), "row launches"
    )
    conv.broken(
        attrs.evolve(conv.kernel, launches=attrs.evolve(launches, rows=None)),
        "without row launches",
    )
    # channels and rows both cut
    channels = ir.ChannelLaunches(1, 1, ())
    both = attrs.evolve(launches, channels=channels)
    conv.broken(attrs.evolve(conv.kernel, launches=both), "output rows are cut only")


def test_the_verifier_counts_ub_as_pypto_does():
    """A vector phase's tile holds every operand and result of its widest op in UB (a where
    of two tensor branches: 12 bytes per f32 element): a tile within the element budget
    can still overflow UB, which PyPTO refuses at simulation time."""
    looped = lower(ELU).kernel
    (phase,) = looped.schedule.phases
    roomy = attrs.evolve(PYPTO_0_2_0, max_tile_elements=1 << 20)  # the element budget aside
    verify(looped, "tiling", roomy)
    overflowing = attrs.evolve(looped, schedule=ir.Schedule((attrs.evolve(phase, tile=(64, 512)),)))
    with pytest.raises(VerifyError, match=r"tile \[64, 512\] holds 393216 bytes of UB"):
        verify(overflowing, "tiling", roomy)
    # a last axis of one element takes a whole 32-byte block per row
    narrow = attrs.evolve(looped, schedule=ir.Schedule((attrs.evolve(phase, tile=(4096, 1)),)))
    with pytest.raises(VerifyError, match=r"tile \[4096, 1\] holds 393216 bytes of UB"):
        verify(narrow, "tiling", roomy)


def test_the_verifier_rejects_a_phase_order_that_reads_a_let_before_it_runs():
    # a statement may run before the body says (a value the same in every block of a loop
    # runs before the loop), never before a let it reads
    kernel = lower(PARTS, target=TINY_TILES).kernel
    first, *rest = kernel.schedule.phases
    assert rest
    swapped = ir.Schedule((*rest, first))
    broken(
        attrs.evolve(kernel, schedule=swapped, program=None),
        "loops",
        r"statement \d+ runs before the let `\w+` it reads",
    )
