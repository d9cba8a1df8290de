"""Speed of ptodsl's kernels against hand-written PyPTO baselines, in pypto's cost model.

    python -m benchmarks.run [EXAMPLE ...] [--budget N]

One row per example (all of examples/ and examples/kernelbench/ by default), at full shape:
- compile: median wall time of `ptodsl.compile` (parse to source, warm, default plan);
- baseline / default / tuned: simulated AICore end-to-end time of the hand-written module in
  benchmarks/baselines/<kernel>.py, of ptodsl's default plan, and of the plan `ptodsl tune`
  picks within the budget (the winner passes `ptodsl check`; the user's tuning cache is left
  alone);
- roofline: bytes the kernel must move (inputs, weights and outputs once) per simulated
  second of the tuned plan, as a fraction of the simulated platform's DDR bandwidth
  (ddr_rate bytes/cycle per AI core x AI cores x clock, from pypto's platform config).
Prints a Markdown table. A full run takes about an hour on 2 cores.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path

import ptodsl
from benchmarks import CI_DIMS, EXAMPLES
from ptodsl.diagnostics import Source
from ptodsl.pipeline import Lowered, lower
from ptodsl.simulator import SimulationError
from ptodsl.tables import markdown_table
from ptodsl.tuning import Cost, probe_cost, tune

BASELINES = Path(__file__).resolve().parent / "baselines"
COMPILE_REPEATS = 21


def platform_bandwidth_bytes_per_s() -> tuple[float, str]:
    """Peak DDR bandwidth of the platform pypto simulates, and where the numbers came from."""
    spec = importlib.util.find_spec("pypto")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "lib" / "configs" / "A2A3.ini"
    config = configparser.ConfigParser()
    config.read(path)
    rate = int(config["AICoreMemoryRates"]["ddr_rate"])  # bytes per cycle per AI core
    cores = int(config["SoCInfo"]["ai_core_cnt"])
    clock_hz = int(config["AICoreSpec"]["cube_freq"]) * 1e6
    source = f"{path.name}: ddr_rate {rate} B/cycle x {cores} AI cores x {clock_hz / 1e6:g} MHz"
    return rate * cores * clock_hz, source


def compile_latency_ms(text: str, name: str) -> float:
    ptodsl.compile(text, name=name, tuning=None)  # warm: grammar, imports
    times = []
    for _ in range(COMPILE_REPEATS):
        started = time.perf_counter()
        ptodsl.compile(text, name=name, tuning=None)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def baseline_cost(lowered: Lowered) -> Cost | str:
    """The hand-written module for this kernel, driven like ptodsl's own `ModelNew`, or why
    it has no time."""
    path = BASELINES / f"{lowered.checked.name}.py"
    if not path.exists():
        return "no baseline"
    try:
        return probe_cost(lowered, module_path=path)
    except SimulationError as error:
        reason = str(error).splitlines()[0].removeprefix(f"simulating {path.name} failed: ")
        return "baseline failed: " + (reason if len(reason) <= 60 else reason[:57] + "...")


def moved_bytes(lowered: Lowered) -> int:
    checked = lowered.checked
    tensors = (*checked.inputs, *checked.outputs)
    return sum(math.prod(t.declared_shape) * t.type.dtype.itemsize for t in tensors)


def measure(path: Path, budget: int, bandwidth: float) -> tuple[str, ...]:
    """One row. A baseline that fails at full shape (the rule book's norm tiles hit pypto
    0.2.0's UB-spill bug in SIM) is compared at the scaled-down CI dims instead."""
    text = path.read_text(encoding="utf-8")
    latency = compile_latency_ms(text, path.name)
    dims = None
    source = Source(text, path.name)
    default = lower(source)
    baseline = baseline_cost(default)
    note = ""
    if isinstance(baseline, str) and path.stem in CI_DIMS:
        dims = CI_DIMS[path.stem]
        note = f"at {', '.join(f'{k}={v}' for k, v in dims.items())} ({baseline} at full shape)"
        default = lower(source, dims)
        baseline = baseline_cost(default)
    if isinstance(baseline, str):
        note, baseline = baseline, None
    default_cost = probe_cost(default)
    tuned = tune(source, dims, budget=budget, store=False).best  # the user's cache stays
    assert tuned.cost is not None
    tuned_us = tuned.cost.sim_time_us
    roofline = moved_bytes(default) / (tuned_us * 1e-6) / bandwidth

    def ratio(value: float) -> str:
        return f"{value / baseline.sim_time_us:.2f}" if baseline else ""

    return (
        path.stem,
        f"{latency:.1f}",
        f"{baseline.sim_time_us:.2f}" if baseline else "",
        f"{default_cost.sim_time_us:.2f}",
        f"{tuned_us:.2f}",
        ratio(default_cost.sim_time_us),
        ratio(tuned_us),
        f"{roofline:.0%}",
        tuned.plan.tuning.describe(),
        note,
    )


HEADER = (
    "example",
    "compile ms",
    "baseline us",
    "default us",
    "tuned us",
    "default/baseline",
    "tuned/baseline",
    "roofline (tuned)",
    "tuned plan",
    "note",
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("examples", nargs="*", help="example names (file stems); default all")
    parser.add_argument("--budget", type=int, default=6, help="plans tuned per example")
    args = parser.parse_args(argv)
    by_stem = {p.stem: p for p in EXAMPLES}
    unknown = [name for name in args.examples if name not in by_stem]
    if unknown:
        parser.error(f"unknown examples: {', '.join(unknown)}")
    bandwidth, bandwidth_source = platform_bandwidth_bytes_per_s()
    rows = [HEADER]
    for name in args.examples or sorted(by_stem):
        rows.append(measure(by_stem[name], args.budget, bandwidth))
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(markdown_table(HEADER, rows[1:]), end="")
    print(f"\nDDR bandwidth {bandwidth / 1e12:.2f} TB/s ({bandwidth_source}).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
