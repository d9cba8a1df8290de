"""`check --against PROBLEM --set NAME=VALUE` (issue 42): the problem file's constants are
rewritten by name in its syntax tree, so whatever it computes from them follows, and the
spec's dims are bound from the shapes the resized problem gives."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT

from ptodsl.diagnostics import Source
from ptodsl.pipeline import lower
from ptodsl.problem_dims import bound_dims
from ptodsl.problems import ProblemError, ProblemRun, parse_setting, rewritten_problem

LEVEL2 = ROOT / "tests" / "problems" / "kernelbench-level2"
LEVEL2_SPECS = ROOT / "examples" / "kernelbench-level2"


def ptodsl(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, arguments)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )


PROBLEM = """\
import torch

batch_size = 16
channels = 16
depth, height = 16, 32
bias_shape = (channels, 1)
batch_size = 16  # assigned again: every assignment takes the new value


class Config:
    scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height)]
"""


def namespace(constants: dict[str, str]) -> dict:
    tree, changed = rewritten_problem(Path("p.py"), PROBLEM, constants)
    scope: dict = {}
    exec(compile(tree, "p.py", "exec"), scope)  # noqa: S102 - the test's own text
    scope["changed"] = changed
    return scope


def test_a_constant_is_rewritten_and_what_derives_from_it_follows():
    scope = namespace({"channels": "4"})
    assert scope["bias_shape"] == (4, 1)
    assert scope["batch_size"] == 16  # sharing channels' value, it keeps its own
    assert scope["get_inputs"]()[0].shape == (16, 4, 16, 32)
    assert scope["changed"] == ["channels = 16 -> 4"]


def test_every_assignment_of_a_reassigned_constant_is_rewritten():
    scope = namespace({"batch_size": "2"})
    assert scope["batch_size"] == 2
    assert scope["changed"] == ["batch_size = 16 -> 2", "batch_size = 16 -> 2"]


def test_an_unpacked_and_a_class_constant_are_rewritten():
    scope = namespace({"height": "6", "Config.scale": "0.5"})
    assert (scope["depth"], scope["height"]) == (16, 6)
    assert scope["Config"].scale == 0.5


def test_rewriting_keeps_the_problems_line_numbers():
    tree, _ = rewritten_problem(Path("p.py"), PROBLEM, {"channels": "4"})
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert function.lineno == PROBLEM.splitlines().index("def get_inputs():") + 1


def test_a_constant_the_problem_does_not_assign_is_named():
    with pytest.raises(ProblemError) as raised:
        rewritten_problem(Path("p.py"), PROBLEM, {"chanels": "4"})
    message = str(raised.value)
    assert "assigns no top-level `chanels`" in message
    assert "batch_size, bias_shape, channels, depth, height" in message


@pytest.mark.parametrize("text", ["N", "N=", "1x=3", "N=torch.ones(3)", "N=(1,"])
def test_a_setting_that_is_not_name_equals_literal_is_refused(text):
    with pytest.raises(ValueError):
        parse_setting(text)


def checked(spec: str):
    lowered = lower(Source(spec, "case.pto"), until="check")
    return lowered.syntax, lowered.checked


def run_giving(*inputs, init=(), outputs=()):
    return ProblemRun(
        init_values=list(init),
        inputs=list(inputs),
        parameters=[],
        expected=None,
        scaled=[],
        shapes=list(outputs),
    )


GROUPS = """kernel grouped
dims N = 8, G = 4, CG = 2, H = 8
param channels: int = G * CG
param shape: int[2] = [G, 1]
input x: f32[N, G * CG, H]
output y: f32[N + 1, G * CG, H]
y = cat([x[:1] * 0.0, x], axis=0)
"""


def test_dims_are_bound_from_inputs_outputs_params_products_and_offsets():
    syntax, kernel = checked(GROUPS)
    run = run_giving(torch.zeros(2, 6, 5), init=(6, (3, 1)), outputs=[(3, 6, 5)])
    dims, found = bound_dims(syntax, kernel, run, "problem p.py")
    assert dims == {"N": 2, "G": 3, "CG": 2, "H": 5}
    assert "G = 3 (param `shape`[0])" in found


def test_a_size_the_spec_disagrees_with_names_the_axis_and_both_sizes():
    syntax, kernel = checked(GROUPS)
    run = run_giving(torch.zeros(2, 6, 5), init=(6, (3, 1)), outputs=[(4, 6, 5)])
    with pytest.raises(ProblemError) as raised:
        bound_dims(syntax, kernel, run, "problem p.py")
    assert str(raised.value) == (
        "problem p.py: output `y`, axis 0: the problem gives 4, the spec declares 3 "
        "(`N` = 2 from input `x`, axis 0)"
    )


def test_a_size_no_factor_divides_is_named():
    syntax, kernel = checked(GROUPS)
    run = run_giving(torch.zeros(2, 7, 5), init=(7, (3, 1)))
    with pytest.raises(ProblemError, match="input `x`, axis 1: the problem gives 7"):
        bound_dims(syntax, kernel, run, "problem p.py")


SHARED = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x) * self.scale


batch_size = 16
features = 16


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
"""

