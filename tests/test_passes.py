"""Each pass alone, on small IR built by the front end."""

from __future__ import annotations

import attrs
import pytest
from conftest import TINY_TILES

from ptodsl.frontend.diagnostics import Source
from ptodsl.frontend.parser import parse
from ptodsl.frontend.typecheck import typecheck
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0, Target, form
from ptodsl.passes import PassContext
from ptodsl.passes.align_axes import align_axes
from ptodsl.passes.chain_reductions import chain_reductions
from ptodsl.passes.cse import cse
from ptodsl.passes.expand_broadcasts import expand_broadcasts
from ptodsl.passes.fold_constants import fold_constants
from ptodsl.passes.hoist_scalars import hoist_scalars
from ptodsl.passes.isolate_reductions import isolate_reductions
from ptodsl.passes.legalize import RULES, legalize
from ptodsl.passes.loops import insert_loops
from ptodsl.passes.materialise import materialise
from ptodsl.passes.merge_axes import merge_axes
from ptodsl.passes.output_safety import output_safety
from ptodsl.passes.tiling import tile_phases
from ptodsl.pipeline import lower


def kernel_of(body: str, decls: str = "dims M = 4, N = 8\ninput x: f32[M, N]\n") -> ir.Kernel:
    return typecheck(parse(f"kernel k\n{decls}{body}"))


def values(kernel: ir.Kernel) -> list[str]:
    return [ir.format_expr(stmt.value) for stmt in kernel.body]


def all_forms(kernel: ir.Kernel) -> set[str]:
    return {
        form(node)
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and not ir.is_scalar(node)
    }


# ---- fold_constants ----------------------------------------------------------------------


def test_fold_constants_folds_literal_arithmetic_only():
    kernel = kernel_of(
        "param a: f32 = 2.0\noutput y: f32[M, N]\ny = x * (-(1.5) * 2.0) + a * 3.0\n"
    )
    assert values(fold_constants(kernel)) == ["add(mul(x, -3.0), mul(a, 3.0))"]


# ---- legalize ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1.0 - x", "add(mul(x, -1.0), 1.0)"),
        ("2.0 / x", "mul(reciprocal(x), 2.0)"),
        ("1.0 / x", "reciprocal(x)"),
        ("-x", "mul(x, -1.0)"),
        ("2.0 * x", "mul(x, 2.0)"),
        ("3.0 + x", "add(x, 3.0)"),
        ("max(0.0, x)", "maximum(x, 0.0)"),
        ("tanh(x)", "sub(mul(sigmoid(mul(x, 2.0)), 2.0), 1.0)"),
        ("clamp(x, -1.0, 1.0)", "minimum(maximum(x, -1.0), 1.0)"),
        ("expm1(x)", "sub(exp(x), 1.0)"),
        ("where(0.0 < x, x, 0.0)", "where(gt(x, 0.0), x, 0.0)"),
        ("x - 1.0", "sub(x, 1.0)"),
        # The sign of a negated scalar-affine value folds into its constants.
        ("-tanh(x)", "add(mul(sigmoid(mul(x, 2.0)), -2.0), 1.0)"),
        ("-(x * 3.0)", "mul(x, -3.0)"),
        ("-(x * 3.0 + 2.0)", "add(mul(x, -3.0), -2.0)"),
        ("-(x + 2.0)", "mul(add(x, 2.0), -1.0)"),
    ],
)
def test_legalize_rewrites_scalar_first_and_missing_builtins(expression, expected):
    kernel = fold_constants(kernel_of(f"output y: f32[M, N]\ny = {expression}\n"))
    legal = legalize(kernel)
    assert values(legal) == [expected]
    assert all_forms(legal) <= PYPTO_0_2_0.forms


REDUCTION_ATTRIBUTES = {
    "mean": ir.Reduce((1,), keepdim=False),
    "var": ir.Variance((1,), keepdim=False, correction=1),
    "batchmean": ir.Reduce((0, 1), keepdim=False),
    "softmax": ir.Along(1),
    "log_softmax": ir.Along(1),
    "logsumexp": ir.AlongKeep(1, keepdim=True),
    "triu": ir.Triangle(0),
    "tril": ir.Triangle(-1),
    "prod": ir.Reduce((1,), keepdim=False),
    "argmax": ir.Reduce((1,), keepdim=False),
    "argmin": ir.Reduce((1,), keepdim=True),
}


