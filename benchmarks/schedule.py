"""Where an example's simulated time goes: pypto's simulated schedule, per kernel launch.

    ptodsl bench schedule EXAMPLE [EXAMPLE ...] [--dim NAME=SIZE] [--tuned]

Runs each example's default plan (`--tuned`: the plan in the tuning cache) through the cost
probe, keeps the cost model's swim lanes and reads them back:

- tasks: the leaf tasks pypto's AICPU schedulers dispatched, and the tile copies into UB per
  task (pypto groups only tiles that share data into one task);
- task cycles: a task's mean span on its core (its copies, vector ops and copies out run
  one after another when it holds one tile);
- launch interval: mean cycles between consecutive task starts on the whole machine;
- cores busy: mean number of vector cores running a task, out of the 48 simulated;
- fed time: what the same tasks would take if every used core were kept busy (task cycles
  summed over the cores), against the simulated time: the difference is the scheduler's;
- pipe usage: pypto's own statistics (MTE_IN, vector, MTE_OUT busy share of the run);
- top ops: the vector operations that took the most cycles, when pypto wrote the per-pipe
  log (it does for small runs only).

The footer prints the AICPU scheduler's per-task charges from the run's config.
"""

from __future__ import annotations

import argparse
import collections
import configparser
import json
import re
import sys
import tempfile
from pathlib import Path

import attrs

from benchmarks import ROOT, spec_by_kernel
from ptodsl.api import lower_spec
from ptodsl.frontend.diagnostics import Source
from ptodsl.runtime.simulator import CYCLES_PER_US, SimulationError
from ptodsl.tools.tables import markdown_table
from ptodsl.tools.tuning import probe_cost

_USAGE = re.compile(r"^Average (MTE_IN|Vector|MTE_OUT) Usage\.*:\s*\S+\s+(\S+)%", re.MULTILINE)
_TASK = re.compile(r"(?:TASK|Task)\[(\d+)\]")
_AICPU_CHARGES = ("schedulerCycles", "resolveCycles", "completionCycles")


@attrs.frozen
class Schedule:
    """What one kernel launch's swim lanes say."""

    span_cycles: int
    tasks: int
    copies_in_per_task: float | None  # None without the per-pipe log
    task_cycles: float
    launch_interval: float
    cores_busy: float
    cores_used: int
    fed_cycles: float
    usage: dict[str, str]
    top_ops: list[tuple[str, int]]


def read_schedule(launch: Path) -> Schedule:
    cores = json.loads((launch / "_simulate.swim.json").read_text())
    # pypto logs zero- and one-cycle bookkeeping tasks; they do no work.
    spans = [
        (task["execStart"], task["execEnd"], core["blockIdx"], task["taskId"])
        for core in cores
        for task in core["tasks"]
        if task["execEnd"] > task["execStart"] + 1
    ]
    start = min(s for s, _, _, _ in spans)
    end = max(e for _, e, _, _ in spans)
    starts = sorted(s for s, _, _, _ in spans)
    busy = sum(e - s for s, e, _, _ in spans)
    cores_used = len({core for _, _, core, _ in spans})
    copies_in, top_ops = _pipe_log(launch / "_simulate.pipe.swim.json")
    usage = dict(_USAGE.findall((launch / "_simulate.stat.report.txt").read_text()))
    return Schedule(
        span_cycles=end - start,
        tasks=len(spans),
        copies_in_per_task=None if copies_in is None else copies_in / len(spans),
        task_cycles=busy / len(spans),
        launch_interval=(starts[-1] - starts[0]) / max(len(starts) - 1, 1),
        cores_busy=busy / (end - start),
        cores_used=cores_used,
        fed_cycles=busy / cores_used,
        usage=usage,
        top_ops=top_ops,
    )


def _pipe_log(path: Path) -> tuple[int | None, list[tuple[str, int]]]:
    if not path.is_file():
        return None, []
    copies_in = 0
    vector = collections.Counter()
    for core in json.loads(path.read_text()):
        for pipe, ops in core.get("pipeLogs", {}).items():
            for op in ops:
                if not _TASK.search(op["tileOp"]):
                    continue
                kind = op["tileOp"].split()[1]
                copies_in += kind == "COPY_IN"
                if pipe.startswith("VECTOR"):
                    vector[kind] += op["execEnd"] - op["execStart"]
    return copies_in, vector.most_common(3)


def aicpu_charges(launch: Path) -> str:
    config = configparser.ConfigParser()
    config.optionxform = str
    config.read(launch / "_simulate.config.ini")
    machines = config.get("Model", "aicpuMachineNumber", fallback="?")
    threads = config.get("AICPU", "threadsNum", fallback="?")
    charges = ", ".join(f"{key} {config.get('AICPU', key, fallback='?')}" for key in _AICPU_CHARGES)
    return f"{machines} AICPU schedulers x {threads} thread, per task: {charges}"


def _us(cycles: float) -> str:
    return f"{cycles / CYCLES_PER_US:.1f}"


def row(name: str, sim_us: float, launch: int, schedule: Schedule) -> list[str]:
    copies = schedule.copies_in_per_task
    return [
        name if launch == 0 else f"{name} (launch {launch})",
        f"{sim_us:.1f}",
        str(schedule.tasks),
        "" if copies is None else f"{copies:.1f}",
        f"{schedule.task_cycles:.0f}",
        f"{schedule.launch_interval:.0f}",
        f"{schedule.cores_busy:.1f} of {schedule.cores_used}",
        _us(schedule.fed_cycles),
        " / ".join(f"{schedule.usage.get(k, '?')}%" for k in ("MTE_IN", "Vector", "MTE_OUT")),
        ", ".join(f"{kind} {cycles // schedule.tasks}" for kind, cycles in schedule.top_ops),
    ]


HEADER = [
    "example",
    "sim us",
    "tasks",
    "copies in / task",
    "task cycles",
    "launch interval",
    "cores busy",
    "fed us",
    "MTE_IN / vector / MTE_OUT",
    "top vector ops (cycles per task)",
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ptodsl bench schedule", description=__doc__)
    parser.add_argument("examples", nargs="+", metavar="EXAMPLE", help="a kernel or spec name")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE")
    parser.add_argument("--tuned", action="store_true", help="the tuning cache's plan")
    args = parser.parse_args(argv)
    specs = spec_by_kernel() | {p.stem: p for p in spec_by_kernel().values()}
    dims = {name: int(size) for name, size in (d.split("=", 1) for d in args.dim)} or None
    rows, footer = [], ""
    for name in args.examples:
        path = specs.get(name) or Path(name)
        if not path.is_file():
            parser.error(f"no example {name!r} under {ROOT / 'examples'}")
        source = Source(path.read_text(encoding="utf-8"), str(path))
        lowered, _ = lower_spec(source, dims, tuning="cached" if args.tuned else None)
        with tempfile.TemporaryDirectory(prefix="ptodsl-schedule-") as scratch:
            try:
                cost = probe_cost(lowered, trace_dir=Path(scratch))
            except SimulationError as error:  # a failing example is a row, not a lost table
                rows.append([path.stem, f"failed: {str(error).splitlines()[0]}"])
                rows[-1] += [""] * (len(HEADER) - len(rows[-1]))
                continue
            launches = sorted(Path(scratch).glob("launch_*"), key=lambda p: int(p.name[7:]))
            for number, launch in enumerate(launches):
                rows.append(row(path.stem, cost.sim_time_us, number, read_schedule(launch)))
            footer = aicpu_charges(launches[0])
    print(markdown_table(HEADER, rows))
    if footer:
        print(f"\nSimulated machine: {footer}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
