"""`check --against` and `coverage` with problem files that misbehave: the problem's code
runs in a worker under a time limit, and whatever it does ends in a clear verdict naming
the file, never in exit 0 without a verdict, exit 3, a hang or a lost table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

SPECS = ROOT / "examples" / "kernelbench"
RELU_SPEC = SPECS / "19_relu.pto"
RELU_PROBLEM = (ROOT / "tests" / "problems" / "kernelbench" / "19_relu.py").read_text(
    encoding="utf-8"
)


def ptodsl(*arguments, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, arguments)],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )


def relu_problem(tmp_path, old: str = "", new: str = "", name: str = "19_relu.py"):
    text = RELU_PROBLEM
    if old:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


EXIT_AT_IMPORT = ("import torch.nn as nn\n", "import torch.nn as nn\nimport sys\nsys.exit(0)\n")
EXIT_IN_INPUTS = (
    "def get_inputs():\n",
    "def get_inputs():\n    import sys\n\n    sys.exit(0)\n",
)

MISBEHAVIOUR = {
    "sys.exit at import": (*EXIT_AT_IMPORT, "loading the problem called sys.exit(0)"),
    "sys.exit in get_inputs": (*EXIT_IN_INPUTS, "get_inputs() called sys.exit(0)"),
    "os._exit": (
        "return torch.relu(x)",
        "import os\n\n        os._exit(0)",
        "its process exited with status 0 before it gave its Model's output",
    ),
    "raises": ("return torch.relu(x)", "raise RuntimeError('boom')", "RuntimeError: boom"),
    "returns a list": (
        "return torch.relu(x)",
        "return [torch.relu(x)]",
        "Model.forward returned a list",
    ),
    "returns None": ("return torch.relu(x)", "return None", "Model.forward returned None"),
    "returns a numpy array": (
        "return torch.relu(x)",
        "return torch.relu(x).numpy()",
        "Model.forward returned a numpy.ndarray",
    ),
    "returns a float": (
        "return torch.relu(x)",
        "return 1.5",
        "Model.forward returned a float",
    ),
    "returns a huge int": (
        "return torch.relu(x)",
        "return 10**30",
        "Model.forward returned an int",
    ),
    "an input that is a string": (
        "return [torch.randn(batch_size, dim)]",
        "return [torch.randn(batch_size, dim), 'x']",
        "get_inputs()[1] is a str",
    ),
    "a huge int init argument": (
        "return []\n",
        "return [2**70]\n",
        "get_init_inputs()[0] is the integer",
    ),
}


@pytest.mark.parametrize("case", sorted(MISBEHAVIOUR))
def test_misbehaving_problem_code_is_a_clear_error(case, tmp_path):
    old, new, message = MISBEHAVIOUR[case]
    problem = relu_problem(tmp_path, old, new)
    result = ptodsl("check", RELU_SPEC, "--against", problem)
    assert result.returncode == 1, result.stderr
    assert message in result.stderr, result.stderr
    assert str(problem) in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_a_problem_that_never_returns_times_out(tmp_path):
    problem = relu_problem(
        tmp_path, "def get_inputs():\n", "def get_inputs():\n    while True:\n        pass\n"
    )
    result = ptodsl("check", RELU_SPEC, "--against", problem, "--timeout", "5")
    assert result.returncode == 1
    assert "did not finish within 5 s" in result.stderr and str(problem) in result.stderr


SCALAR_FIRST = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, s: float, A: torch.Tensor) -> torch.Tensor:
        return A * s


def get_inputs():
    return [3.14, torch.randn(16384, 4096)]


def get_init_inputs():
    return []
"""


def test_a_forward_taking_the_scalar_first_is_not_a_drop_in(tmp_path):
    problem = tmp_path / "5_scalar_first.py"
    problem.write_text(SCALAR_FIRST, encoding="utf-8")
    result = ptodsl("check", SPECS / "5_matrix_scalar_multiply.pto", "--against", problem)
    assert result.returncode == 1
    assert "its forward takes (scalar, tensor), ModelNew.forward takes (tensor, scalar)" in (
        result.stderr
    )


def test_prints_in_the_problem_never_reach_json_output(tmp_path):
    noisy = relu_problem(
        tmp_path,
        "def get_inputs():\n",
        "print('hello from the module')\n\n\ndef get_inputs():\n    print('hello')\n",
    )
    result = ptodsl("check", RELU_SPEC, "--against", noisy, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["golden"].startswith(f"problem {noisy}")
    assert report["bound_rule"] and report["plan"] == "default plan"


def test_coverage_keeps_the_table_and_reports_every_file(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    relu_problem(problems)
    relu_problem(problems, *EXIT_AT_IMPORT, name="19_relu_again.py")
    relu_problem(problems, "return torch.relu(x)", "return [x]", name="20_leaky.py")
    relu_problem(problems, *EXIT_IN_INPUTS, name="21_sigmoid.py")
    result = ptodsl("coverage", problems, "--specs", SPECS, "--only", 19, 20, 21)
    assert result.returncode == 1, result.stderr
    rows = [
        line for line in result.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    verdicts = {line.split("|")[2].strip(): line.split("|")[4].strip() for line in rows[1:]}
    assert verdicts["19_relu.py (number shared with 19_relu_again.py)"] == "PASS"
    assert "called sys.exit(0)" in verdicts["19_relu_again.py (number shared with 19_relu.py)"]
    assert "Model.forward returned a list" in verdicts["20_leaky.py"]
    assert "get_inputs() called sys.exit(0)" in verdicts["21_sigmoid.py"]
    assert "1 of 4 problems pass." in result.stdout


def test_dim_rescales_the_problem_and_says_so(tmp_path):
    problem = relu_problem(tmp_path)
    result = ptodsl("check", RELU_SPEC, "--against", problem, "--dim", "dim=512", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["scaled"] == ["dim = 16384 -> 512"]
    assert report["outputs"][0]["shape"] == [16, 512]
    text = ptodsl("check", RELU_SPEC, "--against", problem, "--dim", "dim=512").stdout
    assert "ran scaled: dim = 16384 -> 512" in text


def test_dims_of_one_size_resized_differently_are_refused(tmp_path):
    spec = tmp_path / "square.pto"
    spec.write_text(
        "kernel square\ndims M = 64, N = 64\ninput x: f32[M, N]\noutput y: f32[M, N]\n"
        "y = relu(x)\n",
        encoding="utf-8",
    )
    problem = relu_problem(tmp_path)
    result = ptodsl("check", spec, "--against", problem, "--dim", "M=8", "--dim", "N=16")
    assert result.returncode == 1
    assert "--dim resizes two dims of size 64 differently" in result.stderr
