"""The one executor of ptodsl's jobs: `submit(task) -> Future`, where a task carries its
memory estimate. `coverage`'s problems, `tune`'s plans, `check`'s specs, the benchmarks and
a kernel's launches in flight all run through it, on this machine (`LocalExecutor`) or on
a Dask cluster (`ClusterExecutor`), with the same results in the same order either way
(`run_tasks`).

Each job runs its simulations in worker processes of its own (`ptodsl.runtime.calls`), so
local jobs need threads only; what they must not do is start two jobs that cannot fit in
memory together (verifying the largest problems takes up to 20 GB): a job starts when its
estimate fits in the budget less what the running jobs were given, and a job bigger than
all of that runs alone (`ptodsl.runtime.memory.MemoryGate`).

On a cluster (Dask distributed: `pip install ptodsl[cluster]`) a task is a module-level
function and its arguments, which carry spec text and plan choices, never file paths. The
estimate becomes the task's need of the workers' `memory` resource (`dask worker ADDRESS
--resources memory=20e9`), so the scheduler keeps the same promise per worker; with
workers that do not declare one it is not asked for. A task whose worker dies is run again
on another (Dask's `allowed-failures`), and a task that cannot complete becomes its own
failing result (`failed`), never a lost table. Waiting for a worker is bounded by the
command's --timeout (at most a minute): at the start, and whenever every worker has gone.
"""

from __future__ import annotations

import abc
import importlib
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from ptodsl.runtime import memory, settings
from ptodsl.runtime.settings import CLUSTER_VARIABLE
from ptodsl.runtime.workers import stop_all_workers

T = TypeVar("T")
MEMORY_RESOURCE = "memory"  # the Dask worker resource a task's estimate is asked of
# How long a command waits for a cluster's first worker before it gives up.
CLUSTER_WORKERS_TIMEOUT_S = 60


# The repository checkout ptodsl is installed from (editable), whose benchmarks/ folder
# `ptodsl bench` runs, here or on a cluster worker installed the same way.
REPOSITORY = Path(__file__).resolve().parents[2]


def cluster_address(option: str | None) -> str | None:
    """--cluster's address (None without the option): the one given, else Dask's own
    DASK_SCHEDULER_ADDRESS. Raises ValueError when neither names one."""
    if option is None:
        return None
    address = option or settings.current().cluster
    if not address:
        raise ValueError(f"--cluster: give the scheduler's address, or set {CLUSTER_VARIABLE}")
    return address


def in_repository(module: str, function: str, *arguments: Any) -> Any:
    """`benchmarks.<module>.<function>(*arguments)` from the repository ptodsl is installed
    from: a benchmark's job, which a cluster worker runs from its own checkout."""
    if str(REPOSITORY) not in sys.path:
        sys.path.insert(0, str(REPOSITORY))
    return getattr(importlib.import_module(f"benchmarks.{module}"), function)(*arguments)


class ClusterError(RuntimeError):
    """The cluster could not be reached, has no workers, or ptodsl[cluster] is missing."""


@attrs.frozen
class Task(Generic[T]):
    """`function(*arguments)`: a module-level function (a cluster worker imports it by its
    name) whose peak memory, its simulator workers' included, is about `memory` bytes."""

    function: Callable[..., T]
    arguments: tuple[Any, ...]
    memory: float
    label: str


