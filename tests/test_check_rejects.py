"""`ptodsl check` fails every wrong kernel and every vacuous comparison it can be shown.

Each kernel here is a real generated module with one deliberate fault (an offset, zeroed
elements, the wrong axis, the wrong dtype or shape) run in pypto SIM; each vacuous case is
a spec whose inputs or outputs would let a trivial kernel through.
"""

from __future__ import annotations

import pytest
from conftest import EXAMPLE_BY_STEM

import ptodsl
from ptodsl.checking.check import run_check, spec_case
from ptodsl.checking.draws import seeded_draw
from ptodsl.runtime.simulator import SimulationError


def compiled(text: str, dims=None):
    return ptodsl.compile(text, name="case.pto", dims=dims, tuning=None)


def rejected(tmp_path, text: str, old: str, new: str):
    """The check passes the spec's own kernel; its report on the kernel with `old` made
    `new`."""
    spec = compiled(text)
    assert run_check(spec).ok
    return run_check(spec, kernel_path=wrong_kernel(tmp_path, spec, old, new))


def wrong_kernel(tmp_path, spec, old: str, new: str, count: int = 1):
    """The generated module of `spec` with `old` replaced by `new` (it must occur)."""
    source = spec.source
    assert source.count(old) == count, f"{old!r} occurs {source.count(old)} times"
    path = tmp_path / "wrong.py"
    path.write_text(source.replace(old, new), encoding="utf-8")
    return path


EXP = """kernel exp3
dims N = 16, C = 1024
input x: f32[N, C]
output y: f32[N, C]
y = exp(x * 3.0)
"""
RETURN = "return y.reshape((16, 1024))"


def test_an_offset_on_a_heavy_tailed_output_fails(tmp_path):
    """The old bound took the output's mean magnitude (38.4 here) for every element."""
    spec = compiled(EXP)
    assert run_check(spec).ok
    path = wrong_kernel(tmp_path, spec, "pypto.exp(x * 3.0)", "pypto.exp(x * 3.0) + 0.005")
    report = run_check(spec, kernel_path=path)
    assert not report.ok
    (output,) = report.outputs
    assert output.mismatched > 0 and output.worst[0].bound < 0.005
    # pypto's own verdict fails it, and for f32 ptodsl never overrules that
    assert any(p.verdict == "FAILED" for p in report.failed_passes)


def test_a_few_zeroed_outputs_fail(tmp_path):
    spec = compiled(EXP)
    launch = "        _launch(_make_exp3_kernel, (), 1, _kernel_x, y)\n"
    zeroed = launch + "        y.view(-1)[::43] = 0.0\n"
    path = wrong_kernel(tmp_path, spec, launch, zeroed)
    report = run_check(spec, kernel_path=path)
    assert not report.ok
    assert report.outputs[0].mismatched == pytest.approx(16 * 1024 / 43, abs=1)


PRODUCT = """kernel product
dims N = 16, K = 256
input x: f32[N, K] in unit
output y: f32[N]
y = exp(sum(log(x), axis=1))
"""


def test_outputs_below_the_tolerance_are_vacuous_not_a_pass(tmp_path):
    """Products of 256 values in (0, 1) are below 1e-40: zeros would pass any atol."""
    spec = compiled(PRODUCT)
    report = run_check(spec)
    assert not report.ok
    assert "vacuous" in report.outputs[0].problem
    zeros = wrong_kernel(tmp_path, spec, "return y.reshape(", "return 0.0 * y.reshape(")
    assert not run_check(spec, kernel_path=zeros).ok
    # at a shape where the product is visible, the same spec is checkable and passes
    assert run_check(compiled(PRODUCT, {"K": 4})).ok


MAX_OF_SIGNS = """kernel max_of_signs
dims N = 64
input x: f32[N, N] in sign
output y: f32[N]
y = max(x, axis=1)
"""


