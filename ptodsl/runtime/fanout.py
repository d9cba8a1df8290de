"""Independent simulator jobs (`coverage`'s problems, `tune`'s plans, `check`'s specs) run one
after another, on N local threads, or on a Dask cluster, with the same results in the same
order whichever way they ran.

Each job already runs its simulations in worker processes of its own, so local fan-out needs
threads only; what it must not do is start two jobs that cannot fit in memory together
(verifying the largest problems takes up to 20 GB). Every `Task` carries its memory estimate
(`ptodsl.ir.sim_memory`'s, as `check` makes it): a job starts when its estimate fits in what the
machine had available at the start less what the running jobs were given, and a job bigger
than all of that runs alone.

On a cluster (Dask distributed: `pip install ptodsl[cluster]`) a task is a module-level
function and its arguments, which carry spec text and plan choices, never file paths. The
estimate becomes the task's need of the workers' `memory` resource (`dask worker ADDRESS
--resources memory=20e9`), so the scheduler keeps the same promise per worker; with
workers that do not declare one it is not asked for. A task whose worker dies is run again
on another (Dask's `allowed-failures`), and a task that cannot complete becomes its own
failing result (`failed`), never a lost table.
"""

from __future__ import annotations

import importlib
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs

from ptodsl.runtime import settings
from ptodsl.runtime.settings import CLUSTER_VARIABLE
from ptodsl.runtime.workers import memory_limit, stop_all_workers

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


def run_tasks(
    tasks: Sequence[Task[T]],
    *,
    failed: Callable[[Task[T], BaseException], T],
    jobs: int = 1,
    cluster: str | None = None,
    on_done: Callable[[int, T], None] = lambda index, result: None,
    timeout: float | None = None,
) -> list[T]:
    """Every task's result, in the tasks' order. `jobs` tasks run at a time on this machine,
    or, with `cluster` (a Dask scheduler's address), as many as its workers take.
    `on_done(index, result)` hears of each as it finishes (in whatever order they finish);
    a task that raises, or whose cluster worker keeps dying, gives `failed(task, error)`.
    On a cluster, `timeout` (the command's --timeout; at most a minute) bounds each wait for
    a worker: at the start (a ClusterError) and whenever every worker has gone (the tasks
    not yet done fail)."""
    if cluster is not None:
        return _on_cluster(tasks, cluster, failed, on_done, timeout)
    if jobs == 1:
        return _serially(tasks, failed, on_done)
    return _on_threads(tasks, jobs, failed, on_done)


def launch_jobs(jobs: int, tasks: int, cluster: str | None) -> int:
    """What each of `tasks` jobs may run of its own kernel's launches at once: the `jobs`
    that the tasks leave free here (a check of one spec with --jobs 4 runs four launches at
    a time); one on a cluster, whose workers each run one task."""
    return 1 if cluster is not None else max(1, jobs // max(1, tasks))


def _outcome(task: Task[T], failed: Callable[[Task[T], BaseException], T]) -> T:
    try:
        return task.function(*task.arguments)
    except Exception as error:  # noqa: BLE001 - one job's failure is its own result
        return failed(task, error)


def _serially(tasks, failed, on_done) -> list:
    results = []
    for index, task in enumerate(tasks):
        results.append(_outcome(task, failed))
        on_done(index, results[-1])
    return results


class MemoryGate:
    """Admits jobs while their estimates fit in `budget` bytes together; a job that does not
    fit even alone is admitted when nothing else runs."""

    def __init__(self, budget: float):
        self.free = budget
        self.running = 0
        self.closed = False
        self.condition = threading.Condition()

    def enter(self, need: float) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.closed or self.running == 0 or need <= self.free)
            if self.closed:
                raise RuntimeError("the run was stopped")
            self.free -= need
            self.running += 1

    def leave(self, need: float) -> None:
        with self.condition:
            self.free += need
            self.running -= 1
            self.condition.notify_all()

    def close(self) -> None:
        with self.condition:
            self.closed = True
            self.condition.notify_all()


def _on_threads(tasks, jobs: int, failed, on_done) -> list:
    gate = MemoryGate(memory_limit())

    def admitted(task: Task) -> Any:
        gate.enter(task.memory)
        try:
            return _outcome(task, failed)
        finally:
            gate.leave(task.memory)

    results: list[Any] = [None] * len(tasks)
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ptodsl-job")
    try:
        index_of = {pool.submit(admitted, task): index for index, task in enumerate(tasks)}
        pending = set(index_of)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=index_of.__getitem__):
                index = index_of[future]
                results[index] = future.result()
                on_done(index, results[index])
    except BaseException:
        # Ctrl-C or SIGTERM: jobs waiting to start never do, running ones lose their workers.
        gate.close()
        stop_all_workers()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def _on_cluster(tasks, address: str, failed, on_done, timeout: float | None) -> list:
    try:
        from distributed import Client
        from distributed import wait as wait_for
    except ImportError:
        raise ClusterError(
            "--cluster needs Dask distributed: pip install 'ptodsl[cluster]'"
        ) from None
    patience = (
        CLUSTER_WORKERS_TIMEOUT_S if timeout is None else min(timeout, CLUSTER_WORKERS_TIMEOUT_S)
    )
    try:
        client = Client(address, timeout=patience)
    except OSError as error:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {error}") from None
    with client:
        try:
            client.wait_for_workers(1, timeout=patience)
        except TimeoutError:
            raise ClusterError(_no_workers(address, patience)) from None
        largest = _largest_memory_resource(client)
        run = uuid.uuid4().hex  # Dask keeps results by key: two runs never share one
        futures = [
            client.submit(
                task.function,
                *task.arguments,
                key=f"ptodsl-{run}-{index}",
                pure=False,
                resources=None if largest is None else {MEMORY_RESOURCE: min(task.memory, largest)},
            )
            for index, task in enumerate(tasks)
        ]
        index_of = {future.key: index for index, future in enumerate(futures)}
        results: list[Any] = [None] * len(tasks)
        pending = set(futures)
        while pending:
            try:
                done, gone = wait_for(pending, patience, "FIRST_COMPLETED").done, None
            except TimeoutError:  # still running, unless the workers have all gone
                try:
                    client.wait_for_workers(1, timeout=patience)
                    continue
                except TimeoutError:
                    done, gone = set(pending), ClusterError(_no_workers(address, patience))
            pending -= done
            for future in sorted(done, key=lambda future: index_of[future.key]):
                index = index_of[future.key]
                if gone is not None:
                    future.cancel()
                results[index] = _cluster_result(future, tasks[index], failed, gone)
                on_done(index, results[index])
    return results


def _cluster_result(future, task: Task[T], failed, gone: Exception | None) -> T:
    """The task's result, or its failure: its own error (KilledWorker too), or `gone`."""
    if gone is not None:
        return failed(task, gone)
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - one job's failure is its own result
        return failed(task, error)


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
