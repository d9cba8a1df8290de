"""The interpreter behind a generated `ModelNew.forward` without an NPU.

pypto's SIM run mode models a kernel's cost and never writes its outputs, so a generated
forward run there would return whatever memory `torch.empty` gave it. Each of its kernel
launches comes here instead (`_launch` in the generated module): the module's own text runs
in a worker process (`ptodsl.runtime.simulator.prepare_kernel`), where pypto's calculator
executes the kernel's tensor graph on the real inputs, as `ptodsl check` does, and the values
are copied into the caller's output buffers. The worker keeps pypto's output folder, logs,
profile and plotting scripts in a temporary folder of its own: nothing reaches the caller's
terminal or working directory.

Environment: `PTODSL_SIM=cost` runs pypto's cost model only, and the launch raises
`CostOnly` with the simulated time instead of returning unwritten outputs;
`PTODSL_TRACE=DIR` keeps each launch's cost-model output (swim lanes, Perfetto trace) in
DIR/launch_<n>; `PTODSL_LAUNCH_TIMEOUT` limits each launch's worker (seconds; `ptodsl check`
sets it when it runs one worker per launch). `PTODSL_LAUNCHES_IN_FLIGHT=N` (`ptodsl check
--jobs` sets it there) lets up to N launches run at once, each in its own worker: a launch
returns as soon as its worker starts, after the launches still running that write what it
reads or writes have finished; `finish_launches()` waits for the rest (the check's worker
calls it after `forward`, which otherwise returns before its last outputs are written).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import linecache
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

import attrs
import torch

from ptodsl.runtime import settings
from ptodsl.runtime.executor import LocalExecutor, Task
from ptodsl.runtime.files import require_writable
from ptodsl.runtime.scratch import scratch_prefix
from ptodsl.runtime.simulator import PreparedRun, SimRun, prepare_kernel

MODES = {"interpret": "graph", "cost": "none"}  # PTODSL_SIM -> pypto verification level


class CostOnly(RuntimeError):
    """PTODSL_SIM=cost: the kernel ran in pypto's cost model, which writes no outputs."""


def launch(
    module_file: str,
    factory: str,
    arguments: Sequence[Any],
    tensors: Sequence[torch.Tensor],
    outputs: int,
) -> None:
    """Interpret `factory(*arguments)(*tensors)` from the generated module registered under
    `module_file` (a file, or the name a KernelBench answer gives linecache); writes the last
    `outputs` tensors, at once or, with launches in flight, by `finish_launches`."""
    asked = settings.current()
    mode = asked.sim_mode
    if mode not in MODES:  # `direct` is a worker's: its module runs kernels itself
        raise ValueError(f"PTODSL_SIM={mode!r} reached the interpreter, which it bypasses")
    source = "".join(linecache.getlines(module_file))
    if not source:
        raise RuntimeError(
            f"the generated module's text is not readable from {module_file!r}: import the "
            "module's file, or exec the `--emit kernelbench` answer, which registers its text"
        )
    _check_scalars(source, factory, arguments)
    trace_dir = asked.trace_dir
    in_flight = asked.launches_in_flight if mode == "interpret" else 1
    _LAUNCHES.wait_for(tensors, in_flight)
    prepared = prepare_kernel(
        _LAUNCHES.module(source, factory),
        factory,
        arguments,
        tensors,
        outputs,
        verify=MODES[mode],
        timeout=asked.launch_timeout,
        trace_dir=trace_dir,
        trace_number=None if trace_dir is None else _LAUNCHES.trace_number(trace_dir),
    )
    written = tuple(tensors[-outputs:])
    if in_flight > 1:
        _LAUNCHES.start(prepared, written, in_flight, asked.launch_memory)
        return
    run = prepared.run()
    if mode == "cost":
        raise CostOnly(
            f"PTODSL_SIM=cost: pypto's cost model ran the kernel ({run.sim_time_us:.2f} us "
            "simulated) and writes no outputs; unset PTODSL_SIM for the interpreter's values"
        )
    _write(run, written)


def _check_scalars(source: str, factory: str, arguments: Sequence[Any]) -> None:
    """Refuses a float argument beyond f32's range: torch computes with inf there, while
    pypto's calculator clamps an f32 scalar operand to the largest finite f32 (`From` in its
    calc_torch.cpp), so the interpreter's values would differ from torch's."""
    for name, argument in zip(_factory_parameters(source, factory), arguments, strict=True):
        if isinstance(argument, float) and torch.tensor(argument, dtype=torch.float32).isinf():
            raise ValueError(
                f"{name}={argument!r} is beyond f32's range (torch computes with inf), and "
                "pypto's simulator clamps a scalar operand to ±3.4028235e+38: pass a value f32 "
                "can hold, or run on an NPU"
            )


