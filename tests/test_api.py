"""`ptodsl.compile` as Python code calls it: a path or the text, and arguments checked
before anything is built (a float or bool dim once gave a module with float shapes)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import ptodsl
from ptodsl.checking.check import run_check

RELU = ROOT / "examples" / "kernelbench" / "19_relu.pto"


def test_compile_takes_a_path_and_names_diagnostics_after_it(tmp_path):
    assert ptodsl.compile(RELU).source == ptodsl.compile(RELU.read_text(), "19_relu.pto").source
    bad = tmp_path / "bad.pto"
    bad.write_text("kernel bad\n")
    with pytest.raises(ptodsl.SpecError, match=f"^{bad}:1:8: error: kernel `bad` has no output"):
        ptodsl.compile(bad)


@pytest.mark.parametrize("size", [64.5, True, "64", None])
def test_a_dim_is_an_int(size):
    with pytest.raises(TypeError, match=r"dims\['dim'\] must be an int"):
        ptodsl.compile(RELU, dims={"dim": size})


@pytest.mark.parametrize("tuning", ["none", 0, {"tile_elements": 4096}])
def test_tuning_is_cached_none_or_plan_choices(tuning):
    with pytest.raises(TypeError, match="tuning must be 'cached', None or an ir.Tuning"):
        ptodsl.compile(RELU, tuning=tuning)


def test_text_is_a_string_or_a_path():
    with pytest.raises(TypeError, match="not bytes"):
        ptodsl.compile(RELU.read_bytes())


def test_a_scalar_sigmoid_of_a_large_negative_param_does_not_overflow():
    """The factory computes param arithmetic in Python: `1 / (1 + exp(1000))` raised
    OverflowError (exit 3); the spelling now takes exp of non-positive numbers only."""
    text = """kernel squashed
dims N = 64
param a: f32 = -1000
param b: f32 = 1000
input x: f32[N, N]
output y: f32[N, N]
y = x * sigmoid(a) + sigmoid(b) * x
"""
    report = run_check(ptodsl.compile(text, "squashed.pto"))
    assert report.ok, report.to_json()


def test_forward_checks_its_arguments_under_python_O(tmp_path):
    """The generated contract checks raise, so `python -O` (which drops asserts) keeps them."""
    module = tmp_path / "relu_kernel.py"
    module.write_text(ptodsl.compile(RELU).source)
    script = (
        "import torch, relu_kernel\n"
        "model = relu_kernel.ModelNew()\n"
        "wrong_dtype = torch.zeros(16, 16384, dtype=torch.int32)\n"
        "for bad in (torch.zeros(3), torch.zeros(16, 8), wrong_dtype):\n"
        "    try:\n"
        "        model(bad)\n"
        "    except (ValueError, TypeError) as error:\n"
        "        print(type(error).__name__, error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", script], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ValueError x: expected rank 2, got 1",
        "ValueError x: expected shape (16, 16384), got (16, 8)",
        "TypeError x: expected torch.float32, got torch.int32",
    ]


def test_compiled_says_what_it_is():
    text = repr(ptodsl.compile(RELU))
    assert (
        text.startswith("<Compiled 'relu' from ") and "19_relu.pto: default plan, 1 launch>" in text
    )
    conv = ROOT / "examples" / "kernelbench" / "80_conv2d_asymmetric_kernel_dilated_padded.pto"
    assert repr(ptodsl.compile(conv)).endswith("8 launches, each after 1 staging launch>")


def test_help_shows_a_short_signature():
    """`help(ptodsl.compile)` once printed the whole default target (45 form strings)."""
    import pydoc

    signature = pydoc.render_doc(ptodsl.compile, renderer=pydoc.plaintext).splitlines()[2]
    assert len(signature) < 250 and "target: 'Target | None' = None" in signature


def test_the_package_is_typed():
    from importlib.resources import files

    assert files("ptodsl").joinpath("py.typed").is_file()


def test_check_and_tune_are_public_functions(tmp_path, monkeypatch):
    compiled = ptodsl.compile(RELU, dims={"batch_size": 2, "dim": 64})
    report = ptodsl.check(compiled, seed=3)
    assert report.ok and report.seed == 3 and report.sim_time_us > 0
    monkeypatch.setenv("PTODSL_TUNING_DIR", str(tmp_path))
    result = ptodsl.tune(RELU, dims={"batch_size": 2, "dim": 64}, budget=1, check=False)
    assert len(result.measured) == 1 and result.measured[0].cost.sim_time_us > 0


def test_pi_is_a_constant_a_spec_may_shadow():
    spec = "kernel k\ndims N = 64\ninput x: f32[N]\n{}output y: f32[N]\ny = x * pi\n"
    compiled = ptodsl.compile(spec.format(""))
    assert "3.141592653589793" in compiled.source
    assert "3.141592653589793" in compiled.reference_source
    shadowed = ptodsl.compile(spec.format("param pi: f32 = 3.0\n"))
    assert "3.141592653589793" not in shadowed.source
