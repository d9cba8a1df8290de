"""Run generated PyPTO kernel modules in pypto's SIM mode and read back numbers and cost.

The parent side (`run_model`) never imports pypto: every run happens in a fresh worker
process (`ptodsl.runtime._sim_worker`) inside a private temporary directory, because pypto writes
many files, prints a lot, and a few kernel constructs crash the whole process.

The worker side uses `ensure_calculator` and `install_verify_fix` to get correct numbers
out of pypto 0.2.0 quickly.
"""

from __future__ import annotations

import configparser
import csv
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import torch
from filelock import FileLock

from ptodsl.ir import nodes as ir
from ptodsl.runtime import calls, settings
from ptodsl.runtime.files import cache_dir, read_regular
from ptodsl.runtime.scratch import make_scratch
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S
from ptodsl.runtime.workers import SLAB_STALL, WorkerStopped, describe_exit, log_lines

VERIFY_LEVELS = ("none", "graph", "all")
# The cost model counts cycles of a 1.8 GHz clock; pypto's own summary divides by 1800.
CYCLES_PER_US = 1800

_CALCULATOR_SO = Path("lib", "libtile_fwk_calculator.so")
_PYPTO_OUTPUT_DIR = "pypto_output"
_LAUNCHES_DIR = "launches"  # the cost-model output of launches run in workers of their own
_LOG_TAIL_LINES = 12
# "[ERROR] PYPTO(pid):date time [file.cpp:line][MODULE]:message", printed with ASCEND_SLOG_*.
_PYPTO_ERROR_LINE = re.compile(
    r"^\[ERROR\] PYPTO\S* \S+ \[(?P<source>[^\]]+)\]\[[^\]]*\]:(?P<message>.*)$", re.MULTILINE
)
# Printed by every successful 0.2.0 simulation too, so they explain nothing.
_HARMLESS_PYPTO_ERRORS = ("#data.valid: Index out of bounds", "idx < size_")
# Lines that never explain a failure: torch's missing-numpy warning at import and
# faulthandler's list of loaded extension modules.
_LOG_NOISE = ("Failed to initialize NumPy", "_conversion_method_template", "Extension modules:")


class SimulationError(RuntimeError):
    """A generated kernel module could not be simulated (crash, pypto error or timeout)."""


class PassResult(NamedTuple):
    """One row of pypto's per-pass verification report."""

    pass_name: str
    verdict: str
    max_abs_diff: float | None
    dtype: str  # pypto's name of the verified tensor's dtype, e.g. DT_FP32
    # The verified tensor's values, flat, kept for low-precision passes pypto failed (its
    # tolerance is fp32-strict), so that ptodsl can judge them element by element.
    values: torch.Tensor | None = None


@attrs.frozen(eq=False)
class SimRun:
    """What one simulated run of a model produced.

    `outputs` are the model's outputs; they are empty for verify="none" because SIM
    without verification computes no numbers. Times and cycles are summed over all
    kernel launches the model made.
    """

    outputs: list[torch.Tensor]
    sim_time_us: float
    total_cycles: int
    pass_results: tuple[PassResult, ...]
    verify: str
    # what forward returned ("a tensor", "a list of 1 tensors") and the positions of the
    # inputs it wrote to; "" and () for a single kernel launch
    returns: str = ""
    changed_inputs: tuple[int, ...] = ()
    # each `num_batches_tracked` buffer after forward (BatchNorm's step counters)
    counters: dict[str, int] = attrs.Factory(dict)


@attrs.frozen
class MemoryRates:
    """Per-core transfer rates declared in pypto's A2A3.ini, in bytes per cycle.

    The file declares no whole-chip bandwidth, and these rates feed pypto's compiler, not
    its cost model: simulated copies move ~47 B/cycle in and ~65 B/cycle out per vector
    core for 128 KiB tiles, and an elementwise kernel reaches ~1.2 TB/s end to end.
    """

    ddr_read: int
    ddr_write: int
    l2_read: int
    l2_write: int
    ub_to_ddr: int
    cube_cores: int
    vector_cores: int


# ---------------------------------------------------------------------------------------
# Worker side: calculator cache and the 0.2.0 verify-data fix
# ---------------------------------------------------------------------------------------


def calculator_cache_root() -> Path:
    return cache_dir() / "calculator"


