"""`check --against PROBLEM --set NAME=VALUE` (issue 42): the problem file's constants are
rewritten by name in its syntax tree, so whatever it computes from them follows, and the
spec's dims are bound from the shapes the resized problem gives."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT

from ptodsl.checking.coverage import read_scaled
from ptodsl.checking.problem_dims import bound_dims
from ptodsl.checking.problems import ProblemError, ProblemRun, parse_setting, rewritten_problem
from ptodsl.frontend.diagnostics import Source
from ptodsl.pipeline import lower

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
    from ptodsl.frontend.diagnostics import SpecError

    with pytest.raises(SpecError, match=message):
        compiled_kernel(COMPUTED.replace(old, new))


def test_a_computed_dim_cannot_be_resized():
    from ptodsl.frontend.diagnostics import SpecError

    with pytest.raises(SpecError, match="dim `H_out` is computed from other dims"):
        compiled_kernel(COMPUTED, {"H_out": 3})


WITH_PARAMS = """kernel strided
dims N = 2, C = 3, H = 16
dims H_out = (H + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1
dims C2 = channels * 2
param channels: int = C
param kernel_size: int = 3
param stride: int = 2
param padding: int = 1
param dilation: int = 1
param scale: f32 = 2.0
input x: f32[N, H]
output y: f32[N, H_out]
y = x[:, ::2] * 2.0
"""


def test_a_computed_dim_takes_int_params_and_params_standing_for_dims():
    """torch's output-size formula written with the module's own arguments; a param whose
    value is a dim (`channels = C`) counts as that dim, when the spec is compiled and when
    its dims are bound from a problem."""
    sizes = {d.name: d.size for d in compiled_kernel(WITH_PARAMS).dims}
    assert sizes == {"N": 2, "C": 3, "H": 16, "H_out": 8, "C2": 6}
    sizes = {d.name: d.size for d in compiled_kernel(WITH_PARAMS, {"H": 13, "C": 5}).dims}
    assert (sizes["H_out"], sizes["C2"]) == (7, 10)
    syntax, kernel = checked(WITH_PARAMS)
    dims, found = bound_dims(syntax, kernel, run_giving(torch.zeros(2, 13), outputs=[(2, 7)]), "p")
    assert dims == {"N": 2, "H": 13}
    assert "H_out = 7 (computed)" in found


def test_a_computed_dim_names_only_dims_and_int_params():
    from ptodsl.frontend.diagnostics import SpecError

    with pytest.raises(SpecError, match="`scale` is not a dim declared before `C2` nor an `int`"):
        compiled_kernel(WITH_PARAMS.replace("C2 = channels * 2", "C2 = scale * 2"))


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
    """#100 (a strided, padded ConvTranspose3d) declares its output extents as torch computes
    them, from its int params: --set makes the problem small, and the spec follows without a
    --dim."""
    spec = LEVEL2_SPECS / "100_ConvTranspose3d_Clamp_Min_Divide.pto"
    assert "D_out = (D - 1) * stride - 2 * padding + kernel_size" in spec.read_text("utf-8")
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


# `coverage --scaled`: the table beside the specs (scaled.toml) of the constants each spec's
# problem is checked at.
def scaled_table(tmp_path, text: str, stems=("19_relu",)) -> Path:
    for stem in stems:
        (tmp_path / f"{stem}.pto").write_text("", encoding="utf-8")
    table = tmp_path / "scaled.toml"
    table.write_text(text, encoding="utf-8")
    return table


def test_a_scaled_table_gives_each_spec_its_settings_as_set_takes_them(tmp_path):
    table = scaled_table(
        tmp_path,
        '[19_relu]\nbatch_size = 2\nshape = [4, 8]\none = [3]\n"Model.scale" = 0.5\nname = "x"\n'
        "[20_leaky]\n",
        stems=("19_relu", "20_leaky"),
    )
    scaled = read_scaled(table, tmp_path)
    assert scaled == {
        "19_relu": {
            "batch_size": "2",
            "shape": "(4, 8)",
            "one": "(3,)",
            "Model.scale": "0.5",
            "name": "'x'",
        },
        "20_leaky": {},  # an empty entry: the full shape
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[19_relu]\nbatch_size = \n", "scaled.toml: Invalid value (at line 2, column 14)"),
        ("[18_gelu]\nbatch_size = 2\n", "[18_gelu] names no spec in"),
        ("19_relu = 2\n", "`19_relu` is not a table: write `[19_relu]`"),
        ("[19_relu]\nx = {a = 1}\n", "[19_relu]: {'a': 1} is not a number"),
        ('[19_relu]\n"2x" = 1\n', "[19_relu]: expected NAME=VALUE"),
    ],
)
def test_a_wrong_scaled_table_says_what_is_wrong_where(tmp_path, text, message):
    with pytest.raises(ValueError) as error:
        read_scaled(scaled_table(tmp_path, text), tmp_path)
    assert message in str(error.value)


def test_coverage_scaled_without_its_table_is_a_usage_error(tmp_path):
    (tmp_path / "problems").mkdir()
    (tmp_path / "specs").mkdir()
    result = ptodsl("coverage", tmp_path / "problems", "--specs", tmp_path / "specs", "--scaled")
    assert result.returncode == 2, result.stderr
    assert "scaled.toml does not exist: --scaled reads a TOML table" in result.stderr
    assert "Traceback" not in result.stderr
    fifo = tmp_path / "table.toml"
    os.mkfifo(fifo)  # never opened: a FIFO is not a table
    result = ptodsl(
        "coverage", tmp_path / "problems", "--specs", tmp_path / "specs", "--scaled", fifo
    )
    assert result.returncode == 2 and "is not a regular file" in result.stderr


# ---- size expressions in shapes, reshapes and slices ----------------------------------

ARITHMETIC = """kernel arith
dims N = 4, D = 8, C = 6
param k: int = 3
input x: f32[N, 2 * D - 1]
input g: f32[N, 2 * C]
input w: f32[N, (2 * C)]
output y: f32[N, D - k + 1]
output z: f32[N, D / 2]
output h: f32[N, (C * 2)]
y = x[:, D - 2:2 * D - 1 - (k - 1)][:, :D - k + 1] * 2.0
z = x[:, -(D - 1):][:, ::2]
h = w.reshape(N, C * 2 - 0) + g.reshape(N, 2 * C)
"""


def test_every_size_expression_form_in_shapes_reshapes_and_slices():
    """`2 * D - 1` is one axis (not the split `[2, D - 1]`), a product of dims and sizes
    alone still splits (`2 * C`: logical axes 2 and C), parentheses make it one axis;
    reshape sizes and slice bounds take dims and `int` params too."""
    kernel = compiled_kernel(ARITHMETIC)
    shapes = {t.name: t.type.shape for t in (*kernel.inputs, *kernel.outputs)}
    assert shapes == {
        "x": (4, 15), "g": (4, 2, 6), "w": (4, 12), "y": (4, 6), "z": (4, 4), "h": (4, 12)
    }  # fmt: skip
    resized = compiled_kernel(ARITHMETIC, {"D": 6})
    assert {t.name: t.type.shape for t in resized.outputs}["y"] == (4, 4)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("f32[N, 2 * D - 1]", "f32[N, 2 * E - 1]", "`E` is not a dim nor an `int` param"),
        ("output z: f32[N, D / 2]", "output z: f32[N, (D - 8) // 2]", "this axis is 0 long"),
        ("x[:, D - 2:", "x[:, D - q:", "`q` is not a dim nor an `int` param"),
        ("f32[N, 2 * D - 1]", "f32[N, 2 * D - 1 + D / 3]", "8 / 3 is not a whole number"),
    ],
)
def test_a_size_expression_that_cannot_be_sized_is_an_error(old, new, message):
    from ptodsl.frontend.diagnostics import SpecError

    with pytest.raises(SpecError, match=message):
        compiled_kernel(ARITHMETIC.replace(old, new))


def test_a_dim_under_a_size_expression_is_bound_from_the_problem():
    """`x: f32[N, 2 * D - 1]` given [2, 9]: D = 5, the one size that fits; `(H - 4) // 2`
    fits two sizes and binds nothing."""
    syntax, kernel = checked(ARITHMETIC)
    run = run_giving(torch.zeros(2, 9), torch.zeros(2, 2, 6), torch.zeros(2, 12))
    dims, found = bound_dims(syntax, kernel, run, "p")
    assert dims == {"N": 2, "D": 5, "C": 6}
    assert "D = 5 (input `x`, axis 1)" in found
    floor = "kernel floor\ndims N = 2, D = 10\ninput x: f32[N, (D - 4) // 2]\n"
    syntax, kernel = checked(floor + "output y: f32[N, (D - 4) // 2]\ny = x * 2.0\n")
    dims, _ = bound_dims(syntax, kernel, run_giving(torch.zeros(2, 3)), "p")
    assert "D" not in dims


# ---- an output's shape left for the compiler ------------------------------------------


def test_an_output_without_a_shape_takes_the_shape_of_its_value(tmp_path):
    """`output y: f32`: #100's output written without its extents is what the declared
    form is, at any size, and passes `check --against` its problem made small by --set."""
    spec = LEVEL2_SPECS / "100_ConvTranspose3d_Clamp_Min_Divide.pto"
    declared = spec.read_text("utf-8")
    left_out = declared.replace("output y: f32[N, C_out, D_out, H_out, W_out]", "output y: f32")
    assert left_out != declared
    for dims in (None, {"D": 3, "N": 2}):
        (shaped,) = compiled_kernel(declared, dims).outputs
        (inferred,) = compiled_kernel(left_out, dims).outputs
        assert inferred.type == shaped.type and inferred.declared == shaped.declared
    inferred_spec = tmp_path / spec.name
    inferred_spec.write_text(left_out, encoding="utf-8")
    sets = "batch_size=2 in_channels=3 out_channels=2 depth=3 height=4 width=5".split()
    problem = LEVEL2 / "100_ConvTranspose3d_Clamp_Min_Divide.py"
    arguments = [a for s in sets for a in ("--set", s)]
    result = ptodsl("check", inferred_spec, "--against", problem, *arguments, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "PASS" and report["outputs"][0]["shape"] == [2, 2, 5, 7, 9]


def test_an_output_declared_with_a_shape_is_still_checked_against_its_value():
    from ptodsl.frontend.diagnostics import SpecError

    spec = (LEVEL2_SPECS / "100_ConvTranspose3d_Clamp_Min_Divide.pto").read_text("utf-8")
    wrong = spec.replace(
        "output y: f32[N, C_out, D_out, H_out, W_out]", "output y: f32[N, C_out, D_out, H_out, W]"
    )
    with pytest.raises(SpecError, match="output `y` is declared f32"):
        compiled_kernel(wrong)


def test_coverage_sets_a_constant_in_every_problem_over_the_table():
    """`coverage --scaled --set batch_size=4`: every problem at batch 4, the table's other
    constants kept; a constant a problem does not assign fails its row, naming it."""
    level2 = ["--specs", LEVEL2_SPECS, "--only", "63", "12"]
    result = ptodsl("coverage", LEVEL2, *level2, "--scaled", "--set", "batch_size=4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("at set batch_size=4, in_features=256, out_features=128") == 2
    assert "2 of 2 problems pass." in result.stdout
    result = ptodsl("coverage", LEVEL2, *level2, "--set", "batch=4")
    assert result.returncode == 1
    assert result.stdout.count("PROBLEM ERROR: --set batch: problem") == 2
    assert "assigns no top-level `batch`; its constants: batch_size" in result.stdout