class Executor(abc.ABC):
    """Runs tasks as they are submitted, each to a future of its result (or its error)."""

    @abc.abstractmethod
    def submit(self, task: Task[T]) -> Future[T]: ...

    @abc.abstractmethod
    def stop(self) -> None:
        """Ends the run at once (Ctrl-C, SIGTERM, a failed launch): tasks not started never
        start, running ones lose their workers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Waits for the tasks submitted, then frees what the executor holds."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if error is not None:
            self.stop()
        self.close()


class LocalExecutor(Executor):
    """`jobs` tasks at a time on threads of this process, admitted by their memory estimates
    against the budget when the executor was made (`memory.MemoryGate`)."""

    def __init__(self, jobs: int, total: float | None = None):
        self._gate = memory.MemoryGate(memory.budget() if total is None else total)
        self._pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ptodsl-job")

    def submit(self, task: Task[T]) -> Future[T]:
        return self._pool.submit(self._admitted, task)

    def _admitted(self, task: Task[T]) -> T:
        self._gate.enter(task.memory)
        try:
            return task.function(*task.arguments)
        finally:
            self._gate.leave(task.memory)

    def stop(self) -> None:
        self._gate.close()
        stop_all_workers()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class ClusterExecutor(Executor):
    """Tasks on the workers of a Dask scheduler at `address`, as many at once as they take.
    Each settles this process's future as it ends, with its result or its error
    (KilledWorker too); a watch fails those left with a ClusterError when every worker has
    been gone for `patience` seconds (the command's timeout, at most a minute)."""

    def __init__(self, address: str, timeout: float | None):
        try:
            from distributed import Client
        except ImportError:
            raise ClusterError(
                "--cluster needs Dask distributed: pip install 'ptodsl[cluster]'"
            ) from None
        limit = CLUSTER_WORKERS_TIMEOUT_S
        self._address = address
        self._patience = limit if timeout is None else min(timeout, limit)
        try:
            self._client = Client(address, timeout=self._patience)
        except OSError as error:
            raise ClusterError(f"cannot reach the Dask scheduler at {address}: {error}") from None
        try:
            self._client.wait_for_workers(1, timeout=self._patience)
        except TimeoutError:
            self._client.close()
            raise ClusterError(_no_workers(address, self._patience)) from None
        self._largest = _largest_memory_resource(self._client)
        self._run = uuid.uuid4().hex  # Dask keeps results by key: two runs never share one
        self._submitted = 0
        self._pending: dict[str, tuple[Any, Future]] = {}  # key -> its two futures
        self._changed = threading.Condition()
        self._closing = False
        self._watch = threading.Thread(target=self._watch_workers, name="ptodsl-cluster")
        self._watch.start()

    def submit(self, task: Task[T]) -> Future[T]:
        resources = None
        if self._largest is not None:
            resources = {MEMORY_RESOURCE: min(task.memory, self._largest)}
        key = f"ptodsl-{self._run}-{self._submitted}"
        self._submitted += 1
        local: Future[T] = Future()
        local.set_running_or_notify_cancel()
        with self._changed:
            remote = self._client.submit(
                task.function, *task.arguments, key=key, pure=False, resources=resources
            )
            self._pending[key] = (remote, local)
        remote.add_done_callback(self._settle)
        return local

    def _settle(self, remote) -> None:
        """A task ended on the cluster: its result, or its error, is this process's."""
        with self._changed:
            entry = self._pending.pop(remote.key, None)
        if entry is None:  # failed already: the workers had gone
            return
        try:
            entry[1].set_result(remote.result())
        except BaseException as error:  # noqa: BLE001 - the task's own failure
            entry[1].set_exception(error)

    def _watch_workers(self) -> None:
        while True:
            with self._changed:
                if self._changed.wait_for(lambda: self._closing, timeout=self._patience):
                    return
                if not self._pending:
                    continue
            try:
                self._client.wait_for_workers(1, timeout=self._patience)
            except TimeoutError:
                self._fail_pending(ClusterError(_no_workers(self._address, self._patience)))

    def _fail_pending(self, error: Exception) -> None:
        with self._changed:
            pending, self._pending = list(self._pending.values()), {}
        for remote, local in pending:
            remote.cancel()
            local.set_exception(error)

    def stop(self) -> None:
        self._fail_pending(RuntimeError("the run was stopped"))

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._watch.join()
        self._client.close()


def executor_for(jobs: int, cluster: str | None, timeout: float | None = None) -> Executor:
    """A command's executor: `jobs` tasks at a time here, or, with `cluster` (a Dask
    scheduler's address), as many as its workers take; `timeout` bounds each wait for a
    cluster worker."""
    if cluster is not None:
        return ClusterExecutor(cluster, timeout)
    return LocalExecutor(jobs)


def run_tasks(
    tasks: Sequence[Task[T]],
    *,
    failed: Callable[[Task[T], BaseException], T],
    jobs: int = 1,
    cluster: str | None = None,
    on_done: Callable[[int, T], None] = lambda index, result: None,
    timeout: float | None = None,
) -> list[T]:
    """Every task's result, in the tasks' order, run by `executor_for(jobs, cluster,
    timeout)`. `on_done(index, result)` hears of each as it finishes (in whatever order
    they finish); a task that raises, or whose cluster worker keeps dying, gives
    `failed(task, error)`."""
    results: list[Any] = [None] * len(tasks)
    with executor_for(jobs, cluster, timeout) as executor:
        index_of = {executor.submit(task): index for index, task in enumerate(tasks)}
        for future in as_completed(index_of):
            index = index_of[future]
            error = future.exception()
            results[index] = future.result() if error is None else failed(tasks[index], error)
            on_done(index, results[index])
    return results


def launch_jobs(jobs: int, tasks: int, cluster: str | None) -> int:
    """What each of `tasks` jobs may run of its own kernel's launches at once: the `jobs`
    that the tasks leave free here (a check of one spec with --jobs 4 runs four launches at
    a time); one on a cluster, whose workers each run one task."""
    return 1 if cluster is not None else max(1, jobs // max(1, tasks))


def _no_workers(address: str, seconds: float) -> str:
    return (
        f"the Dask scheduler at {address} has no workers after {seconds:g} s: start some "
        f"with `dask worker {address}`"
    )


def _largest_memory_resource(client) -> float | None:
    """The largest `memory` resource a worker declares, or None unless every worker declares
    one (a task asking for a resource no worker has would wait forever)."""
    declared = [
        worker.get("resources", {}).get(MEMORY_RESOURCE)
        for worker in client.scheduler_info()["workers"].values()
    ]
    if not declared or any(amount is None for amount in declared):
        return None
    return max(declared)
