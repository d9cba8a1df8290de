"""`check` estimates its memory before it allocates anything and refuses what will not fit;
`coverage` then checks the largest halving of the problem that fits, and says so."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import ptodsl
from ptodsl.checking import check as checking
from ptodsl.checking import coverage
from ptodsl.checking.check import CheckTooBig, run_check
from ptodsl.checking.coverage import check_pair
from ptodsl.checking.error_bounds import element_bound
from ptodsl.ir import nodes as ir
from ptodsl.ir import sim_memory
from ptodsl.runtime import memory
from ptodsl.tools import cli

ROOT = Path(__file__).resolve().parent.parent
RELU_SPEC = ROOT / "examples" / "kernelbench" / "19_relu.pto"
RELU_PROBLEM = ROOT / "tests" / "problems" / "kernelbench" / "19_relu.py"


def needed(path: Path, dims=None) -> float:
    compiled = ptodsl.compile(path.read_text(encoding="utf-8"), path.name, dims=dims)
    return sim_memory.check_bytes(compiled.lowered.checked, compiled.program)


def test_the_estimate_grows_with_the_outputs_and_with_windows():
    small = needed(RELU_SPEC, {"batch_size": 1})
    assert needed(RELU_SPEC) - small == pytest.approx(15 * (small - sim_memory.BASE_BYTES))
    pool = ROOT / "examples" / "kernelbench" / "43_max_pool_3d.pto"
    # a 16384 x 16384 float64 golden and its error scale alone are 4 GiB (its error scale is
    # evaluated a launch's rows at a time, beside them); a window kernel keeps every tap
    assert needed(ROOT / "examples" / "kernelbench" / "7_matmul_small_k.pto") > 7 * 2**30
    assert needed(pool) > 8 * 2**30


# Attention's scores are far larger than its output: [B, 4, L, L] against [B, 4, L, 8].
SCORES = """kernel scores
dims B = 2, L = 512, E = 8
input q: f32[B, 4, L, E]
input k: f32[B, 4, L, E]
output y: f32[B, 4, L, E]
let att = softmax(q @ k.transpose(-2, -1), axis=-1)
y = att @ k
"""


def test_the_estimate_counts_what_the_golden_evaluation_and_a_matmul_hold_beyond_outputs():
    compiled = ptodsl.compile(SCORES, "scores.pto", tuning=None)
    checked = compiled.lowered.checked
    scores = 2 * 4 * 512 * 512
    # the float64 value and scale of the scores, three times inside the softmax
    assert sim_memory.evaluation_bytes(checked) >= 16 * 3 * scores
    assert sim_memory.check_bytes(checked, compiled.program) >= 16 * 3 * scores
    # the kernel computing the scores' matmul keeps them whole for the softmax after it
    kernels = compiled.program.kernels
    assert max(map(sim_memory.tensor_bytes, kernels)) >= 4 * scores * 2


def test_letting_go_of_lets_after_their_last_read_keeps_every_value():
    compiled = ptodsl.compile(SCORES, "scores.pto", tuning=None)
    checked = compiled.lowered.checked
    body = checked.body
    assert ir.let_lifetimes(body) == {1: ("att",)}
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.rand(t.type.shape, generator=generator) for t in checked.inputs]
    (bounded,), _ = checking.evaluate_bounds(checked, inputs, {})
    q, k = (value.double() for value in inputs)
    expected = torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ k
    torch.testing.assert_close(bounded.value, expected)


def test_a_check_that_would_not_fit_is_refused_before_it_starts(monkeypatch):
    monkeypatch.setattr(memory, "budget", lambda: 2**20)
    compiled = ptodsl.compile(RELU_SPEC.read_text(encoding="utf-8"), RELU_SPEC.name)
    with pytest.raises(CheckTooBig, match=r"needs about 0\.\d GiB .* 0\.0 GiB are available"):
        run_check(compiled, against=RELU_PROBLEM)


def test_the_cli_says_what_a_check_needs_and_fails(monkeypatch, capsys):
    monkeypatch.setattr(memory, "budget", lambda: 2**20)
    status = cli.main(["check", str(RELU_SPEC)])
    assert status == 1
    err = capsys.readouterr().err
    assert "needs about" in err and "--dim NAME=SIZE" in err
    assert "Traceback" not in err


def test_coverage_checks_the_largest_halving_that_fits_and_says_so(monkeypatch):
    full, half = needed(RELU_SPEC), needed(RELU_SPEC, {"batch_size": 8, "dim": 8192})
    monkeypatch.setattr(memory, "budget", lambda: (full + half) / 2)
    row = check_pair(RELU_SPEC, RELU_PROBLEM)
    assert row.verdict == "PASS"
    assert row.note.startswith("checked at batch_size=8, dim=8192")
    assert "the check needs ~" in row.note
    assert row.sim_time_us is not None and row.sim_time_us > 0


def test_the_halvings_leave_a_computed_dim_to_the_dims_it_is_computed_from():
    """Level 2 #15 at full shape needs ~138 GiB; its halvings used to resize `D_out`,
    which a spec computes, and failed to compile."""
    path = ROOT / "examples" / "kernelbench-level2" / "15_ConvTranspose3d_BatchNorm_Subtract.pto"
    text = path.read_text(encoding="utf-8")
    compiled = ptodsl.compile(text, path.name, tuning=None)
    dims, smaller = next(coverage._smaller_shapes(text, path.name, compiled))
    assert "D_out" not in dims and dims["D"] == compiled.lowered.syntax.declared_dims["D"] // 2
    (output,) = (o for o in smaller.lowered.checked.outputs if o.name == "y")
    assert output.declared_shape[2] == (dims["D"] - 1) * 2 - 2 * 1 + 3


def test_the_halvings_keep_a_dim_the_size_of_an_int_param():
    """Level 2 #60: its 3 input channels halved to 1 made the problem's kernel_size 3 a 1
    too (the problem's constants are resized by value), and the check refused the pair."""
    path = (
        ROOT
        / "examples"
        / "kernelbench-level2"
        / "60_ConvTranspose3d_Swish_GroupNorm_HardSwish.pto"
    )
    text = path.read_text(encoding="utf-8")
    compiled = ptodsl.compile(text, path.name, tuning=None)
    dims, _ = next(coverage._smaller_shapes(text, path.name, compiled))
    assert "C_in" not in dims and dims["N"] == 64
    resize = checking.problem_rescale(compiled.lowered.syntax.declared_dims, dims)
    assert 3 not in resize.sizes  # kernel_size = 3 stays


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 22])
def test_the_comparison_in_chunks_judges_as_the_whole_does(monkeypatch, chunk):
    """Chunks keep the float64 temporaries small; the verdict, counts, extremes and worst
    elements must not depend on where the chunks end."""
    generator = torch.Generator().manual_seed(3)
    expected = torch.randn(5, 37, generator=generator, dtype=torch.float64) * 10
    scale = expected.abs() + 1.0
    actual = expected.to(torch.float32)
    actual[1, 3] += 0.5
    actual[4, 36] = float("nan")
    actual[0, 0] -= 0.25
    monkeypatch.setattr(checking, "COMPARE_CHUNK", chunk)
    result = checking.compare("y", actual, expected, scale, ir.DType.F32)
    assert result.mismatched == 3 and not result.ok
    assert [e.index for e in result.worst[:3]] == [(4, 36), (1, 3), (0, 0)]
    assert result.max_abs_error == math.inf
    bound = element_bound(scale, ir.DType.F32)
    assert result.bound_range == (float(bound.min()), float(bound.max()))
    constant = torch.full((5, 37), 3.0, dtype=torch.float64)
    vacuous = checking.compare("y", constant.float(), constant, scale, ir.DType.F32)
    assert vacuous.vacuous is not None and "one constant" in vacuous.vacuous