def test_every_rule_produces_target_forms():
    x = ir.Ref("x", ir.TensorType((4, 8), ir.DType.F32), ir.Span.point(1, 1))
    c = ir.Const(0.5, x.span)
    for rule_form in RULES:
        name, kinds = rule_form[:-1].split("(")
        name, _, variant = name.partition("[")  # cumsum[reverse]: a scan's flags
        operands = tuple(x if kind == "t" else c for kind in kinds.split(","))
        flags = {flag: True for flag in variant.rstrip("]").split(",") if flag}
        scan = name in ("cumsum", "cumprod")
        op_attrs = ir.Scan(1, **flags) if scan else REDUCTION_ATTRIBUTES.get(name)
        node = ir.op(name, *operands, span=x.span, attributes=op_attrs)
        assert not PYPTO_0_2_0.supports(node), f"{rule_form} is supported: its rule never fires"
        kernel = ir.Kernel("k", (), (), (), (), (ir.Let("v", node, x.span),))
        assert all_forms(legalize(kernel)) <= PYPTO_0_2_0.forms, rule_form


# ---- hoist_scalars -----------------------------------------------------------------------


def test_hoist_scalars_moves_param_arithmetic_before_its_use():
    kernel = kernel_of(
        "param a: f32 = 2.0\noutput y: f32[M, N]\nlet k = a + 1.0\ny = x * (k * a)\n"
    )
    hoisted = hoist_scalars(kernel)
    lets = [(s.name, ir.format_expr(s.value)) for s in hoisted.body if isinstance(s, ir.Let)]
    assert lets == [("k", "add(a, 1.0)"), ("_scalar0", "mul(k, a)")]
    assert values(hoisted)[-1] == "mul(x, _scalar0)"


# ---- output_safety -----------------------------------------------------------------------


def test_output_safety_clones_inputs_and_values_read_again():
    kernel = kernel_of(
        "output y: f32[M, N]\noutput z: f32[M, N]\noutput w: f32[M, N]\n"
        "let t = exp(x)\ny = t\nz = x\nw = t * 2.0\n"
    )
    safe = output_safety(kernel)
    stores = {s.output: s.clone for s in safe.body if isinstance(s, ir.Store)}
    assert stores == {"y": True, "z": True, "w": False}
    assert isinstance(safe.body[0], ir.Let), "lets run before every store"


def test_output_safety_keeps_the_last_move_of_a_value():
    kernel = kernel_of("output y: f32[M, N]\nlet t = exp(x)\ny = t\n")
    (store,) = [s for s in output_safety(kernel).body if isinstance(s, ir.Store)]
    assert not store.clone


# ---- merge_axes --------------------------------------------------------------------------


def kernel_shapes(kernel: ir.Kernel) -> dict[str, tuple[int, ...]]:
    return {t.name: t.kernel_shape for t in (*kernel.inputs, *kernel.outputs)}


def test_merge_axes_keeps_two_axes_of_pure_elementwise_work():
    """Never rank 1 (pypto 0.2.0 charges a rank-1 copy as one element): rows of at least
    1 KB where the shape has them, else the declared last axis, else a leading 1."""
    merged = merge_axes(align_axes(kernel_of("output y: f32[M, N]\ny = exp(x)\n")))
    assert kernel_shapes(merged) == {"x": (4, 8), "y": (4, 8)}
    assert merged.body[0].value.type.shape == (4, 8)
    decls = "dims B = 6, C = 4, H = 16, W = 32\ninput x: f32[B, C, H, W]\n"
    body = "output y: f32[B, C, H, W]\ny = exp(x)\n"
    assert kernel_shapes(merge_axes(align_axes(kernel_of(body, decls)))) == {
        "x": (24, 512),
        "y": (24, 512),
    }
    vector = "dims N = 8192\ninput x: f32[N]\n"
    merged = merge_axes(align_axes(kernel_of("output y: f32[N]\ny = exp(x)\n", vector)))
    assert kernel_shapes(merged) == {"x": (1, 8192), "y": (1, 8192)}


def test_merge_axes_keeps_broadcast_axes_apart():
    decls = "dims B = 2, C = 3, H = 4, W = 5\ninput x: f32[B, C, H, W]\ninput w: f32[C, 1, 1]\n"
    merged = merge_axes(align_axes(kernel_of("output y: f32[B, C, H, W]\ny = x * w\n", decls)))
    assert kernel_shapes(merged) == {"x": (2, 3, 20), "w": (1, 3, 1), "y": (2, 3, 20)}
    assert merged.input("x").kernel_dims == (("B",), ("C",), ("H", "W"))