SHARED_SPEC = """kernel scaled_relu
dims B = 16, F = 16
param features: int = F
input x: f32[B, F]
weight scale: f32[F] = randn
output y: f32[B, F]
y = relu(x) * scale
"""


def test_constants_of_one_value_are_checked_at_sizes_of_their_own(tmp_path):
    """With --dim the problem's 16s could only move together; --set names them."""
    spec, problem = tmp_path / "scaled.pto", tmp_path / "scaled.py"
    spec.write_text(SHARED_SPEC, encoding="utf-8")
    problem.write_text(SHARED, encoding="utf-8")
    refused = ptodsl("check", spec, "--against", problem, "--dim", "B=4", "--dim", "F=8")
    assert refused.returncode == 1
    assert "name them with --set NAME=VALUE" in refused.stderr
    arguments = ("check", spec, "--against", problem, "--set", "batch_size=4")
    result = ptodsl(*arguments, "--set", "features=8", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "PASS"
    assert report["scaled"] == ["batch_size = 16 -> 4", "features = 16 -> 8"]
    assert report["bound_dims"] == ["B = 4 (input `x`, axis 0)", "F = 8 (input `x`, axis 1)"]
    assert report["outputs"][0]["shape"] == [4, 8]
    # the spec's weight must follow the problem's: a spec without F in it fails, naming it
    spec.write_text(SHARED_SPEC.replace("f32[F] = randn", "f32[16] = randn"), encoding="utf-8")
    wrong = ptodsl(*arguments, "--set", "features=8")
    assert wrong.returncode == 1
    assert "scale" in wrong.stderr + wrong.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "--set sets a problem file's constants: give the problem with --against"),
        (("--dim", "B=4"), "leave out --dim"),
    ],
)
def test_set_without_a_problem_or_with_dim_is_a_usage_error(tmp_path, extra, message):
    spec = tmp_path / "scaled.pto"
    spec.write_text(SHARED_SPEC, encoding="utf-8")
    against = ("--against", ROOT / "tests" / "problems" / "kernelbench" / "19_relu.py")
    result = ptodsl("check", spec, *(against if extra else ()), "--set", "B=4", *extra)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_a_constant_the_problem_lacks_is_a_user_error_naming_it(tmp_path):
    spec, problem = tmp_path / "scaled.pto", tmp_path / "scaled.py"
    spec.write_text(SHARED_SPEC, encoding="utf-8")
    problem.write_text(SHARED, encoding="utf-8")
    result = ptodsl("check", spec, "--against", problem, "--set", "batch=4")
    assert result.returncode == 1
    assert "assigns no top-level `batch`; its constants: batch_size, features" in result.stderr
    assert "Traceback" not in result.stderr