@functools.cache
def _factory_parameters(source: str, factory: str) -> tuple[str, ...]:
    """The names of a generated module's kernel factory's parameters (its scalar inputs)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == factory:
            return tuple(argument.arg for argument in node.args.args)
    raise RuntimeError(f"the generated module defines no kernel factory {factory!r}")


def settle(tensor: torch.Tensor) -> None:
    """The running launches that write `tensor` finish, their outputs written: `forward`
    reads it next (a row launch's rows, copied into the output)."""
    _LAUNCHES.wait_for([tensor], in_flight=sys.maxsize)


def finish_launches() -> None:
    """Wait for the launches still running and write their outputs."""
    _LAUNCHES.finish_all()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' elements may share memory: their address ranges meet."""
    a_start, a_end = _address_range(a)
    b_start, b_end = _address_range(b)
    return a_start < b_end and b_start < a_end


def _address_range(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes [start, end) a tensor's elements lie within (all of them, for a strided
    view, and whatever lies between)."""
    size = tensor.element_size()
    start = tensor.untyped_storage().data_ptr() + tensor.storage_offset() * size
    if tensor.numel() == 0:
        return start, start
    reach = sum((n - 1) * stride for n, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + (reach + 1) * size


def _write(run: SimRun, buffers: Sequence[torch.Tensor]) -> None:
    for buffer, value in zip(buffers, run.outputs, strict=True):
        buffer.copy_(value)


@attrs.define(eq=False)
class _Running:
    run: Future[SimRun]
    writes: tuple[torch.Tensor, ...]


@attrs.define
class _Launches:
    """This process's launches: the generated modules' text on disk for their workers, the
    numbers of the traces kept, and the launches running (oldest first)."""

    folder: tempfile.TemporaryDirectory | None = None
    traces: dict[Path, int] = attrs.Factory(dict)
    running: list[_Running] = attrs.Factory(list)
    executor: LocalExecutor | None = None

    def module(self, source: str, factory: str) -> Path:
        """The module's text as a file that lives as long as this process."""
        if self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix=scratch_prefix("interpret"))
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        path = Path(self.folder.name) / f"{factory}_{digest}.py"
        if not path.exists():
            path.write_text(source, encoding="utf-8")
        return path

    def trace_number(self, trace_dir: Path) -> int:
        """The next launch's number in trace_dir, after the launches kept there before.
        A folder first seen must take files: pypto's output is copied in after the run."""
        number = self.traces.get(trace_dir)
        if number is None:
            require_writable(trace_dir, "PTODSL_TRACE")
            number = len(list(trace_dir.glob("launch_*")))
        self.traces[trace_dir] = number + 1
        return number

    def wait_for(self, tensors: Sequence[torch.Tensor], in_flight: int) -> None:
        """Before a launch of `tensors` starts: the running launches that write any of them
        finish (a launch reads what those before it wrote, and writes after them), and then,
        while `in_flight` run, whichever ends first. Running launches write apart and read
        nothing another writes, so they may finish in any order."""
        for running in [
            running
            for running in self.running
            if any(overlaps(written, tensor) for written in running.writes for tensor in tensors)
        ]:
            self.finish(running)
        while len(self.running) >= in_flight:
            ended, _ = wait([running.run for running in self.running], return_when=FIRST_COMPLETED)
            self.finish(next(running for running in self.running if running.run in ended))

    def start(
        self,
        prepared: PreparedRun,
        writes: tuple[torch.Tensor, ...],
        in_flight: int,
        memory: float = 0.0,
    ) -> None:
        """Runs the launch beside the others, once its `memory` estimate fits beside theirs."""
        if self.executor is None:
            self.executor = LocalExecutor(in_flight)
        task = Task(prepared.run, (), memory, "launch")
        self.running.append(_Running(self.executor.submit(task), writes))

    def finish_all(self) -> None:
        while self.running:
            self.finish(self.running[0])

    def finish(self, running: _Running) -> None:
        """A running launch finishes; its outputs are written. A failed launch stops the
        others (their workers), and its error is raised."""
        self.running.remove(running)
        try:
            run = running.run.result()
        except BaseException:
            if self.executor is not None:  # the others are stopped, their workers too
                self.executor.stop()
                self.executor = None
            self.running.clear()
            raise
        _write(run, running.writes)


_LAUNCHES = _Launches()