def test_merge_axes_merges_a_row_vector_broadcast():
    decls = "dims M = 4, N = 8\ninput x: f32[M, N]\ninput b: f32[N]\n"
    merged = merge_axes(align_axes(kernel_of("output y: f32[M, N]\ny = x + b\n", decls)))
    assert kernel_shapes(merged) == {"x": (4, 8), "b": (1, 8), "y": (4, 8)}


# ---- tiling and loops --------------------------------------------------------------------


def test_tiling_then_loops_for_a_large_kernel():
    decls = "dims M = 16384, N = 4096\ninput x: f32[M, N]\n"
    kernel = merge_axes(align_axes(kernel_of("output y: f32[M, N]\ny = x * 3.0\n", decls)))
    tiled = tile_phases(kernel)
    (phase,) = tiled.schedule.phases
    assert phase.shape == (16384, 4096) and phase.tile == (4, 4096) and phase.loop is None
    (looped,) = insert_loops(tiled).schedule.phases
    assert looped.loop == ir.Loop(count=2, chunk=8192, tail=0)


SCAN_DECLS = "dims A = 4, B = 50, C = 8, D = 32\ninput x: f32[A, B, C, D]\n"


def test_merge_axes_keeps_a_scanned_axis_apart():
    """Axes before and after the scan merge; the scanned axis merges with neither."""
    body = "output y: f32[A, B, C, D]\ny = cumsum(x, axis=1) * 2.0\n"
    merged = merge_axes(align_axes(kernel_of(body, SCAN_DECLS)))
    assert kernel_shapes(merged) == {"x": (4, 50, 256), "y": (4, 50, 256)}
    (scan,) = (
        n for n in ir.walk(merged.body[0].value) if isinstance(n, ir.Op) and n.op == "cumsum"
    )
    assert scan.attrs == ir.Scan(1)
    body = "output y: f32[A, B, C, D]\ny = cumsum(x, axis=3)\n"
    merged = merge_axes(align_axes(kernel_of(body, SCAN_DECLS)))
    assert kernel_shapes(merged)["x"] == (1600, 32)
    assert merged.body[0].value.attrs == ir.Scan(1)


def test_a_scan_is_never_looped_over_and_its_last_axis_tile_is_the_measured_one():
    decls = "dims R = 64, C = 20000\ninput x: f32[R, C]\n"
    body = "output y: f32[R, C]\ny = cumsum(x, axis=1, reverse=true)\n"
    (phase,) = lower(Source(f"kernel k\n{decls}{body}", "k.pto")).kernel.schedule.phases
    assert phase.tile == (8, 1024)  # the spill-safe budget, an unbalanced last axis
    spec = Source(f"kernel k\n{decls.replace('20000', '3000')}{body}", "k.pto")
    (phase,) = lower(spec, target=TINY_TILES).kernel.schedule.phases
    assert phase.loop is not None and phase.loop.axis == 0


def test_legalize_writes_scan_variants_with_the_plain_scan_and_the_total():
    body = "output y: f32[M, N]\ny = cumsum(x, axis=1, reverse=true)\n"
    assert values(legalize(kernel_of(body))) == [
        "add(sub(sum(x, axes=(1,), keepdim=True), cumsum(x, axis=1, reverse=False, "
        "exclusive=False)), x)"
    ]


def test_loops_leave_small_kernels_alone():
    kernel = tile_phases(merge_axes(align_axes(kernel_of("output y: f32[M, N]\ny = x * 3.0\n"))))
    assert insert_loops(kernel).schedule.phases[0].loop is None


# ---- expand_broadcasts -------------------------------------------------------------------


def test_expand_broadcasts_stretches_one_axis_per_op():
    decls = "dims B = 2, C = 3, H = 4, W = 5\ninput x: f32[B, C, H, W]\ninput w: f32[C, 1, 1]\n"
    kernel = merge_axes(align_axes(kernel_of("output y: f32[B, C, H, W]\ny = x * w\n", decls)))
    (store,) = expand_broadcasts(kernel).body
    assert ir.format_expr(store.value) == "mul(x, expand(w, shape=(2, 3, 1)))"


def test_expand_broadcasts_leaves_single_axis_broadcasts_alone():
    decls = "dims M = 4, N = 8\ninput x: f32[M, N]\ninput b: f32[N]\n"
    kernel = merge_axes(align_axes(kernel_of("output y: f32[M, N]\ny = x + b\n", decls)))
    assert values(expand_broadcasts(kernel)) == ["add(x, b)"]


