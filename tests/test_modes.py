"""Train and eval modes as torch has them: `bn(x)` of a BatchNorm with running statistics
uses the batch's statistics and moves the running ones in training mode (momentum, the
unbiased variance, `num_batches_tracked`) and uses the running ones in eval mode; `dropout`
applies a mask drawn from torch's generator in training mode and is the identity in eval
mode. Generated ModelNews follow the torch Model through training, training and eval
forwards in pypto's simulator; `check --against` checks both modes and fails every wrong
kernel below; a spec that leaves the Model's running statistics behind is refused."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import CI_DIMS, CI_SCALED, EXAMPLES_DIR, ROOT, scaled_problem

import ptodsl
from ptodsl import SpecError
from ptodsl.checking.check import format_report, run_check
from ptodsl.checking.coverage import by_number
from ptodsl.checking.problems import ProblemError
from ptodsl.ir.forward import format_forward
from ptodsl.runtime.files import import_file

BN_SPEC = """kernel bn_relu
dims N = 16, C = 8, H = 6, W = 6
param channels: int = C
input x: f32[N, C, H, W]
weight bn: batch_norm2d(channels, eps=1e-3, momentum=0.25)
output y: f32[N, C, H, W]
y = relu(bn(x))
"""
BN_PROBLEM = """import torch


class Model(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(channels, eps=1e-3, momentum=0.25)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(16, 8, 6, 6) * 2 + 1]


def get_init_inputs():
    return [8]
"""
GEMM_BN_SPEC = """kernel gemm_bn
dims B = 32, K = 24, N = 16
input x: f32[B, K]
weight fc: linear(K, N)
weight bn: batch_norm1d(N)
output y: f32[B, N]
y = tanh(bn(fc(x)))
"""
GEMM_BN_PROBLEM = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(24, 16)
        self.bn = torch.nn.BatchNorm1d(16)

    def forward(self, x):
        return torch.tanh(self.bn(self.fc(x)))


def get_inputs():
    return [torch.randn(32, 24)]


def get_init_inputs():
    return []
"""
DROPOUT_SPEC = """kernel gemm_dropout
dims B = 16, K = 32, N = 24
param p: f32 = 0.3
input x: f32[B, K]
weight fc: linear(K, N)
output y: f32[B, N]
y = tanh(dropout(fc(x), p))
"""
DROPOUT_PROBLEM = """import torch


class Model(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.fc = torch.nn.Linear(32, 24)
        self.dropout = torch.nn.Dropout(p)

    def forward(self, x):
        return torch.tanh(self.dropout(self.fc(x)))


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [0.3]
"""
# torch's instance norm with running statistics: each sample's statistics, averaged over
# the batch into the running ones; no step counter
INORM_SPEC = """kernel inorm_sigmoid
dims N = 4, C = 6, L = 10
input x: f32[N, C, L]
weight inorm: instance_norm1d(C, momentum=0.2, affine=true, track_running_stats=true)
output y: f32[N, C, L]
y = sigmoid(inorm(x) * 2.0)
"""
INORM_PROBLEM = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inorm = torch.nn.InstanceNorm1d(6, momentum=0.2, affine=True, track_running_stats=True)

    def forward(self, x):
        return torch.sigmoid(self.inorm(x) * 2.0)


def get_inputs():
    return [torch.randn(4, 6, 10) * 3 - 1]


def get_init_inputs():
    return []