def test_a_reduction_over_the_wrong_axis_fails_even_on_signs(tmp_path):
    spec = compiled(MAX_OF_SIGNS)
    assert run_check(spec).ok, "sign inputs must let max over axis 1 differ from axis 0"
    source = spec.source
    reduce_call = next(line for line in source.splitlines() if "pypto.amax(" in line)
    assert ", 1" in reduce_call
    path = wrong_kernel(tmp_path, spec, reduce_call, reduce_call.replace(", 1", ", 0"))
    assert not run_check(spec, kernel_path=path).ok


def test_inputs_that_cannot_tell_axes_apart_make_the_check_vacuous():
    """The output varies (row sums of x), but its max over ones is the same along either
    axis: a kernel reducing the other axis would pass, so the check proves nothing."""
    text = """kernel max_of_ones
dims N = 32
input x: f32[N, N]
input q: f32[N, N]
output y: f32[N]
y = sum(x, axis=1) * max(q * 0.0 + 1.0, axis=1)
"""
    report = run_check(compiled(text))
    assert not report.ok
    assert report.outputs[0].problem is None
    assert any("same result over axes [0]" in problem for problem in report.problems)


@pytest.mark.parametrize(
    ("suffix", "problem"),
    [
        (".double()", "kernel returned torch.float64, the spec declares f32"),
        ("[:1]", "kernel returned shape [1, 1024], expected [16, 1024]"),
    ],
    ids=["another dtype", "a smaller output"],
)
def test_a_kernel_returning_another_dtype_or_shape_fails(suffix, problem, tmp_path):
    spec = compiled(EXP)
    report = run_check(spec, kernel_path=wrong_kernel(tmp_path, spec, RETURN, RETURN + suffix))
    assert not report.ok
    assert problem in report.outputs[0].problem


TENSOR_BY_MATRIX = """kernel tensor_by_matrix
dims N = 3, M = 100, K = 64, L = 48
input A: f32[N, M, K]
input B: f32[K, L]
output C: f32[N, M, L]
C = A @ B
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # the merged rows read back with the leading axes swapped
        ("return C.reshape((3, 100, 48))", "return C.reshape((100, 3, 48)).transpose(0, 1)"),
        # the last chunk of rows never computed (a tail the loop forgot)
        ("pypto.loop(0, 2, 1,", "pypto.loop(0, 1, 1,"),
        # A handed over as [K, rows] memory: every product row mixes samples
        ("A.contiguous().reshape(300, 64)", "A.transpose(0, 1).contiguous().reshape(300, 64)"),
    ],
    ids=["leading_axes_swapped", "rows_chunk_missing", "rows_mixed"],
)
def test_a_tensor_by_matrix_product_with_its_rows_wrong_fails(old, new, tmp_path):
    report = rejected(tmp_path, TENSOR_BY_MATRIX, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


SCAN = """kernel running_total
dims R = 48, C = 2500
input x: f32[R, C]
output y: f32[R, C]
y = cumsum(x, axis=1, reverse=true)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # along the other axis
        ("pypto.cumsum(x, 1)", "pypto.cumsum(x, 0)"),
        # each element's own term left out (exclusive for inclusive): off by one place
        ("_r0 - pypto.cumsum(x, 1) + x", "_r0 - pypto.cumsum(x, 1)"),
        # the running total from the start instead of from the end
        ("_r0 - pypto.cumsum(x, 1) + x", "pypto.cumsum(x, 1)"),
        # the total of the wrong axis beside the scan
        ("pypto.sum(x, 1, keepdim=True)", "pypto.sum(x, 0, keepdim=True)"),
    ],
    ids=["other_axis", "exclusive", "forward", "total_of_other_axis"],
)
def test_a_wrong_scan_fails(old, new, tmp_path):
    spec = compiled(SCAN)
    try:
        report = run_check(spec, kernel_path=wrong_kernel(tmp_path, spec, old, new))
    except SimulationError as error:  # pypto's own verification stopped it: no PASS either
        assert "FAILED" in str(error)
        return
    assert not report.ok
    assert report.outputs[0].mismatched > 0