# ---- align_axes, cse, isolate_reductions, chain_reductions -------------------------------------


def test_align_axes_keeps_every_axis_and_reduced_axes_as_size_one():
    decls = "dims M = 4, N = 8\ninput x: f32[M, N]\ninput w: f32[M]\n"
    aligned = align_axes(kernel_of("output y: f32[M]\ny = sum(x, axis=1) * w\n", decls))
    assert {t.name: t.kernel_shape for t in (*aligned.inputs, *aligned.outputs)} == {
        "x": (4, 8),
        "w": (4, 1),
        "y": (4, 1),
    }
    assert values(aligned) == ["mul(sum(x, axes=(1,), keepdim=True), w)"]


def test_align_axes_keeps_broadcast_inputs_right_aligned():
    decls = "dims M = 4, N = 8\ninput x: f32[M, N]\ninput b: f32[N]\n"
    aligned = align_axes(kernel_of("output y: f32[M, N]\ny = x + b\n", decls))
    assert aligned.input("b").kernel_shape == (1, 8)


def test_cse_binds_a_repeated_subexpression_once():
    kernel = kernel_of("output y: f32[M, N]\ny = exp(x - 1.0) / (exp(x - 1.0) + 2.0)\n")
    shared = cse(kernel)
    assert [(s.name, ir.format_expr(s.value)) for s in shared.body if isinstance(s, ir.Let)] == [
        ("_t0", "exp(sub(x, 1.0))")
    ]
    assert values(shared)[-1] == "div(_t0, add(_t0, 2.0))"


def test_isolate_reductions_binds_nested_reductions_and_writes_reductions_to_outputs():
    decls = "dims M = 4, N = 8\ninput x: f32[M, N]\n"
    kernel = align_axes(kernel_of("output y: f32[]\ny = sum(sqrt(sum(x, axis=1))) * 0.5\n", decls))
    split = isolate_reductions(kernel)
    assert [type(s).__name__ for s in split.body] == ["Let", "Store", "Store"]
    assert values(split) == [
        "sum(x, axes=(1,), keepdim=True)",
        "sum(sqrt(_r0), axes=(0,), keepdim=True)",
        "mul(y, 0.5)",
    ]


def test_chain_reductions_reduces_one_axis_at_a_time_short_rows_first():
    decls = "dims A = 2, B = 3, C = 4\ninput x: f32[A, B, C]\n"
    kernel = merge_axes(align_axes(kernel_of("output y: f32[B]\ny = sum(x, axis=[0, 2])\n", decls)))
    assert values(chain_reductions(kernel)) == [
        "sum(sum(x, axes=(2,), keepdim=True), axes=(0,), keepdim=True)"
    ]


def test_chain_reductions_keeps_long_rows_last():
    """Row sums over rows longer than SHORT_ROW feeding another reduction spill UB."""
    decls = "dims A = 2, B = 3, C = 8192\ninput x: f32[A, B, C]\n"
    kernel = merge_axes(align_axes(kernel_of("output y: f32[B]\ny = sum(x, axis=[0, 2])\n", decls)))
    assert values(chain_reductions(kernel)) == [
        "sum(sum(x, axes=(0,), keepdim=True), axes=(2,), keepdim=True)"
    ]


def test_tiling_gives_per_sample_and_batch_work_their_own_phases():
    decls = "dims B = 128, D = 4096\ninput a: f32[B, D]\n"
    kernel = kernel_of("output y: f32[]\ny = mean(sqrt(sum(a * a, axis=1)))\n", decls)
    for run in (fold_constants, legalize, align_axes, cse, isolate_reductions, merge_axes):
        kernel = run(kernel)
    phases = tile_phases(chain_reductions(kernel)).schedule.phases
    assert [(p.shape, p.tile) for p in phases] == [
        ((128, 4096), (4, 4096)),
        ((128, 1), (128, 1)),
        ((1, 1), (1, 1)),
    ]


def test_tiling_keeps_same_shape_statements_in_one_phase():
    decls = "dims B = 8, D = 64\ninput a: f32[B, D]\ninput b: f32[B, D]\n"
    kernel = kernel_of(
        "output y: f32[B]\ny = sqrt(sum(a * a, axis=1)) - sqrt(sum(b * b, axis=1))\n", decls
    )
    for run in (fold_constants, legalize, align_axes, cse, isolate_reductions, merge_axes):
        kernel = run(kernel)
    phases = tile_phases(chain_reductions(kernel)).schedule.phases
    assert [p.statements for p in phases] == [(0, 1, 2)]


