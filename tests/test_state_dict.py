"""ModelNew's state_dict is the Model's: the same names, shapes and dtypes, parameters and
buffers, so that each loads the other's strictly; `check --against` verifies it, and
rejects a spec whose state would differ (a renamed weight, a module of another kind, a
norm without its running statistics)."""

from __future__ import annotations

import attrs
import pytest
import torch
from conftest import ROOT

import ptodsl
from ptodsl.checking.check import _check_state, run_check
from ptodsl.checking.coverage import by_number
from ptodsl.checking.problems import DropIn, ProblemError, ProblemRun
from ptodsl.frontend.diagnostics import Source
from ptodsl.frontend.parser import parse
from ptodsl.frontend.typecheck import typecheck
from ptodsl.ir import modules
from ptodsl.pipeline import lower
from ptodsl.runtime.files import import_file

LEVELS = {
    "kernelbench": ("tests/problems/kernelbench", "examples/kernelbench"),
    "kernelbench-level2": ("tests/problems/kernelbench-level2", "examples/kernelbench-level2"),
    "fused": ("tests/problems/fused", "examples/fused"),
    "kernelbench-level3": ("tests/problems/kernelbench-level3", "examples/kernelbench-level3"),
}


def _pairs() -> list[tuple[str, object, object]]:
    pairs = []
    for level, (problems, specs) in LEVELS.items():
        spec_by_number = by_number((ROOT / specs).glob("*.pto"))
        for number, (problem,) in sorted(by_number((ROOT / problems).glob("*.py")).items()):
            pairs.append((f"{level}/{number}", problem, spec_by_number[number][0]))
    return pairs


PAIRS = _pairs()


def _model_state(problem) -> dict[str, tuple[tuple[int, ...], str]]:
    """The problem's Model's state_dict, built on torch's meta device (no memory, no
    draws): the names, shapes and dtypes alone."""
    module = import_file(problem, f"state_{problem.stem}")
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
    return {
        name: (tuple(value.shape), str(value.dtype).removeprefix("torch."))
        for name, value in model.state_dict().items()
    }


def test_every_problem_is_paired():
    fused = len(list((ROOT / "tests/problems/fused").glob("*.py")))
    level3 = len(list((ROOT / "tests/problems/kernelbench-level3").glob("*.py")))
    assert fused >= 12 and level3 >= 5 and len(PAIRS) == 100 + 100 + fused + level3


@pytest.mark.parametrize(("pair", "problem", "spec"), PAIRS, ids=[p[0] for p in PAIRS])
def test_model_news_state_is_the_models(pair, problem, spec):
    """Every level-1, level-2 and fused spec declares the Model's state under its names: the
    running statistics of BatchNorm, `bn.weight` rather than `weight`, level 2 #68's
    `constant` rather than a renamed weight."""
    checked = lower(Source(spec.read_text(encoding="utf-8"), spec.name), until="check").checked
    ours = [(e.name, e.shape, e.dtype) for e in modules.state_entries(checked)]
    # in the Model's order too: a module tree's state is listed depth first
    assert ours == [(name, *entry) for name, entry in _model_state(problem).items()]


def test_a_generated_model_new_loads_the_models_state_dict_strictly_both_ways():
    """The state the spec declares is what the generated module builds: a BatchNorm2d's
    buffers, a GroupNorm's and a Linear's parameters, a weight under a param's name."""
    spec = (
        "kernel stateful\ndims N = 2, C = 4, H = 3, W = 5\nparam constant: f32 = 2.0\n"
        "input x: f32[N, C, H, W]\nweight constant: f32 = constant\n"
        "weight bn: batch_norm2d(C)\nweight gn: group_norm(2, C)\n"
        "weight plain: batch_norm1d(C, affine=false)\nweight inorm: instance_norm2d(C)\n"
        "weight tracked: instance_norm3d(C, affine=true, track_running_stats=true)\n"
        "weight ln: layer_norm([C, H, W])\noutput y: f32[N, C, H, W]\n"
        "y = x * bn.weight.reshape(C, 1, 1) + gn.bias.reshape(C, 1, 1) + constant * ln.weight\n"
    )
    compiled = ptodsl.compile(spec)
    model = torch.nn.Module()
    model.constant = torch.nn.Parameter(torch.tensor(3.0))
    model.bn, model.gn = torch.nn.BatchNorm2d(4), torch.nn.GroupNorm(2, 4)
    model.plain = torch.nn.BatchNorm1d(4, affine=False)
    model.inorm = torch.nn.InstanceNorm2d(4)  # no state at all
    model.tracked = torch.nn.InstanceNorm3d(4, affine=True, track_running_stats=True)
    model.ln = torch.nn.LayerNorm([4, 3, 5])
    model.bn.running_mean.fill_(0.5)
    # a LayerNorm's shape names the dims it is given, so its weight aligns with x's axes
    assert compiled.lowered.checked.input("ln_weight").dims == ("C", "H", "W")
    built = compiled.ModelNew(constant=3.0)
    assert list(built.state_dict()) == list(model.state_dict())
    built.load_state_dict(model.state_dict(), strict=True)
    assert torch.equal(built.bn.running_mean, torch.full((4,), 0.5))
    model.load_state_dict(built.state_dict(), strict=True)