# ---- dims computed from dims ----------------------------------------------------------

COMPUTED = """kernel strided
dims N = 4, H = 9
dims H_out = (H + 2 * 1 - 3) // 2 + 1, H_cat = H + H_out - (1 - 1) * 7
input x: f32[N, H]
output y: f32[N, H_out]
y = x[:, ::2] * 2.0
"""


def compiled_kernel(text: str, dims=None):
    import ptodsl

    return ptodsl.compile(text, name="case.pto", dims=dims, tuning=None).lowered.checked


def test_a_computed_dim_takes_every_operator_and_follows_its_operands():
    sizes = {d.name: d.size for d in compiled_kernel(COMPUTED).dims}
    assert sizes == {"N": 4, "H": 9, "H_out": 5, "H_cat": 14}
    sizes = {d.name: d.size for d in compiled_kernel(COMPUTED, {"H": 11}).dims}
    assert sizes["H_out"] == 6 and sizes["H_cat"] == 17


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("H_out = (H + 2", "H_out = (W + 2", "`W` is not a dim declared before `H_out`"),
        ("// 2 + 1", "// (H - H) + 1", "division by zero"),
        ("// 2 + 1", "// 2 - 5", "dim `H_out` must be at least 1, not -1"),
    ],
)
def test_a_computed_dim_that_cannot_be_computed_is_an_error(old, new, message):
    from ptodsl.diagnostics import SpecError

    with pytest.raises(SpecError, match=message):
        compiled_kernel(COMPUTED.replace(old, new))


def test_a_computed_dim_cannot_be_resized():
    from ptodsl.diagnostics import SpecError

    with pytest.raises(SpecError, match="dim `H_out` is computed from other dims"):
        compiled_kernel(COMPUTED, {"H_out": 3})


def test_dims_bound_from_a_problem_recompute_the_computed_ones():
    syntax, kernel = checked(COMPUTED)
    dims, found = bound_dims(syntax, kernel, run_giving(torch.zeros(2, 13), outputs=[(2, 7)]), "p")
    assert dims == {"N": 2, "H": 13}
    assert "H_out = 7 (computed)" in found
    with pytest.raises(ProblemError) as raised:
        bound_dims(syntax, kernel, run_giving(torch.zeros(2, 13), outputs=[(2, 8)]), "p")
    assert str(raised.value) == (
        "p: output `y`, axis 1: the problem gives 8, the spec declares 7 (`H_out` = 7 computed)"
    )


def test_a_level_2_problem_is_checked_small_by_set_alone():
    """#100 (a strided, padded ConvTranspose3d) declares its output extents as expressions:
    --set makes the problem small, and the spec follows without a --dim."""
    spec = LEVEL2_SPECS / "100_ConvTranspose3d_Clamp_Min_Divide.pto"
    assert "D_out = (D - 1) * 2" in spec.read_text(encoding="utf-8")
    sets = "batch_size=2 in_channels=3 out_channels=2 depth=3 height=4 width=5".split()
    problem = LEVEL2 / "100_ConvTranspose3d_Clamp_Min_Divide.py"
    arguments = [a for s in sets for a in ("--set", s)]
    result = ptodsl("check", spec, "--against", problem, *arguments, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "PASS"
    assert report["outputs"][0]["shape"] == [2, 2, 5, 7, 9]
    assert "W_out = 9 (computed)" in report["bound_dims"]


def test_a_computed_dim_dividing_by_zero_at_the_problems_sizes_is_a_problem_error():
    syntax, kernel = checked(COMPUTED.replace("// 2 + 1", "// (H - 7) + 1"))
    with pytest.raises(ProblemError) as raised:
        bound_dims(syntax, kernel, run_giving(torch.zeros(2, 7)), "p")
    assert str(raised.value) == (
        "p: at the sizes the problem gives, the spec's computed dim `H_out` (line 3): "
        "division by zero"
    )