"""
CASES = {
    "batch_norm2d": (BN_SPEC, BN_PROBLEM),
    "instance_norm1d": (INORM_SPEC, INORM_PROBLEM),
    "linear_batch_norm1d": (GEMM_BN_SPEC, GEMM_BN_PROBLEM),
    "linear_dropout": (DROPOUT_SPEC, DROPOUT_PROBLEM),
}


def _problem(tmp_path, text: str):
    path = tmp_path / "problem.py"
    path.write_text(text, encoding="utf-8")
    return path


def follow_through_modes(compiled, problem, *, output_tolerance: float) -> None:
    """The answer file as a user drops it in: the Model and ModelNew built under one seed,
    random running statistics put into the Model and its whole state_dict loaded strictly
    into ModelNew; then training, training and eval forwards, each seeded alike (dropout
    draws from torch's generator). After each, the outputs agree within
    `output_tolerance` (relative and absolute) and every state entry agrees: floating ones
    to 1e-6 of their largest magnitude, the step counters exactly. The generated forward
    runs in pypto's simulator."""
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    model = problem.Model(*init)
    torch.manual_seed(0)
    model_new = compiled.ModelNew(*init)
    with torch.no_grad():
        for buffer in model.buffers():
            if buffer.is_floating_point():
                buffer.copy_(torch.rand(buffer.shape) + 0.5)
    model_new.load_state_dict(model.state_dict(), strict=True)
    for step, training in enumerate((True, True, False)):
        model.train(training)
        model_new.train(training)
        torch.manual_seed(10 + step)
        inputs = problem.get_inputs()
        with torch.no_grad():
            torch.manual_seed(100 + step)
            expected = model(*inputs)
            torch.manual_seed(100 + step)
            got = model_new(*inputs)
        where = f"{'training' if training else 'eval'} forward {step + 1}"
        torch.testing.assert_close(
            got, expected, rtol=output_tolerance, atol=output_tolerance, msg=_at(where)
        )
        state = model_new.state_dict()
        assert list(state) == list(model.state_dict()), where
        for name, value in model.state_dict().items():
            scale = value.abs().max().item() if value.is_floating_point() else 0
            torch.testing.assert_close(
                state[name], value, rtol=1e-6, atol=1e-6 * scale, msg=_at(f"{where}: {name}")
            )


def _at(where: str):
    """assert_close's message with where it failed put first (a string would replace it)."""
    return lambda message: f"{where}: {message}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_new_follows_the_model_through_training_training_and_eval(tmp_path, case):
    spec, problem_text = CASES[case]
    problem = import_file(_problem(tmp_path, problem_text), f"modes_{case}")
    follow_through_modes(ptodsl.compile(spec), problem, output_tolerance=1e-5)


def test_the_forward_program_has_a_program_per_mode():
    compiled = ptodsl.compile(BN_SPEC)
    text = format_forward(compiled.program)
    assert "forward bn_relu (training mode)" in text
    assert "update bn.running_mean = _update_bn_running_mean" in text
    assert "update bn.num_batches_tracked += 1" in text
    assert "forward bn_relu_eval (eval mode)" in text
    eval_program = compiled.program.eval
    assert eval_program is not None and not eval_program.updates
    assert [t.name for t in eval_program.spec.buffer_inputs] == [
        "bn_running_mean",
        "bn_running_var",
    ]
    dropout = ptodsl.compile(DROPOUT_SPEC)
    assert "draw _mask0: f32[16, 24]  # dropout mask (p = p)" in format_forward(dropout.program)
    assert not dropout.program.eval.spec.dropout_masks
    # a spec whose result ignores the mode keeps one program and one forward
    plain = ptodsl.compile(BN_SPEC.replace("momentum=0.25", "track_running_stats=false"))
    assert plain.program.eval is None and plain.lowered.checked.mode is None
    assert "_training_forward" not in plain.source


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_against_the_problem_passes_in_both_modes(tmp_path, case):
    """Training mode compares the running statistics forward updates as outputs; eval
    mode reads them. The JSON report nests eval mode's."""
    spec, problem_text = CASES[case]
    report = run_check(ptodsl.compile(spec), against=_problem(tmp_path, problem_text))
    assert report.verdict == "PASS", format_report(report)
    assert report.mode == "training" and report.eval_mode.mode == "eval"
    names = [o.name for o in report.outputs]
    if "bn" in spec:
        assert names == ["y", "_update_bn_running_mean", "_update_bn_running_var"]
        # a draw with a small running variance reaches eval mode's eps
        assert not any("bn(x)" in r for r in report.eval_mode.unreached)
    assert [o.name for o in report.eval_mode.outputs] == ["y"]
    assert report.to_json()["eval_mode"]["verdict"] == "PASS"
    assert "result: PASS (training mode and eval mode)" in format_report(report)


BN_MUTANTS = {
    "momentum of the running mean": (
        "bn_running_mean * 0.75 + _t2 * 0.25",
        "bn_running_mean * 0.8 + _t2 * 0.2",
        "training",
    ),
    "running variance biased": ("_t0 * 0.25043478260869567", "_t0 * 0.25", "training"),
    "running variance not copied back": (
        "        self.bn.running_var.copy_(_update_bn_running_var.reshape((8,)))\n",
        "",
        "training",
    ),
    "batch statistics in eval mode": ("if self.training:", "if True:", "eval"),
    "eval mode's eps dropped": ("rsqrt(bn_running_var + 0.001)", "rsqrt(bn_running_var)", "eval"),
    "running statistics swapped": (
        "(x - pypto.expand_clone(bn_running_mean, [16, 8, 1]))",
        "(x - pypto.expand_clone(bn_running_var, [16, 8, 1]))",
        "eval",
    ),
}
DROPOUT_MUTANTS = {
    "mask not rescaled": (
        "device).bernoulli_(1 - p).div_(1 - p)",
        "device).bernoulli_(1 - p)",
        "training",
    ),
    "keeps with probability p": (
        "device).bernoulli_(1 - p).div_(1 - p)",
        "device).bernoulli_(p).div_(p)",
        "training",
    ),
    "mask from another generator": (
        "device).bernoulli_(1 - p)",
        "device).bernoulli_(1 - p, generator=torch.Generator().manual_seed(7))",
        "training",
    ),
    "dropout left out in training mode": (
        "        if self.training:\n            return self._training_forward(x)\n",
        "",
        "training",
    ),
    "dropout in eval mode too": (
        "return self._eval_forward(x)",
        "return self._training_forward(x)",
        "eval",
    ),
}
# Each wrong module: the spec, its problem, and the name of its fault.
WRONG_MODES = pytest.mark.parametrize(
    ("spec", "problem", "mutant"),
    [(BN_SPEC, BN_PROBLEM, m) for m in BN_MUTANTS]
    + [(DROPOUT_SPEC, DROPOUT_PROBLEM, m) for m in DROPOUT_MUTANTS],
    ids=[*BN_MUTANTS, *DROPOUT_MUTANTS],
)


@WRONG_MODES
def test_check_rejects_a_wrong_mode(tmp_path, spec, problem, mutant):
    """Each module is the generated one with one fault; the mode it breaks fails."""
    old, new, mode = {**BN_MUTANTS, **DROPOUT_MUTANTS}[mutant]
    compiled = ptodsl.compile(spec)
    assert compiled.source.count(old) == 1, old
    path = tmp_path / "wrong.py"
    path.write_text(compiled.source.replace(old, new), encoding="utf-8")
    report = run_check(compiled, against=_problem(tmp_path, problem), kernel_path=path)
    assert report.verdict == "FAIL"
    failed = report if mode == "training" else report.eval_mode
    assert any(not o.ok for o in failed.outputs), format_report(report)


@WRONG_MODES
def test_the_answer_file_harness_rejects_a_wrong_mode(tmp_path, spec, problem, mutant):
    """The harness the examples pass fails each wrong answer file, at the forward whose
    mode the fault breaks."""
    old, new, mode = {**BN_MUTANTS, **DROPOUT_MUTANTS}[mutant]
    compiled = ptodsl.compile(spec)
    compiled.source = compiled.source.replace(old, new)
    module = import_file(_problem(tmp_path, problem), f"harness_{tmp_path.name}")
    with pytest.raises(AssertionError, match="training forward" if mode == "training" else "eval"):
        follow_through_modes(compiled, module, output_tolerance=1e-5)


def test_a_spec_that_leaves_the_running_statistics_behind_is_refused(tmp_path):
    """Batch statistics written out by hand compute training mode's output, but the
    Model's forward also moves its running statistics, which ModelNew's then never do:
    the check says so and what to write instead."""
    by_hand = BN_SPEC.replace(
        "y = relu(bn(x))",
        "let mu = mean(x, axis=[0, 2, 3], keepdim=true)\n"
        "let sigma2 = var(x, axis=[0, 2, 3], keepdim=true, correction=0)\n"
        "y = relu((x - mu) * rsqrt(sigma2 + 1e-3) * bn.weight.reshape(C, 1, 1)"
        " + bn.bias.reshape(C, 1, 1))",
    )
    compiled = ptodsl.compile(by_hand)
    assert compiled.lowered.checked.mode is None
    with pytest.raises(ProblemError, match="updates `bn.num_batches_tracked`, `bn.running_mean`"):
        run_check(compiled, against=_problem(tmp_path, BN_PROBLEM))


def test_a_spec_without_a_problem_checks_both_modes():
    """The spec's own torch reference draws the same masks and reads the same buffers."""
    report = run_check(ptodsl.compile(DROPOUT_SPEC))
    assert report.verdict == "PASS" and report.eval_mode.verdict == "PASS"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BN_SPEC.replace("batch_norm2d(channels, eps=1e-3, momentum=0.25)", "batch_norm2d(C)")
            .replace("dims N = 16", "dims N = 1")
            .replace("H = 6, W = 6", "H = 1, W = 1"),
            "`bn(x)` in training mode computes each statistic of 1 value",
        ),
        (
            BN_SPEC.replace("y = relu(bn(x))", "y = bn(relu(bn(x)))"),
            "`bn` is applied twice: in training mode each application moves its running",
        ),
        (
            DROPOUT_SPEC.replace("dropout(fc(x), p)", "dropout(fc(x), 1.5)"),
            "dropout probability 1.5 is not in [0, 1]",
        ),
        (
            DROPOUT_SPEC.replace("dropout(fc(x), p)", "dropout(fc(x), K)"),
            "dropout's p is a number or a float param of the constructor",
        ),
        (
            DROPOUT_SPEC.replace("dropout(fc(x), p)", "dropout(fc(x))"),
            "`dropout` takes a tensor and p",
        ),
    ],
)
def test_mode_dependent_spec_errors(text, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        ptodsl.compile(text)


def test_dropout_of_zero_is_the_identity_and_draws_nothing():
    compiled = ptodsl.compile(DROPOUT_SPEC.replace("dropout(fc(x), p)", "dropout(fc(x), 0.0)"))
    assert compiled.lowered.checked.mode is None and compiled.program.eval is None
    assert "_dropout_mask" not in compiled.source


def test_check_rejects_a_forward_that_does_not_count_its_steps(tmp_path):
    """`num_batches_tracked` is torch's code in forward, not a kernel output: the check
    compares ModelNew's counter after forward with the Model's."""
    compiled = ptodsl.compile(BN_SPEC)
    counted = "        self.bn.num_batches_tracked.add_(1)\n"
    assert compiled.source.count(counted) == 1
    path = tmp_path / "wrong.py"
    path.write_text(compiled.source.replace(counted, ""), encoding="utf-8")
    report = run_check(compiled, against=_problem(tmp_path, BN_PROBLEM), kernel_path=path)
    assert report.verdict == "FAIL"
    assert report.problems == (
        "ModelNew's `bn.num_batches_tracked` is 0 after forward; the problem's Model's is 1",
    )
    assert report.eval_mode.ok  # eval mode counts nothing on either side


# Issue 43's done-when: every example whose problem has a module that knows its mode (or a
# norm whose statistics it could track), its answer file followed through the modes. Fused
# #15 writes its group norm by hand, with views: no module, not listed.
MODE_MODULES = re.compile(
    r"BatchNorm|InstanceNorm|GroupNorm|Dropout|\b(batch|instance|group)_norm\(|dropout\("
)


def _examples_with_mode_modules() -> dict[str, tuple[Path, Path]]:
    pairs = {}
    for level in ("kernelbench", "kernelbench-level2", "kernelbench-level3", "fused"):
        problems = by_number((ROOT / "tests" / "problems" / level).glob("*.py"))
        for number, (spec,) in by_number((EXAMPLES_DIR / level).glob("*.pto")).items():
            (problem,) = problems[number]
            if MODE_MODULES.search(problem.read_text(encoding="utf-8")):
                pairs[f"{level}/{spec.stem}"] = (spec, problem)
    return pairs


EXAMPLES_WITH_MODE_MODULES = _examples_with_mode_modules()


def test_the_examples_with_mode_modules_are_found():
    """The list below is what the problem files hold (a broken pattern would shrink it)."""
    counts = Counter(name.partition("/")[0] for name in EXAMPLES_WITH_MODE_MODULES)
    levels = {"kernelbench": 3, "kernelbench-level2": 29, "kernelbench-level3": 3, "fused": 2}
    assert counts == levels


@pytest.mark.parametrize("example", sorted(EXAMPLES_WITH_MODE_MODULES))
def test_an_example_follows_its_problem_through_training_training_and_eval(example):
    """At the sizes CI checks it at (the problem's constants set as `scaled.toml` says)."""
    spec, problem_path = EXAMPLES_WITH_MODE_MODULES[example]
    if spec.stem in CI_SCALED:
        dims, problem = CI_DIMS[spec.stem], scaled_problem(problem_path, spec.stem)
    else:
        dims, problem = None, import_file(problem_path, f"modes_{spec.stem}")
    compiled = ptodsl.compile(spec, dims=dims, tuning=None)
    follow_through_modes(compiled, problem, output_tolerance=1e-4)