# ---- materialise -------------------------------------------------------------------------


def materialised(body: str, decls: str, target: Target = TINY_TILES) -> list[str]:
    """The program `materialise` makes of a spec lowered up to `loops`, as `--emit` lists it,
    each line prefixed with its phase number."""
    kernel = lower(Source(f"kernel k\n{decls}{body}", "k.pto"), target=target, until="loops").kernel
    program = materialise(kernel, PassContext(target)).program
    return [
        line
        for code in program.phases
        for line in ir.format_instructions(code.instructions, f"{code.phase}| ")
    ]


def test_materialise_computes_a_phase_without_a_loop_on_whole_tensors():
    decls = "input x: f32[4, 8]\noutput y: f32[4, 8]\noutput z: f32[4, 8]\n"
    body = "let t = exp(x)\ny = x\nz = t / sum(t, axis=1, keepdim=true)\n"
    assert materialised(body, decls, PYPTO_0_2_0) == [
        "0| set vector tiles [4, 8]",
        "0| let t: f32[4, 8] = exp(x)",
        "0| y <- clone(x)",  # an input moved into an output is copied
        "0| let _r0: f32[4, 1] = sum(t, axes=(1,), keepdim=True)",
        "0| z <- div(t, _r0)",
    ]


def test_materialise_spells_out_views_temporaries_partial_results_and_the_tail():
    decls = "input x: f32[50, 64]\noutput y: f32[50, 64]\n"
    assert materialised("let t = exp(x)\nlet s = sum(t * t)\ny = t / s\n", decls) == [
        "0| set vector tiles [8, 64]",
        "0| allocate t: f32[50, 64]",  # read by the next phase: assembled full-size
        "0| allocate _parts_s: f32[3, 1]",  # reduces the loop axis: one partial result per block
        "0| tail: the last 2 of axis 0, at 48",  # first: after the loop pypto drops its writes
        "0|   set vector tiles [2, 64]",  # the tail is shorter than the tile
        "0|   view _tail_x: f32[2, 64] of x at [48, 0]",
        "0|   let _tail_t: f32[2, 64] = exp(_tail_x)",
        "0|   assemble _tail_t into t at [48, 0]",
        "0|   let _tail_s: f32[1, 1] = "
        "sum(sum(mul(_tail_t, _tail_t), axes=(1,), keepdim=True), axes=(0,), keepdim=True)",
        "0|   assemble _tail_s into _parts_s at [2, 0]",
        "0|   set vector tiles [8, 64]",  # the loop's blocks take the phase's tile again
        "0| loop k_phase0 on axis 0: i in 0..2, offset = i * 24",
        "0|   view _chunk_x: f32[24, 64] of x at [offset, 0]",
        "0|   let _chunk_t: f32[24, 64] = exp(_chunk_x)",
        "0|   assemble _chunk_t into t at [offset, 0]",
        "0|   let _chunk_s: f32[1, 1] = "
        "sum(sum(mul(_chunk_t, _chunk_t), axes=(1,), keepdim=True), axes=(0,), keepdim=True)",
        "0|   assemble _chunk_s into _parts_s at [i, 0]",
        "0| # s: the partial results of the 3 blocks, combined.",
        "0| set vector tiles [3, 1]",
        "0| let s: f32[1, 1] = sum(_parts_s, axes=(0,), keepdim=True)",
        "1| set vector tiles [8, 64]",
        "1| tail: the last 2 of axis 0, at 48",
        "1|   set vector tiles [2, 64]",
        "1|   view _tail_t: f32[2, 64] of t at [48, 0]",
        "1|   let _tail_y: f32[2, 64] = div(_tail_t, expand(s, shape=(2, 1)))",
        "1|   assemble _tail_y into y at [48, 0]",
        "1|   set vector tiles [8, 64]",
        "1| loop k_phase1 on axis 0: i in 0..2, offset = i * 24",
        "1|   view _chunk_t: f32[24, 64] of t at [offset, 0]",
        "1|   let _chunk_y: f32[24, 64] = div(_chunk_t, expand(s, shape=(24, 1)))",
        "1|   assemble _chunk_y into y at [offset, 0]",
    ]


