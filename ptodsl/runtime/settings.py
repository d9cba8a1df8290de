"""ptodsl's run settings: every environment variable ptodsl reads is read here and only
here, checked, and returned as one value, so that a bad value is refused with its name
before anything runs. (A generated module reads its own two, the run mode and
PTODSL_INTERPRET, itself: it must run without ptodsl installed.)

The command line reads them once and runs under them (`active`); so does the API, which
also takes them as an argument (`ptodsl.check(..., settings=...)`): everything below sees
that one value (`current()`), and the workers it starts get it in their environment
(`worker_environment`), the channel a worker reads it from."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import platformdirs

DEFAULT_TIMEOUT_S = 600.0  # a simulation, a problem run, a kernel launch's worker
SIM_MODES = ("interpret", "cost", "direct")
CLUSTER_VARIABLE = "DASK_SCHEDULER_ADDRESS"  # Dask's own
IN_FLIGHT_VARIABLE = "PTODSL_LAUNCHES_IN_FLIGHT"
PARENT_VARIABLE = "PTODSL_WORKER_PARENT"


# Every variable ptodsl reads (docs/cli.md's Environment table lists the same).
VARIABLES = (
    "PTODSL_CACHE_DIR",
    "PTODSL_TUNING_DIR",
    CLUSTER_VARIABLE,
    "PTODSL_SIM",
    "PTODSL_TRACE",
    "PTODSL_LAUNCH_TIMEOUT",
    IN_FLIGHT_VARIABLE,
    "PTODSL_LAUNCH_MEMORY",
    "PTODSL_KEEP_SIM_DIR",
    PARENT_VARIABLE,
)


class SettingError(ValueError):
    """An environment variable ptodsl reads holds a value it cannot use (named in the
    message): a user error."""


@attrs.frozen
class Settings:
    """What the environment asks of this run.

    cache_dir: PTODSL_CACHE_DIR, else the platform's user cache folder (platformdirs:
        `$XDG_CACHE_HOME/ptodsl`, by default ~/.cache/ptodsl on Linux).
    tuning_dir: PTODSL_TUNING_DIR, else `tuning/` in the cache folder.
    cluster: DASK_SCHEDULER_ADDRESS, the scheduler `--cluster` without an address uses.
    sim_mode: PTODSL_SIM, how a generated module's launch runs without an NPU:
        `interpret` (pypto's calculator computes its outputs), `cost` (the cost model
        only), `direct` (in this process: a worker's own).
    trace_dir: PTODSL_TRACE, where each interpreted launch's cost-model output is kept.
    launch_timeout: PTODSL_LAUNCH_TIMEOUT, seconds each launch's worker may run.
    launches_in_flight: PTODSL_LAUNCHES_IN_FLIGHT, launches that may run at once.
    launch_memory: PTODSL_LAUNCH_MEMORY, each launch's estimated memory in bytes: launches
        in flight start while their estimates fit together (0: not estimated).
    keep_sim_dir: PTODSL_KEEP_SIM_DIR=1 keeps a simulation's folder (for debugging).
    worker_parent: PTODSL_WORKER_PARENT, the process a worker's watchdog watches.
    """

    cache_dir: Path
    tuning_dir: Path
    cluster: str
    sim_mode: str
    trace_dir: Path | None
    launch_timeout: float
    launches_in_flight: int
    launch_memory: float
    keep_sim_dir: bool
    worker_parent: int | None


_ACTIVE: Settings | None = None


def current() -> Settings:
    """The settings of the command or API call running (`active`); outside one, what the
    environment gives now (read afresh: cheap, and a test or a worker may change it)."""
    return _ACTIVE if _ACTIVE is not None else read()


def read() -> Settings:
    """What this process's environment gives now."""
    return from_environment(os.environ)


@contextlib.contextmanager
def active(chosen: Settings) -> Iterator[Settings]:
    """Runs what the block does under `chosen`: this process's run configuration (one per
    process: a command, or an API call, at a time)."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, chosen
    try:
        yield chosen
    finally:
        _ACTIVE = previous


def worker_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` (the environment a worker is given) with the variables that give it the
    current settings: the inverse of `from_environment` (a variable whose setting is unset
    is removed). The worker's parent is set for each worker by the zygote that forks it."""
    chosen = current()
    values = {
        "PTODSL_CACHE_DIR": str(chosen.cache_dir),
        "PTODSL_TUNING_DIR": str(chosen.tuning_dir),
        CLUSTER_VARIABLE: chosen.cluster or None,
        "PTODSL_SIM": chosen.sim_mode,
        "PTODSL_TRACE": None if chosen.trace_dir is None else str(chosen.trace_dir),
        "PTODSL_LAUNCH_TIMEOUT": repr(chosen.launch_timeout),
        IN_FLIGHT_VARIABLE: str(chosen.launches_in_flight),
        "PTODSL_LAUNCH_MEMORY": str(int(chosen.launch_memory)),
        "PTODSL_KEEP_SIM_DIR": "1" if chosen.keep_sim_dir else None,
    }
    environment = dict(base)
    for variable, value in values.items():
        if value is None:
            environment.pop(variable, None)
        else:
            environment[variable] = value
    return environment


def from_environment(environ: Mapping[str, str]) -> Settings:
    cache = environ.get("PTODSL_CACHE_DIR") or ""
    cache_dir = Path(cache) if cache else platformdirs.user_cache_path("ptodsl")
    tuning = environ.get("PTODSL_TUNING_DIR") or ""
    trace = environ.get("PTODSL_TRACE") or ""
    sim_mode = environ.get("PTODSL_SIM") or "interpret"
    if sim_mode not in SIM_MODES:
        raise SettingError(
            f"PTODSL_SIM={sim_mode!r}: unset it (or `interpret`) for computed outputs, `cost` "
            "for the cost model alone"
        )
    return Settings(
        cache_dir=cache_dir,
        tuning_dir=Path(tuning) if tuning else cache_dir / "tuning",
        cluster=environ.get(CLUSTER_VARIABLE, ""),
        sim_mode=sim_mode,
        trace_dir=Path(trace) if trace else None,
        launch_timeout=_seconds(environ, "PTODSL_LAUNCH_TIMEOUT", DEFAULT_TIMEOUT_S),
        launches_in_flight=_count(environ, IN_FLIGHT_VARIABLE, 1),
        launch_memory=_bytes(environ, "PTODSL_LAUNCH_MEMORY"),
        keep_sim_dir=environ.get("PTODSL_KEEP_SIM_DIR") == "1",
        worker_parent=_pid(environ, PARENT_VARIABLE),
    )


def _seconds(environ: Mapping[str, str], variable: str, default: float) -> float:
    text = environ.get(variable)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise SettingError(f"{variable}={text!r}: a number of seconds, above 0")
    return seconds


def _count(environ: Mapping[str, str], variable: str, default: int) -> int:
    text = environ.get(variable)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise SettingError(f"{variable}={text!r}: a number of launches, at least 1")
    return int(text)


def _bytes(environ: Mapping[str, str], variable: str) -> float:
    text = environ.get(variable)
    if text is None:
        return 0.0
    if not (text.isascii() and text.isdigit()):
        raise SettingError(f"{variable}={text!r}: a number of bytes")
    return float(text)


def _pid(environ: Mapping[str, str], variable: str) -> int | None:
    text = environ.get(variable)
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise SettingError(f"{variable}={text!r}: a process id (ptodsl sets it for its workers)")
    return int(text)