@pytest.mark.parametrize(
    ("replacements", "message"),
    [
        # the weight of the Model's `constant` renamed
        (
            [
                ("weight constant: f32 = constant", "weight constant_w: f32 = constant"),
                ("linear(x), constant) - constant", "linear(x), constant_w) - constant_w"),
            ],
            "the Model has `constant` float32 [], ModelNew does not; ModelNew has "
            "`constant_w` float32 [], the Model does not",
        ),
        # the Model's Linear declared as weights of the spec's own, in torch's order
        (
            [
                ("weight linear: linear(in_features, out_features)\n", ""),
                (
                    "weight constant: f32 = constant",
                    "weight constant: f32 = constant\nweight linear_weight: f32[N, K] = "
                    "randn\nweight linear_bias: f32[N] = randn",
                ),
                ("min(linear(x)", "min(x @ linear_weight.T + linear_bias"),
            ],
            "the Model has `linear.weight` float32 [5, 10], `linear.bias` float32 [5], "
            "ModelNew does not",
        ),
    ],
)
def test_check_against_rejects_a_state_dict_the_models_would_not_load(replacements, message):
    """A spec with the Model's numbers but another state_dict fails `check --against`,
    saying which entries differ (level 2 #68 and mutants of it)."""
    problem = ROOT / "tests/problems/kernelbench-level2/68_Matmul_Min_Subtract.py"
    mutated = (ROOT / "examples/kernelbench-level2/68_Matmul_Min_Subtract.pto").read_text()
    for old, new in replacements:
        assert old in mutated
        mutated = mutated.replace(old, new)
    with pytest.raises(ProblemError, match="state_dict differs") as raised:
        run_check(ptodsl.compile(mutated, name="68.pto"), against=problem)
    assert message in str(raised.value)


def test_check_reports_a_drop_in_that_does_not_load_the_models_state():
    """What decides is torch's own strict load, which the problem worker tries both ways
    on the built ModelNew: its failure is the check's, even where the declared state
    matched."""
    checked = typecheck(parse((ROOT / "examples/kernelbench/33_batch_norm.pto").read_text()), None)
    state = [modules.StateEntry(e.name, e.shape, e.dtype) for e in modules.state_entries(checked)]
    run = ProblemRun(init_values=[64], inputs=[], parameters=[], expected=None, scaled=[])
    _check_state(checked, attrs.evolve(run, state=state), "problem p")  # matches
    failed = DropIn([], loads=["ModelNew.load_state_dict(...): Missing key(s)"])
    with pytest.raises(ProblemError, match="Missing key"):
        _check_state(checked, attrs.evolve(run, state=state, drop_in=failed), "problem p")
    with pytest.raises(ProblemError, match="`bn.num_batches_tracked` int64 \\[\\]"):
        _check_state(checked, attrs.evolve(run, state=state[:-1]), "problem p")


def test_level_2_68s_constant_follows_the_value_passed():
    """`nn.Parameter(torch.tensor(constant))`: ModelNew starts the weight at the value it is
    built with, as the Model does, under the same name."""
    stem = "68_Matmul_Min_Subtract"
    compiled = ptodsl.compile((ROOT / f"examples/kernelbench-level2/{stem}.pto").read_text())
    problem = import_file(ROOT / f"tests/problems/kernelbench-level2/{stem}.py", "state_68")
    torch.manual_seed(3)
    model = problem.Model(10, 5, -1.25)
    torch.manual_seed(3)
    built = compiled.ModelNew(10, 5, -1.25)
    assert built.constant.item() == -1.25 and built.constant.shape == ()
    for name, value in model.state_dict().items():
        assert torch.equal(built.state_dict()[name], value), name
