"""ptodsl.runtime.simulator against the real pypto SIM mode (no mocks).

Each simulated run costs about 2 s. The first verifying run on a machine also builds
pypto's calculator (30-45 s); later runs load it from the cache.
"""

import json
import tempfile

import pytest
import torch

from ptodsl.runtime import simulator
from ptodsl.runtime.simulator import SimulationError, run_model

ROWS, COLS = 16, 64
ALPHA = 0.5
ELU = "pypto.maximum(x, 0.0) + (pypto.exp(pypto.minimum(x, 0.0)) - 1.0) * alpha"
GOOD_TILE = f"pypto.set_vec_tile_shapes(8, {COLS})"

MODULE_TEMPLATE = """\
import functools

import pypto
import torch


@functools.lru_cache(maxsize=None)
def make_elu_kernel(rows, cols, alpha):
    @pypto.frontend.jit(runtime_options={{"run_mode": pypto.RunMode.SIM}})
    def elu_kernel(
        x: pypto.Tensor((rows, cols), pypto.DT_FP32),
        y: pypto.Tensor((rows, cols), pypto.DT_FP32),
    ):
        {tile}
        y[:] = {body}

    return elu_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, scale=1.0):
        {before_kernel}
        y = torch.empty_like(x)
        make_elu_kernel(x.shape[0], x.shape[1], self.alpha * scale)(x, y)
        return y
"""


def write_module(directory, name, *, tile=GOOD_TILE, body=ELU, before_kernel="pass"):
    path = directory / f"{name}.py"
    path.write_text(MODULE_TEMPLATE.format(tile=tile, body=body, before_kernel=before_kernel))
    return path


@pytest.fixture
def modules(tmp_path):
    directory = tmp_path / "modules"
    directory.mkdir()
    return directory


@pytest.fixture
def clean_dirs(tmp_path, monkeypatch):
    """Run in an empty cwd and temp dir and check that both are still empty afterwards."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.delenv("PTODSL_KEEP_SIM_DIR", raising=False)
    yield
    assert list(cwd.iterdir()) == []
    assert list(tmp.iterdir()) == []


@pytest.fixture
def x():
    return torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(0))


def expected_elu(x, alpha=ALPHA):
    return torch.where(x > 0, x, alpha * (torch.exp(x) - 1.0))


def test_graph_run_computes_the_kernel_and_its_cost(modules, clean_dirs, x):
    original = x.clone()
    run = run_model(write_module(modules, "elu"), {"alpha": ALPHA}, [x])

    assert run.verify == "graph"
    assert len(run.outputs) == 1
    torch.testing.assert_close(run.outputs[0], expected_elu(x), rtol=1e-5, atol=1e-6)
    assert torch.equal(x, original)
    assert run.sim_time_us > 0
    assert run.total_cycles > 0
    assert run.pass_results == ()  # no goldens and no later passes: nothing to compare


def test_cost_only_run_reports_the_same_time_without_numbers(modules, clean_dirs, x):
    module = write_module(modules, "elu")
    graph = run_model(module, {"alpha": ALPHA}, [x], verify="graph")
    cost_only = run_model(module, {"alpha": ALPHA}, [x], verify="none")

    assert cost_only.outputs == []
    assert cost_only.sim_time_us == graph.sim_time_us
    assert cost_only.total_cycles == graph.total_cycles


def test_verify_all_compares_every_pass_with_the_goldens(modules, clean_dirs, x):
    golden = expected_elu(x)
    run = run_model(
        write_module(modules, "elu"), {"alpha": ALPHA}, [x], goldens=[golden], verify="all"
    )

    torch.testing.assert_close(run.outputs[0], golden, rtol=1e-5, atol=1e-6)
    names = [result.pass_name for result in run.pass_results]
    assert names[0] == "tensor_graph"  # the golden comparison
    assert any(name.startswith("Pass_") for name in names[1:])
    assert all(result.verdict == "PASS" for result in run.pass_results)
    assert all(result.max_abs_diff < 1e-3 for result in run.pass_results)


def test_wrong_goldens_show_up_as_a_failed_pass(modules, clean_dirs, x):
    wrong = expected_elu(x) + 1.0
    run = run_model(write_module(modules, "elu"), {"alpha": ALPHA}, [x], goldens=[wrong])

    ((result),) = run.pass_results
    assert (result.pass_name, result.verdict, result.dtype) == ("tensor_graph", "FAILED", "DT_FP32")
    assert result.max_abs_diff == pytest.approx(1.0)


def test_wrong_tile_rank_gives_the_compiler_reason(modules, clean_dirs, x):
    module = write_module(modules, "rank_bug", tile=f"pypto.set_vec_tile_shapes({COLS})")
    with pytest.raises(SimulationError) as failure:
        run_model(module, {}, [x])

    message = str(failure.value)
    assert message.startswith("simulating rank_bug.py failed")
    assert "Run pass failed" in message
    assert "Tile shape size 1 is not matched the output shape size 2" in message
    assert "[0x" not in message  # no C++ backtrace
    assert len(message.splitlines()) < 10


def test_kernel_that_raises_points_at_its_line(modules, clean_dirs, x):
    module = write_module(modules, "raises", body="pypto.tanh(x)")
    with pytest.raises(SimulationError) as failure:
        run_model(module, {}, [x])

    line = module.read_text().splitlines().index("        y[:] = pypto.tanh(x)") + 1
    message = str(failure.value)
    assert "has no attribute 'tanh'" in message
    assert f"at raises.py:{line}" in message


@pytest.mark.parametrize(
    ("before_kernel", "timeout", "expected"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 120, "crashed with SIGSEGV"),
        ("import time; time.sleep(120)", 2, "did not finish within 2 s"),
    ],
    ids=["segfault", "hang"],
)
def test_dead_worker_is_a_simulation_error(
    modules, clean_dirs, x, before_kernel, timeout, expected
):
    module = write_module(modules, "dies", before_kernel=before_kernel)
    with pytest.raises(SimulationError, match=expected):
        run_model(module, {}, [x], timeout=timeout)


def test_keep_sim_dir_keeps_the_files_and_says_where(modules, tmp_path, monkeypatch, capsys, x):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("PTODSL_KEEP_SIM_DIR", "1")
    module = write_module(modules, "dies", before_kernel="raise ValueError('no kernel today')")
    with pytest.raises(SimulationError, match="ValueError: no kernel today"):
        run_model(module, {}, [x])

    (kept,) = tmp_path.glob("ptodsl-sim-*")
    assert str(kept) in capsys.readouterr().err
    assert "no kernel today" in (kept / "worker.log").read_text()


def test_unknown_verify_level_is_rejected(modules):
    with pytest.raises(ValueError, match="verify must be one of"):
        run_model(modules / "unused.py", {}, [], verify="most")


def test_aicore_time_spans_ai_core_tasks_only(tmp_path):
    swim = [
        {"coreType": "AIC", "tasks": [{"execStart": 1800, "execEnd": 3600}]},
        {"coreType": "AIV", "tasks": [{"execStart": 3600, "execEnd": 9000}]},
        {"coreType": "HUB", "tasks": [{"execStart": 0, "execEnd": 99000}]},
    ]
    path = tmp_path / "_simulate.swim.json"
    path.write_text(json.dumps(swim))

    assert simulator.aicore_time_us(path) == pytest.approx((9000 - 1800) / 1800)


def test_platform_memory_rates_come_from_the_platform_file():
    rates = simulator.platform_memory_rates()

    assert (rates.cube_cores, rates.vector_cores) == (24, 48)
    assert rates.ddr_read > 0 and rates.ddr_write > 0 and rates.ub_to_ddr > 0