def test_the_largest_spec_pypto_allows_is_refused_with_the_figure(tmp_path, capsys):
    """2**31 - 1 elements, a prime extent: compiling it must not search 2**31 launch counts,
    and the check refuses it by its estimate, before allocating 8 GiB of inputs."""
    spec = tmp_path / "big.pto"
    spec.write_text(
        "kernel big\ndims n = 2147483647\ninput x: f32[n]\noutput y: f32[n]\ny = relu(x)\n",
        encoding="utf-8",
    )
    assert cli.main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    needs = float(err.split("needs about ")[1].split(" GiB")[0])
    assert needs > 8 * 2**31 / 2**30  # at least the float64 golden
    assert "--dim NAME=SIZE" in err and "Traceback" not in err


@pytest.mark.parametrize("n", [1, 2, 12, 97, 2**20, 2147483647, 2**31 - 2])
def test_launch_counts_are_every_divisor_in_order(n):
    from ptodsl.passes.launches import _divisors

    expected = [d for d in range(1, n + 1) if n % d == 0] if n < 10**5 else None
    found = _divisors(n)
    assert found == sorted(set(found)) and all(n % d == 0 for d in found)
    assert found[0] == 1 and found[-1] == n
    if expected is not None:
        assert found == expected
    if n == 2147483647:
        assert found == [1, n]
    if n == 2**31 - 2:  # 2 * 3**2 * 7 * 11 * 31 * 151 * 331
        assert len(found) == 2 * 3 * 2**5


@pytest.mark.parametrize(
    "convolve",
    [
        lambda x: torch.nn.functional.conv1d(x[..., 0, 0], torch.ones(4, 3, 3, dtype=x.dtype)),
        lambda x: torch.nn.functional.conv3d(x, torch.ones(6, 1, 3, 3, 3, dtype=x.dtype), groups=3),
        lambda x: torch.nn.functional.conv_transpose3d(
            x, torch.ones(3, 2, 2, 3, 1, dtype=x.dtype), stride=(2, 1, 3), padding=1
        ),
    ],
    ids=["conv1d", "grouped_conv3d", "conv_transpose3d"],
)
def test_float64_convolutions_one_sample_at_a_time_compute_the_same_values(convolve):
    """torch's float64 CPU convolution unfolds the whole batch at once (#66's problem asked
    for 35.6 GB): the goldens run it one sample at a time, with the same values."""
    from ptodsl.checking.convolutions import CONVOLUTIONS, SampleBySample

    x = torch.randn(3, 3, 5, 6, 7, generator=torch.Generator().manual_seed(0))
    x = x.to(torch.float64)
    calls = []

    class Counting(SampleBySample):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in CONVOLUTIONS:
                calls.append(args[0].shape[0])
            return super().__torch_function__(func, types, args, kwargs)

    with Counting():
        per_sample = convolve(x)
    assert torch.equal(per_sample, convolve(x))
    assert calls == [3]  # the batch's call, which ran each sample below the mode
    with Counting():
        convolve(x.to(torch.float32))  # float32 has a faster path: left alone
    assert calls == [3, 3]