def ensure_calculator() -> Path:
    """Load pypto's torch-backed calculator, building it at most once per environment.

    pypto rebuilds it with cmake in every process (~30 s); we build it once into a cache
    keyed by everything the binary depends on and just dlopen it afterwards.
    """
    from pypto._utils import BuildOnlineManager

    manager = BuildOnlineManager()
    source_dir = manager.pkg_lib_dir / "calculator"
    cmake_defines = _calculator_cmake_defines()
    target = calculator_cache_root() / _calculator_key(source_dir, cmake_defines)
    library = target / _CALCULATOR_SO
    if not _intact(library):
        _build_calculator_locked(source_dir, cmake_defines, target)
    if not manager.calculator_loaded:
        # RTLD_GLOBAL: pypto resolves the calculator's symbols by name.
        ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
        manager.calculator_loaded = True
    return library


def _calculator_cmake_defines() -> dict[str, str]:
    # The same three facts pypto passes to cmake when it builds the calculator itself.
    return {
        "PY3_MOD_TORCH_VERSION": str(torch.__version__),
        "PY3_MOD_TORCH_ROOT_PATH": str(Path(torch.__file__).parent),
        "PY3_MOD_TORCH_C_GLIBCXX_USE_CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    }


def _calculator_key(source_dir: Path, cmake_defines: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    facts = [metadata.version("pypto"), str(source_dir), *sorted(cmake_defines.items())]
    digest.update(repr(facts).encode())
    for path in sorted(p for p in source_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(source_dir)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def _build_calculator_locked(
    source_dir: Path, cmake_defines: Mapping[str, str], target: Path
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.with_name(target.name + ".lock")):
        if _intact(target / _CALCULATOR_SO):  # another process built it meanwhile
            return
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch:
            install_dir = _cmake_build(source_dir, cmake_defines, Path(scratch))
            if not (install_dir / _CALCULATOR_SO).exists():
                raise RuntimeError(f"calculator build produced no {_CALCULATOR_SO}")
            _record_digest(install_dir / _CALCULATOR_SO)
            # Same filesystem, so readers see either nothing or the complete library.
            shutil.rmtree(target, ignore_errors=True)
            install_dir.rename(target)


def _digest_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _record_digest(library: Path) -> None:
    _digest_path(library).write_text(hashlib.sha256(library.read_bytes()).hexdigest())


def _intact(library: Path) -> bool:
    """Whether the cached library is the one the build wrote: a truncated or altered file
    (a full disk, a copy cut short) is rebuilt rather than failing every later check."""
    try:
        recorded = read_regular(_digest_path(library)).decode(errors="replace").strip()
        return hashlib.sha256(read_regular(library)).hexdigest() == recorded
    except OSError:
        return False


def _cmake_build(source_dir: Path, cmake_defines: Mapping[str, str], scratch: Path) -> Path:
    from pypto._utils import BuildOnlineManager

    cmake = BuildOnlineManager._CMakeContext()
    context = BuildOnlineManager._CMakeContext.CompileContext(src_dir=source_dir, tmp_dir=scratch)
    context.cfg_cmd_ext = " ".join(f"-D{name}={value}" for name, value in cmake_defines.items())
    context.build_job_num = os.cpu_count() or 1
    try:
        return cmake.compile(ctx=context)
    except subprocess.CalledProcessError as error:
        output = f"{error.stdout or ''}{error.stderr or ''}".strip().splitlines()
        reason = "\n".join(output[-_LOG_TAIL_LINES:])
        raise RuntimeError(f"building pypto's calculator failed:\n{reason}") from error


def install_verify_fix() -> None:
    """Make SIM-mode verification compute on the caller's real inputs.

    pypto 0.2.0 registers zero-filled copies of the inputs, so the calculator evaluates
    f(0) and overwrites the caller's inputs with zeros. Worker process only.
    """
    from pypto.frontend.parser import entry

    entry.JitCallableWrapper._setup_verify_data = staticmethod(_register_real_verify_inputs)


def _register_real_verify_inputs(pto_tensors: list) -> None:
    import pypto
    from pypto import pypto_impl
    from pypto.runtime import _pto_to_tensor_data, _pto_verify_datas

    if not pypto.get_verify_options().get("enable_pass_verify"):
        return
    ensure_calculator()
    pypto_impl.SetVerifyData(_pto_to_tensor_data(pto_tensors), [], _pto_verify_datas.get_data())


# ---------------------------------------------------------------------------------------
# Parent side: run a module in a worker and read what pypto wrote
# ---------------------------------------------------------------------------------------


def run_model(
    module_path: str | os.PathLike[str],
    init_kwargs: Mapping[str, Any],
    inputs: Sequence[Any],
    *,
    goldens: Sequence[torch.Tensor] | None = None,
    kernel_inputs: int | None = None,
    verify: str = "graph",
    timeout: float = DEFAULT_TIMEOUT_S,
    state: Mapping[str, torch.Tensor] | None = None,
    load: str = "import",
    trace_dir: Path | None = None,
    launches: int = 1,
    launches_in_flight: int = 1,
    launch_memory: float = 0.0,
    on_launch: Callable[[int], None] | None = None,
    mode: ir.Mode | None = None,
    forward_seed: int | None = None,
    updated: Sequence[str] = (),
) -> SimRun:
    """Simulate `ModelNew(**init_kwargs)(*inputs)` from a generated module file.

    inputs are tensors or plain Python values (forward's scalars).
    verify: "none" (cost only, no numbers), "graph" (numbers from the tensor graph) or
    "all" (also verify later passes tile by tile; slow beyond ~256K elements).
    goldens: expected kernel outputs for pypto's per-pass comparison of the first kernel
    launch; `kernel_inputs` is that kernel's number of input parameters (default:
    len(inputs)).
    state: values loaded into the model's weights (its nn.Parameters) before the run.
    load: "import" imports the module file; "exec" runs its text with exec(), as KernelBench's
    loader does with an answer.
    trace_dir: keep pypto's cost-model output of each kernel launch there (its swim lanes,
    Perfetto trace and statistics: `keep_traces`).
    launches: the kernel launches the generated module makes. Above one, each runs in a
    worker of its own (the interpreter's), limited by `timeout`, so that pypto's
    verification memory, which grows launch after launch in one process, is freed between
    launches (graph verification only: per-pass goldens are the first launch's).
    launches_in_flight: how many of those workers may run at once, if their memory
    estimates (`launch_memory` bytes each) fit together in the memory available.
    on_launch: called about every second while the model runs, with the number of its
    launches simulated so far (progress reports).
    mode: the module mode forward runs in (None: training, torch's default);
    forward_seed: torch's seed just before forward (dropout masks are drawn from it);
    updated: buffers (state_dict names) whose values after forward follow its outputs.
    """
    if verify not in VERIFY_LEVELS:
        raise ValueError(f"verify must be one of {VERIFY_LEVELS}, not {verify!r}")
    if launches > 1 and verify != "graph":
        raise ValueError("a worker per launch runs graph verification only")
    request = {
        "verify": verify,
        "launches": launches,
        "in_flight": launches_in_flight,
        "launch_memory": launch_memory,
        "kernel_inputs": len(inputs) if kernel_inputs is None else kernel_inputs,
        "load": load,
    }
    # init_kwargs travel with the tensors so tuples stay tuples (JSON would make lists).
    payload = {
        "inputs": [_portable(value) for value in inputs],
        "init_kwargs": dict(init_kwargs),
        "goldens": None if goldens is None else [_portable(t) for t in goldens],
        "state": {name: _portable(t) for name, t in (state or {}).items()},
        "training": mode is not ir.Mode.EVAL,
        "forward_seed": forward_seed,
        "updated": list(updated),
    }
    return _simulate(Path(module_path), request, payload, timeout, trace_dir, on_launch)


def prepare_kernel(
    module_path: str | os.PathLike[str],
    factory: str,
    arguments: Sequence[Any],
    tensors: Sequence[torch.Tensor],
    outputs: int,
    *,
    verify: str = "graph",
    timeout: float = DEFAULT_TIMEOUT_S,
    trace_dir: Path | None = None,
    trace_number: int | None = None,
) -> PreparedRun:
    """One kernel launch, `factory(*arguments)(*tensors)` from a generated module file, as
    the interpreter runs a launch of a generated forward (the last `outputs` of `tensors`
    are the buffers the kernel writes, and their values are the run's outputs), with its
    tensors written and its worker not started (`.run()` runs it): what the tensors hold
    now is what the launch reads, whatever is written to them later.
    `trace_number`: keep the launch's cost-model output as trace_dir/launch_<number>."""
    if verify not in VERIFY_LEVELS:
        raise ValueError(f"verify must be one of {VERIFY_LEVELS}, not {verify!r}")
    request = {"verify": verify, "load": "import", "factory": factory, "outputs": outputs}
    payload = {
        "inputs": [_portable(t) for t in tensors],
        "arguments": list(arguments),
        "goldens": None,
    }
    return _prepare(Path(module_path), request, payload, timeout, trace_dir, trace_number)


def _simulate(
    module_path: Path,
    request: dict[str, Any],
    payload: dict[str, Any],
    timeout: float,
    trace_dir: Path | None,
    on_launch: Callable[[int], None] | None = None,
) -> SimRun:
    return _prepare(module_path, request, payload, timeout, trace_dir, None, on_launch).run()


def _prepare(
    module_path: Path,
    request: dict[str, Any],
    payload: dict[str, Any],
    timeout: float,
    trace_dir: Path | None,
    trace_number: int | None,
    on_launch: Callable[[int], None] | None = None,
) -> PreparedRun:
    module_path = module_path.resolve()
    work_dir = make_scratch("sim")
    try:
        request = {"module_path": str(module_path), **request}
        calls.prepare(work_dir, request, payload)
    except BaseException:
        _dispose(work_dir)
        raise
    return PreparedRun(work_dir, module_path, request, timeout, trace_dir, trace_number, on_launch)


@attrs.frozen(eq=False)
class PreparedRun:
    """A simulation whose request and tensors are in its work folder: `run` runs its worker
    (once: the folder goes with it)."""

    work_dir: Path
    module_path: Path
    request: dict[str, Any]
    timeout: float
    trace_dir: Path | None
    trace_number: int | None
    on_launch: Callable[[int], None] | None

    def run(self) -> SimRun:
        work_dir = self.work_dir
        try:
            watch = None if self.on_launch is None else _launch_watch(work_dir, self.on_launch)
            answer = _run_worker(work_dir, self.module_path, self.timeout, self.request, watch)
            if watch is not None:  # the last launches may end between two polls
                watch()
            run = _read_results(answer, self.request["verify"])
            if self.trace_dir is not None:
                keep_traces(_cost_model_outputs(work_dir), self.trace_dir, self.trace_number)
            return run
        finally:
            _dispose(work_dir)


def _portable(value: Any) -> Any:
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _launch_watch(work_dir: Path, on_launch: Callable[[int], None]) -> Callable[[], None]:
    """A poll that tells `on_launch` how many launches have finished: pypto writes a launch's
    cost-model output when the launch ends, in the worker's output folder or, for launches
    in workers of their own, into _LAUNCHES_DIR."""
    return lambda: on_launch(len(_cost_model_outputs(work_dir)))


def _cost_model_outputs(work_dir: Path) -> list[Path]:
    return [
        *sorted((work_dir / _PYPTO_OUTPUT_DIR).glob("*/CostModelSimulationOutput")),
        *_launch_traces(work_dir / _LAUNCHES_DIR),
    ]


def _run_worker(
    work_dir: Path,
    module_path: Path,
    timeout: float,
    request: Mapping[str, Any],
    on_poll: Callable[[], None] | None = None,
) -> calls.Answer:
    launches = request.get("launches", 1)
    per_launch = None
    if launches > 1:
        per_launch = LaunchWorkers(timeout, request["in_flight"], request["launch_memory"])
    try:
        # pypto's tables are complete once the worker's C streams are flushed, as its fast
        # exit does (checked against a normal exit: the same files, sizes and pass
        # verdicts); _pass_results refuses a truncated one
        answer = calls.call(
            "ptodsl.runtime._sim_worker",
            work_dir,
            # Each launch's worker has `timeout`; the model's worker as long as all of them
            # and its own start (importing torch and pypto, compiling the kernel: 15 s and
            # more on a loaded machine), so that a launch's timeout is what ends it.
            timeout=timeout
            if per_launch is None
            else timeout * launches + max(timeout, MODEL_START_S),
            env=_worker_environment(work_dir, per_launch),
            stall=SLAB_STALL,
            on_poll=on_poll,
        )
    except WorkerStopped as error:
        raise SimulationError(
            f"simulating {module_path.name} {error}" + _log_excerpt(work_dir, with_tail=True)
        ) from None
    if answer.status != 0:
        raise SimulationError(_describe_failure(answer, module_path))
    return answer


# What a model's worker may take to start before its first launch, beside its launches'
# timeouts (a small timeout per launch must not stop the model's own start).
MODEL_START_S = 120.0


# Errors only, but to stdout: they carry the reason behind "Run pass failed". pypto reads
# them when its library loads, so the zygote that imports it for the workers has them too.
PYPTO_LOG_ENVIRONMENT = {"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "3"}


@attrs.frozen
class LaunchWorkers:
    """A model's launches in workers of their own: each one's timeout, how many may run at
    once, and each one's memory estimate (for the executor's admission)."""

    timeout: float
    in_flight: int
    memory: float


def _worker_environment(work_dir: Path, per_launch: LaunchWorkers | None) -> dict[str, str]:
    """The worker's environment; with `per_launch`, the generated module's launches go to
    the interpreter, a worker each, whose cost-model output is kept in _LAUNCHES_DIR."""
    stub_bin = work_dir / "bin"
    stub_bin.mkdir()
    _write_noop_python(stub_bin / "python3")
    tmp_dir = work_dir / "tmp"
    tmp_dir.mkdir()
    package_parent = str(Path(__file__).resolve().parents[2])
    env = settings.worker_environment(os.environ)
    env.update(
        {
            "PATH": os.pathsep.join([str(stub_bin), env.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")])),
            "TILE_FWK_OUTPUT_DIR": str(work_dir / _PYPTO_OUTPUT_DIR),
            "PYPTO_HOME": str(work_dir / "pypto_home"),
            "ASCEND_PROCESS_LOG_PATH": str(work_dir / "ascend_log"),
            "TMPDIR": str(tmp_dir),
            "AIKG_PYPTO_RUN_MODE": "1",  # generated modules' _run_mode(): always SIM here
            "PTODSL_SIM": "direct",  # and their kernels run here, not in another interpreter
            **PYPTO_LOG_ENVIRONMENT,
            # pypto's calculator sums f32 values with torch, whose order, so whose rounding,
            # follows the thread count: one thread everywhere makes a kernel's values the
            # same on any machine, under --jobs and in a Dask worker (which pins 1 itself).
            # Measured cost: #37 at N=4 16.4 s against 15.6 s with 2 threads.
            "OMP_NUM_THREADS": "1",
        }
    )
    if per_launch is not None:
        env.update(
            {
                "PTODSL_SIM": "interpret",
                "PTODSL_TRACE": str(work_dir / _LAUNCHES_DIR),
                "PTODSL_LAUNCH_TIMEOUT": str(per_launch.timeout),
                "PTODSL_LAUNCHES_IN_FLIGHT": str(per_launch.in_flight),
                "PTODSL_LAUNCH_MEMORY": str(int(per_launch.memory)),
            }
        )
    return env


def _write_noop_python(path: Path) -> None:
    # The simulator starts swim-lane plotting scripts through `python3` on PATH; they only
    # draw pictures (and fail noisily without matplotlib), so a no-op stands in for them.
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)


def _describe_failure(answer: calls.Answer, module_path: Path) -> str:
    said = answer.fault is not None  # the worker caught a Python exception and described it
    what = f"failed: {answer.fault}" if said else describe_exit(answer.status)
    excerpt = _log_excerpt(answer.folder, with_tail=not said)
    return f"simulating {module_path.name} {what}{excerpt}"


def _log_excerpt(work_dir: Path, *, with_tail: bool) -> str:
    """pypto's own error lines (the C++ reason behind a generic failure), else the log's end."""
    lines = _log_lines(work_dir)
    errors = _pypto_errors(lines)
    if errors:
        return "\npypto errors:\n  " + "\n  ".join(errors[-_LOG_TAIL_LINES:])
    if with_tail and lines:
        return "\nlast log lines:\n  " + "\n  ".join(lines[-_LOG_TAIL_LINES:])
    return ""


def _log_lines(work_dir: Path) -> list[str]:
    return log_lines(work_dir, _LOG_NOISE)


def _pypto_errors(log_lines: list[str]) -> list[str]:
    errors: list[str] = []
    for match in _PYPTO_ERROR_LINE.finditer("\n".join(log_lines)):
        line = f"[{match['source']}] {match['message'].strip()}"
        harmless = any(marker in line for marker in _HARMLESS_PYPTO_ERRORS)
        if not harmless and line not in errors:
            errors.append(line)
    return errors


def _read_results(answer: calls.Answer, verify: str) -> SimRun:
    work_dir = answer.folder
    if not answer.replied:
        raise SimulationError("the simulation worker exited without writing the model's outputs")
    runs = _cost_model_outputs(work_dir)
    if not runs:
        raise SimulationError("the model ran no kernel (pypto wrote no simulation output)")
    reply = answer.reply()
    outputs, form = reply["outputs"], reply["form"] or {}
    return SimRun(
        outputs=outputs if verify != "none" else [],
        sim_time_us=sum(aicore_time_us(run / "_simulate.swim.json") for run in runs),
        total_cycles=sum(total_cycles(run / "_simulate.stat.report.txt") for run in runs),
        pass_results=tuple(_pass_results(work_dir / _PYPTO_OUTPUT_DIR)),
        verify=verify,
        returns=form.get("returns", ""),
        changed_inputs=tuple(form.get("changed_inputs", ())),
        counters=form.get("counters", {}),
    )


def keep_traces(runs: list[Path], trace_dir: Path, first: int | None = None) -> list[Path]:
    """Copy the cost-model output of every kernel launch in `runs` to `trace_dir/launch_<n>`
    (n in launch order from `first`, by default after the launches kept there already) and
    return those folders."""
    kept = []
    if first is None:
        first = len(list(Path(trace_dir).glob("launch_*")))
    for number, run in enumerate(runs, start=first):
        target = Path(trace_dir) / f"launch_{number}"
        shutil.copytree(run, target, ignore=shutil.ignore_patterns("graphs"), dirs_exist_ok=True)
        kept.append(target)
    return kept


def _launch_traces(folder: Path) -> list[Path]:
    """`keep_traces`' launch_<n> folders in launch order (launch_10 after launch_9)."""
    return sorted(folder.glob("launch_*"), key=lambda path: int(path.name.split("_")[1]))


def aicore_time_us(swim_json: Path) -> float:
    """pypto's "AICore End-to-End Time": first AI-core task start to last task end."""
    spans = [
        (task["execStart"], task["execEnd"])
        for core in json.loads(swim_json.read_text())
        if "AIC" in core["coreType"] or "AIV" in core["coreType"]
        for task in core["tasks"]
        if task["execEnd"] >= task["execStart"]
    ]
    if not spans:
        return 0.0
    return (max(end for _, end in spans) - min(start for start, _ in spans)) / CYCLES_PER_US


def total_cycles(stat_report: Path) -> int:
    for line in stat_report.read_text().splitlines():
        if line.startswith("Total Cycles"):
            return int(line.rsplit(":", 1)[1])
    raise SimulationError(f"no 'Total Cycles' line in {stat_report.name}")


_LOW_PRECISION = {"DT_FP16": torch.float16, "DT_BF16": torch.bfloat16}


def _pass_results(pypto_output: Path) -> Iterator[PassResult]:
    for report in sorted(pypto_output.glob("*/verify_*/verify_result_brief.csv")):
        with open(report, newline="") as handle:
            for row in csv.DictReader(handle):
                if None in row.values() or None in row:  # a row cut short, or too long
                    raise SimulationError(f"pypto's verification table {report.name} is cut short")
                dtype = row.get("outputDtype", "")
                values = None
                if row["verifyResult"] == "FAILED" and dtype in _LOW_PRECISION:
                    data = report.parent / row["passName"] / row["outputTensor"]
                    if data.is_file():
                        raw = bytearray(data.read_bytes())
                        values = torch.frombuffer(raw, dtype=_LOW_PRECISION[dtype]).clone()
                yield PassResult(
                    row["passName"], row["verifyResult"], _float(row["maxAbsDiff"]), dtype, values
                )


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _dispose(work_dir: Path) -> None:
    if settings.current().keep_sim_dir:
        print(f"ptodsl: kept simulation files in {work_dir}", file=sys.stderr)
        return
    shutil.rmtree(work_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Simulated platform
# ---------------------------------------------------------------------------------------


def platform_memory_rates() -> MemoryRates:
    """Memory rates of the simulated Ascend 910B as pypto's A2A3.ini declares them."""
    config = configparser.ConfigParser()
    config.read(_pypto_lib_dir() / "configs" / "A2A3.ini")
    rates, soc = config["AICoreMemoryRates"], config["SoCInfo"]
    return MemoryRates(
        ddr_read=rates.getint("ddr_read_rate"),
        ddr_write=rates.getint("ddr_write_rate"),
        l2_read=rates.getint("l2_read_rate"),
        l2_write=rates.getint("l2_write_rate"),
        ub_to_ddr=rates.getint("ub_to_ddr_rate"),
        cube_cores=soc.getint("cube_core_cnt"),
        vector_cores=soc.getint("vector_core_cnt"),
    )


def _pypto_lib_dir() -> Path:
    # Located without importing pypto, which costs over a second.
    return Path(str(metadata.distribution("pypto").locate_file("pypto"))) / "lib"