def test_materialise_accumulates_a_reduction_over_the_loop_axis_into_its_output():
    lines = materialised("y = sum(x)\n", "input x: f32[23, 512]\noutput y: f32[]\n")
    assert lines == [
        "0| set vector tiles [1, 512]",
        "0| tail: the last 3 of axis 0, at 20",
        "0|   view _tail_x: f32[3, 512] of x at [20, 0]",
        "0|   let _tail_y: f32[1, 1] = "
        "sum(sum(_tail_x, axes=(1,), keepdim=True), axes=(0,), keepdim=True)",
        "0|   accumulate _tail_y into y by sum, written (the first block)",
        "0| loop k_phase0 on axis 0: i in 0..4, offset = i * 5",
        "0|   view _chunk_x: f32[5, 512] of x at [offset, 0]",
        "0|   let _chunk_y: f32[1, 1] = "
        "sum(sum(_chunk_x, axes=(1,), keepdim=True), axes=(0,), keepdim=True)",
        "0|   accumulate _chunk_y into y by sum",
    ]


def test_materialise_computes_a_loop_invariant_let_once_and_sizes_expansions_to_the_block():
    decls = "input x: f32[23, 512]\ninput w: f32[512]\noutput y: f32[23, 512]\n"
    body = "let a = x * 2.0\nlet t = exp(w)\nlet s = sum(a * t)\ny = x * t + s\n"
    lines = materialised(body, decls)
    # the same in every block: computed once, before the loops that read it
    assert lines[:2] == ["0| set vector tiles [1, 512]", "0| let t: f32[1, 512] = exp(w)"]
    assert "1| loop k_phase1 on axis 0: i in 0..4, offset = i * 5" in lines
    chunk = "2|   let _chunk_y: f32[5, 512] = add(mul(_chunk_x, t), expand(s, shape=(5, 1)))"
    assert chunk in lines
    assert "2|   let _tail_y: f32[3, 512] = add(mul(_tail_x, t), expand(s, shape=(3, 1)))" in lines


def test_materialise_chunks_a_matmul_over_m_into_a_temporary():
    decls = (
        "input a: f32[200, 64]\ninput b: f32[64, 32]\ninput c: f32[32]\noutput y: f32[200, 32]\n"
    )
    assert materialised("y = relu(a @ b + c)\n", decls, PYPTO_0_2_0) == [
        "0| set cube tiles m [128, 128], k [64, 64], n [32, 32]",
        "0| allocate _m0: f32[200, 32]",
        "0| tail: the last 72 of axis 0, at 128",
        "0|   view _tail_a: f32[72, 64] of a at [128, 0]",
        "0|   let _tail__m0: f32[72, 32] = matmul(_tail_a, b, a_trans=False, b_trans=False)",
        "0|   assemble _tail__m0 into _m0 at [128, 0]",
        "0| loop k_phase0 on axis 0: i in 0..1, offset = i * 128",
        "0|   view _chunk_a: f32[128, 64] of a at [offset, 0]",
        "0|   let _chunk__m0: f32[128, 32] = matmul(_chunk_a, b, a_trans=False, b_trans=False)",
        "0|   assemble _chunk__m0 into _m0 at [offset, 0]",
        "1| set vector tiles [200, 32]",
        "1| y <- relu(add(_m0, c))",
    ]


def test_materialise_splits_a_long_contraction_into_accumulated_k_chunks():
    target = attrs.evolve(PYPTO_0_2_0, max_inner_axis=128)
    decls = "input a: f32[300, 16]\ninput b: f32[16, 300]\noutput y: f32[16, 16]\n"
    assert materialised("y = a.T @ b.T\n", decls, target) == [
        "0| set cube tiles m [16, 16], k [64, 256], n [16, 16]",
        "0| set vector tiles [16, 16] (for the accumulation)",
        "0| loop k_phase0 on axis 2: i in 0..3, offset = i * 100",
        "0|   view _chunk_a: f32[100, 16] of a at [offset, 0]",  # stored [K, M]
        "0|   view _chunk_b: f32[16, 100] of b at [0, offset]",  # stored [N, K]
        "0|   let _chunk_y: f32[16, 16] = matmul(_chunk_a, _chunk_b, a_trans=True, b_trans=True)",
        "0|   accumulate _chunk_y into y by sum, written when i == 0",
    ]


def test_materialise_keeps_the_statements_and_the_schedule():
    source = Source("kernel k\ninput x: f32[23, 512]\noutput y: f32[]\ny = sum(x)\n", "k.pto")
    kernel = lower(source, target=TINY_TILES, until="loops").kernel
    after = materialise(kernel, PassContext(TINY_TILES))
    assert attrs.evolve(after, program=None) == kernel