def test_a_scan_restarted_per_tile_fails(tmp_path):
    """A scan split across blocks without carrying the running total (what a loop over the
    scanned axis would compute): each 1250-column half starts again from 0."""
    spec = compiled(SCAN.replace("reverse=true", "reverse=false"))
    assert run_check(spec).ok
    restarted = (
        "        left = pypto.cumsum(pypto.view(x, [48, 1250], [0, 0]), 1)\n"
        "        right = pypto.cumsum(pypto.view(x, [48, 1250], [0, 1250]), 1)\n"
        "        pypto.assemble(left, [0, 0], y)\n"
        "        pypto.assemble(right, [0, 1250], y)\n"
    )
    path = wrong_kernel(tmp_path, spec, "        y[:] = pypto.cumsum(x, 1)\n", restarted)
    report = run_check(spec, kernel_path=path)
    assert not report.ok
    assert report.outputs[0].mismatched >= 48 * 1250 // 2


MASKED = """kernel masked
dims N = 96
input A: f32[N, N]
input B: f32[N, N]
output C: f32[N, N]
C = triu(A @ B, diagonal=1)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        ("                >= 1.0\n", "                >= 0.0\n"),  # the diagonal kept too
        ("                >= 1.0\n", "                <= 1.0\n"),  # the lower part kept
        ("            _t0,\n            0.0,\n", "            _t0,\n            _t0,\n"),  # no mask
        ("pypto.full([1, 96], 1.0", "pypto.full([1, 96], 2.0"),  # columns counted double
    ],
    ids=["diagonal_off_by_one", "tril_for_triu", "unmasked", "positions_wrong"],
)
def test_a_wrong_triangle_fails(old, new, tmp_path):
    """The unmasked kernel is what passes a check on the problem's own (already triangular)
    inputs; check's own inputs are full matrices."""
    spec = compiled(MASKED)
    report = run_check(spec, kernel_path=wrong_kernel(tmp_path, spec, old, new))
    assert not report.ok
    assert report.outputs[0].mismatched > 0


