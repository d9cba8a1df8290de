"""pypto 0.2.0's cost model charges a rank-1 tile's copy as one element whatever its size
(pypto-0.2.0.md, "Rank-1 flaw"). ptodsl never plans a rank-1 tile, so the cost it reports,
tunes on and benchmarks charges every copy by its bytes."""

from __future__ import annotations

import pytest

from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import verify
from ptodsl.ir.verify import VerifyError
from ptodsl.passes import merge_axes
from ptodsl.pipeline import lower
from ptodsl.tools.tuning import probe_cost

# The same 1 MiB of f32, declared 1-D and 2-D.
ONE_D = "kernel k\ndims N = 262144\ninput x: f32[N]\noutput y: f32[N]\ny = x + 1.0\n"
TWO_D = "kernel k\ndims R = 16, C = 16384\ninput x: f32[R, C]\noutput y: f32[R, C]\ny = x + 1.0\n"


def simulated_us(text: str) -> float:
    return probe_cost(lower(Source(text, "k.pto"))).sim_time_us


def test_a_1d_and_a_2d_kernel_of_the_same_bytes_cost_alike():
    one_d, two_d = simulated_us(ONE_D), simulated_us(TWO_D)
    assert one_d == pytest.approx(two_d, rel=0.05)


def test_a_flattened_plan_would_profit_from_the_flaw(monkeypatch):
    """Why the frame keeps two axes: merged to 1-D, the same kernel simulates faster. The
    verifier refuses such a plan; set aside, it shows what the plan would gain."""
    honest = simulated_us(TWO_D)
    monkeypatch.setattr(merge_axes, "at_least_two_axes", lambda groups, full, target: groups)
    with pytest.raises(VerifyError, match="rank-1 tile"):
        lower(Source(TWO_D, "k.pto"))
    monkeypatch.setattr(verify._Verifier, "phase", lambda self, number, phase: None)
    flattened = simulated_us(TWO_D)
    assert flattened < 0.85 * honest


def test_no_plan_has_a_rank_1_tile():
    for text in (ONE_D, TWO_D):
        (phase,) = lower(Source(text, "k.pto")).kernel.schedule.phases
        assert len(phase.tile) == 2


def test_the_probe_keeps_the_swim_lanes_it_measured(tmp_path):
    """benchmarks.schedule reads these: the kept lanes are the run that was costed."""
    from ptodsl.runtime.simulator import aicore_time_us

    cost = probe_cost(lower(Source(TWO_D, "k.pto")), trace_dir=tmp_path)
    (launch,) = tmp_path.iterdir()
    assert launch.name == "launch_0"
    assert aicore_time_us(launch / "_simulate.swim.json") == cost.sim_time_us
    assert (launch / "_simulate.config.ini").is_file()
    assert not (launch / "graphs").exists()
