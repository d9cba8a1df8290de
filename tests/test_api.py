"""`ptodsl.compile` as Python code calls it: a path or the text, and arguments checked
before anything is built (a float or bool dim once gave a module with float shapes)."""

from __future__ import annotations

import pytest
from conftest import ROOT

import ptodsl

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