POSITIONS = """kernel positions
dims B = 8, N = 64, M = 32
input x: f32[B, N, M]
output y: i64[B, M]
y = argmax(x, axis=1)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # the last of tied maxima instead of the first (torch's rule)
        ("        _r1 = pypto.amin(", "        _r1 = pypto.amax("),
        # the position of the minimum: argmin for argmax
        ("pypto.amax(x, 1, keepdim=True)", "pypto.amin(x, 1, keepdim=True)"),
        # positions counted from 1
        ("1.0, pypto.DT_FP32), 1) - 1.0", "1.0, pypto.DT_FP32), 1) - 0.0"),
        # int32 where torch returns int64
        ("return y.reshape((8, 32))", "return y.reshape((8, 32)).int()"),
    ],
    ids=["last_of_ties", "argmin", "from_one", "int32"],
)
def test_a_wrong_arg_reduction_fails(old, new, tmp_path):
    """check's inputs to an argmax are rounded to quarters, so that a quarter of the rows
    have tied maxima and the tie rule is judged."""
    spec = compiled(POSITIONS)
    assert run_check(spec).ok
    try:
        report = run_check(spec, kernel_path=wrong_kernel(tmp_path, spec, old, new))
    except SimulationError as error:  # pypto's own verification stopped it: no PASS either
        assert "FAILED" in str(error)
        return
    assert not report.ok


PRODUCTS = """kernel products
dims R = 16, C = 24
input x: f32[R, C]
output p: f32[R]
output q: f32[R, C]
p = prod(x, axis=1)
q = cumprod(x, axis=1)
"""


@pytest.mark.parametrize(
    "old, new, wrong",
    [
        # the signs dropped: products of |x|
        ("p[:] = pypto.exp(_r0) * (", "p[:] = pypto.exp(_r0) * 0.0 + 1.0 * (1.0 + 0.0 * ", "p"),
        ("* ((_t1 - pypto.floor(_t1 * 0.5) * 2.0) * -2.0 + 1.0)", "", "q"),
        # the count of negative factors halved rounding up: odd counts give the wrong sign
        ("pypto.floor(_t0 * 0.5)", "pypto.floor(_t0 * 0.5 + 0.5)", "p"),
        # each element's own factor left out (an exclusive running product)
        ("pypto.exp(pypto.cumsum(_t3, 1))", "pypto.exp(pypto.cumsum(_t3, 1) - _t3)", "q"),
    ],
    ids=["prod_unsigned", "cumprod_unsigned", "parity_rounded_up", "cumprod_exclusive"],
)
def test_a_wrong_product_fails(old, new, wrong, tmp_path):
    report = rejected(tmp_path, PRODUCTS, old, new)
    assert not report.ok
    failed = {o.name for o in report.outputs if not o.ok}
    assert wrong in failed


GATHERED = """kernel gathered
dims N = 64, C = 10
input logits: f32[N, C]
input targets: i64[N * 1] in range(C)
input keep: bool[N, C]
output picked: f32[N]
picked = sum(where(index(logits, axis=1) == targets, logits, 0.0) * keep, axis=1)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # the class after the target's
        ("== pypto.cast(targets, pypto.DT_FP32)", "== pypto.cast(targets, pypto.DT_FP32) + 1.0"),
        # the mask ignored, or inverted
        ("* pypto.cast(keep, pypto.DT_FP32)", "* 1.0"),
        ("* pypto.cast(keep, pypto.DT_FP32)", "* (1.0 - pypto.cast(keep, pypto.DT_FP32))"),
    ],
    ids=["target_off_by_one", "mask_ignored", "mask_inverted"],
)
def test_a_wrong_gather_or_mask_fails(old, new, tmp_path):
    """check draws class indices within range(C) and masks with both values."""
    report = rejected(tmp_path, GATHERED, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


def test_inputs_of_an_arg_reduction_have_tied_extrema():
    """Without ties, a kernel returning the last of equal maxima would pass."""
    case = spec_case(compiled(POSITIONS), seeded_draw(0))
    (x,) = case.inputs
    tied = (x == x.amax(dim=1, keepdim=True)).sum(dim=1) > 1
    assert 0.1 < float(tied.double().mean()) < 0.9


CROPPED = """kernel shifted
dims B = 16, N = 300
input x: f32[B, N]
output y: f32[B - 1, N + 1]
let shifted = cat([x[:, :1] * 0.0, x], axis=1)
y = cumsum(shifted[1:], axis=1)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # the crop from the other end: rows 0..14 instead of 1..15
        ("[15, 301], [1, 0]", "[15, 301], [0, 0]"),
        # the zero column after the values instead of before them
        ("[pypto.view(x, [16, 1], [0, 0]) * 0.0, x]", "[x, pypto.view(x, [16, 1], [0, 0]) * 0.0]"),
        # the first column kept instead of zeroed
        ("pypto.view(x, [16, 1], [0, 0]) * 0.0", "pypto.view(x, [16, 1], [0, 0]) * 1.0"),
    ],
    ids=["crop_other_end", "cat_order", "column_not_zeroed"],
)
def test_a_wrong_crop_or_concatenation_fails(old, new, tmp_path):
    report = rejected(tmp_path, CROPPED, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


FLIPPED = """kernel flipped
dims B = 16, N = 320
input x: f32[B, N]
output y: f32[B, N]
y = flip(x, axis=1) - 0.5 * x
"""
FLIP = "pypto.index_select(x, 1, pypto.arange(319, -1, -1))"


def flipped_halves(first: int, second: int) -> str:
    """The row's two halves (starting at columns `first`, `second`) each flipped, joined
    (halves of 160 columns: PyPTO wants a view's rows in whole 32-byte blocks)."""
    return "pypto.concat([{}, {}], 1)".format(
        *(
            f"pypto.index_select(pypto.view(x, [16, 160], [0, {start}]), 1, "
            "pypto.arange(159, -1, -1))"
            for start in (first, second)
        )
    )


@pytest.mark.parametrize(
    "new",
    [
        "x",
        "pypto.index_select(x, 0, pypto.arange(15, -1, -1))",
        "pypto.index_select(x, 1, pypto.arange(0, 320, 1))",
        # each half flipped in its place: what a loop splitting the flipped axis would give
        flipped_halves(0, 160),
    ],
    ids=["not_flipped", "other_axis", "ascending_indices", "halves_in_place"],
)
def test_a_wrong_flip_fails(new, tmp_path):
    report = rejected(tmp_path, FLIPPED, FLIP, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


def test_a_flip_joined_from_flipped_halves_passes(tmp_path):
    """The control of `halves_in_place`: the same halves, the last first, are the flip."""
    spec = compiled(FLIPPED)
    joined = wrong_kernel(tmp_path, spec, FLIP, flipped_halves(160, 0))
    assert run_check(spec, kernel_path=joined).ok


POOLED = """kernel pooled
dims N = 2, C = 3, H = 12, W = 12, P = 6
input x: f32[N, C, H, W]
output y: f32[N, C, P, P]
y = window_max(x, axis=[2, 3], size=3, stride=2, padding=1)
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # a window of two: the third tap along H replaced by the first
        (
            "pypto.view(_split0_y, [6, 6, 1, 12], [0, 1, 0, 0])",
            "pypto.view(_split0_y, [6, 6, 1, 12], [0, 0, 0, 0])",
        ),
        # the first tap along W a stride late
        (
            "pypto.view(_split1_y, [6, 6, 1, 6], [0, 0, 0, 0])",
            "pypto.view(_split1_y, [6, 6, 1, 6], [0, 1, 0, 0])",
        ),
        # zero padding: an all-negative edge window then gives 0
        (
            "_fill0_y = pypto.full([6, 1, 12], -3.4028234663852886e+38",
            "_fill0_y = pypto.full([6, 1, 12], 0.0",
        ),
        # H and W swapped in the result
        ("y[:] = pypto.transpose(_unswap1_y, 1, 2)", "y[:] = _unswap1_y"),
    ],
    ids=["tap_dropped", "tap_a_stride_late", "zero_padding", "axes_swapped"],
)
def test_a_wrong_window_fails(old, new, tmp_path):
    report = rejected(tmp_path, POOLED, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


@pytest.mark.parametrize(
    "old, new",
    [
        ("* 0.1111111111111111", "* 0.125"),  # averaged over 8, not the window's 9
        # the padding an average counts holds 1, not 0
        ("_fill0_y = pypto.full([6, 1, 12], 0.0", "_fill0_y = pypto.full([6, 1, 12], 1.0"),
    ],
    ids=["divisor", "nonzero_padding"],
)
def test_a_wrong_average_window_fails(old, new, tmp_path):
    text = POOLED.replace("window_max", "window_mean")
    report = rejected(tmp_path, text, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0


STEPPED = """kernel stepped
dims B = 16, N = 301
input x: f32[B, N]
output y: f32[B, 100]
y = exp(x[:, 1::3]) * 2.0
"""


@pytest.mark.parametrize(
    "text, old, new",
    [
        # the crop starts one element early: every step's phase shifted
        (STEPPED, "pypto.view(x, [16, 300], [0, 1])", "pypto.view(x, [16, 300], [0, 0])"),
        # the second element of each step taken instead of the first
        (
            STEPPED,
            "pypto.view(_split0_y, [1, 100, 1, 16], [0, 0, 0, 0])",
            "pypto.view(_split0_y, [1, 100, 1, 16], [0, 0, 1, 0])",
        ),
        # two stepped axes: the columns' phase off by one
        (
            EXAMPLE_BY_STEM["stepped_slices"].read_text(),
            "pypto.view(_split1_y, [128, 10, 1, 16], [0, 0, 0, 0])",
            "pypto.view(_split1_y, [128, 10, 1, 16], [0, 0, 1, 0])",
        ),
    ],
    ids=["start_one_early", "second_of_each_step", "columns_phase"],
)
def test_a_wrong_stepped_slice_fails(text, old, new, tmp_path):
    report = rejected(tmp_path, text, old, new)
    assert not report.ok
    assert report.outputs[0].mismatched > 0, report.to_json()


@pytest.mark.parametrize(
    "old, new",
    [
        # the input's features split into strided groups instead of runs of C / G
        (
            "_kernel_x = x.contiguous().reshape(32, 6, 64)",
            "_kernel_x = x.contiguous().reshape(32, 64, 6).transpose(1, 2).contiguous()",
        ),
        # the per-feature weight split the other way than the input it scales
        (
            "_kernel_w = w.contiguous().reshape(1, 6, 64)",
            "_kernel_w = w.contiguous().reshape(1, 64, 6).transpose(1, 2).contiguous()",
        ),
        # the groups merged back in the wrong order
        ("return y.reshape((32, 384))", "return y.transpose(1, 2).reshape((32, 384))"),
        # the flat per-group output merged column-major
        ("s.reshape((192,))", "s.transpose(0, 1).reshape((192,))"),
        # the group mean over the groups instead of within each
        ("_r0 = pypto.sum(h, 2, keepdim=True)", "_r0 = pypto.sum(h, 1, keepdim=True)"),
    ],
    ids=[
        "strided_groups",
        "weight_split_apart",
        "merged_transposed",
        "flat_column_major",
        "mean_across",
    ],
)
def test_a_wrong_reshape_fails(old, new, tmp_path):
    report = rejected(tmp_path, EXAMPLE_BY_STEM["group_views"].read_text(), old, new)
    assert not report.ok
    assert any(output.mismatched > 0 for output in report.outputs), report.to_json()


SCALED_SQUARE = """kernel scaled_square
dims B = 64, K = 64, N = 48
input x: f32[B, K]
input s: f32[K]
input w: f32[N, K]
output y: f32[B, N]
y = (x * s) @ w.T
"""


@pytest.mark.parametrize(
    "old, new",
    [
        # the computed operand read transposed (square, so the shapes still agree)
        ("                a_trans=False,", "                a_trans=True,"),
        # the cube multiplies the raw input instead of the value computed from it
        ("pypto.reshape(_matrix0, [64, 64])", "pypto.reshape(x, [64, 64])"),
    ],
    ids=["operand_transposed", "operand_uncomputed"],
)
def test_a_wrong_matmul_of_a_computed_value_fails(old, new, tmp_path):
    report = rejected(tmp_path, SCALED_SQUARE, old, new)
    assert not report.ok


MIXED = """kernel mixed_sum
dims N = 16, D = 1024
input x: f16[N, D]
output y: f32[N]
y = sum(cast(x, f32) * cast(x, f32), axis=1)
"""


def test_half_precision_work_where_the_spec_widens_first_fails(tmp_path):
    """`cast(x, f32)` widens f16 inputs before the products: a kernel that squares in f16
    and widens after rounds every product to 11 bits, which the f32 bound does not allow."""
    report = rejected(
        tmp_path,
        MIXED,
        "_t0 = pypto.cast(x, pypto.DT_FP32)\n        y[:] = pypto.sum(_t0 * _t0, 1, keepdim=True)",
        "_t0 = pypto.cast(x * x, pypto.DT_FP32)\n        y[:] = pypto.sum(_t0, 1, keepdim=True)",
    )
    assert not report.ok and report.outputs[0].mismatched > 0
