"""The interpreter behind a generated `ModelNew.forward` without an NPU.

pypto's SIM run mode models a kernel's cost and never writes its outputs, so a generated
forward run there would return whatever memory `torch.empty` gave it. Each of its kernel
launches comes here instead (`_launch` in the generated module): the module's own text runs
in a worker process (`ptodsl.simulator.run_kernel`), where pypto's calculator executes the
kernel's tensor graph on the real inputs, as `ptodsl check` does, and the values are copied
into the caller's output buffers. The worker keeps pypto's output folder, logs, profile and
plotting scripts in a temporary folder of its own: nothing reaches the caller's terminal or
working directory.

Environment: `PTODSL_SIM=cost` runs pypto's cost model only, and the launch raises
`CostOnly` with the simulated time instead of returning unwritten outputs;
`PTODSL_TRACE=DIR` keeps each launch's cost-model output (swim lanes, Perfetto trace) in
DIR/launch_<n>; `PTODSL_LAUNCH_TIMEOUT` limits each launch's worker (seconds; `ptodsl check`
sets it when it runs one worker per launch).
"""

from __future__ import annotations

import linecache
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ptodsl.simulator import run_kernel
from ptodsl.workers import DEFAULT_TIMEOUT_S

MODES = {"interpret": "graph", "cost": "none"}  # PTODSL_SIM -> pypto verification level


class CostOnly(RuntimeError):
    """PTODSL_SIM=cost: the kernel ran in pypto's cost model, which writes no outputs."""


def launch(
    module_file: str,
    factory: str,
    arguments: Sequence[Any],
    tensors: Sequence[torch.Tensor],
    outputs: int,
) -> float:
    """Interpret `factory(*arguments)(*tensors)` from the generated module registered under
    `module_file` (a file, or the name a KernelBench answer gives linecache); writes the last
    `outputs` tensors and returns the launch's simulated time in microseconds."""
    mode = os.environ.get("PTODSL_SIM", "interpret")
    if mode not in MODES:
        raise ValueError(
            f"PTODSL_SIM={mode!r}: unset it (or `interpret`) for computed outputs, `cost` for "
            "the cost model alone"
        )
    source = "".join(linecache.getlines(module_file))
    if not source:
        raise RuntimeError(
            f"the generated module's text is not readable from {module_file!r}: import the "
            "module's file, or exec the `--emit kernelbench` answer, which registers its text"
        )
    trace = os.environ.get("PTODSL_TRACE")
    with tempfile.TemporaryDirectory(prefix="ptodsl-interpret-") as folder:
        module_path = Path(folder) / f"{factory}.py"
        module_path.write_text(source, encoding="utf-8")
        run = run_kernel(
            module_path,
            factory,
            arguments,
            tensors,
            outputs,
            verify=MODES[mode],
            timeout=float(os.environ.get("PTODSL_LAUNCH_TIMEOUT", DEFAULT_TIMEOUT_S)),
            trace_dir=Path(trace) if trace else None,
        )
    if mode == "cost":
        raise CostOnly(
            f"PTODSL_SIM=cost: pypto's cost model ran the kernel ({run.sim_time_us:.2f} us "
            "simulated) and writes no outputs; unset PTODSL_SIM for the interpreter's values"
        )
    for buffer, value in zip(tensors[-outputs:], run.outputs, strict=True):
        buffer.copy_(value)
    return run.sim_time_us
