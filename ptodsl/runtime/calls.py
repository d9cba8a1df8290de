"""The one request/response protocol between ptodsl and its worker modules (the simulator's,
the problem runner's): a call is a folder the caller owns, holding

- `request.json`: what to do, in JSON;
- `payload.pt`: the tensors and values it needs (`torch.save`), mapped by the worker;
- `reply.pt`: what the worker answers, written only when it completed;
- `fault.txt`: instead of a reply, what went wrong, said by the worker in a line or two;
- `worker.log`: everything the worker printed.

The caller writes the first two (`prepare`) and runs the worker (`call`, through
`ptodsl.runtime.workers.run_worker`: its timeout, memory limit and stall detection); the
worker module's `main` is `serve(handle, ...)`.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from ptodsl.runtime import memory, workers

REQUEST_FILE = "request.json"
PAYLOAD_FILE = "payload.pt"
REPLY_FILE = "reply.pt"
FAULT_FILE = "fault.txt"


def prepare(folder: Path, request: Mapping[str, Any], payload: Any) -> None:
    """Writes the call's request and payload into `folder`."""
    (folder / REQUEST_FILE).write_text(json.dumps(request))
    torch.save(payload, folder / PAYLOAD_FILE)


@attrs.frozen
class Answer:
    """How the worker ended: its exit `status`, the `fault` it described (None if it said
    none), and its reply when it gave one (`reply()`)."""

    folder: Path
    status: int
    fault: str | None

    @property
    def replied(self) -> bool:
        return self.status == 0 and self.fault is None and (self.folder / REPLY_FILE).exists()

    def reply(self) -> Any:
        """The reply, mapped rather than read: a large one stays in the page cache, which the
        kernel may evict, rather than in this process's memory."""
        return torch.load(self.folder / REPLY_FILE, weights_only=True, mmap=True)


def call(
    module: str,
    folder: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    stall: workers.Stall | None = None,
    on_poll: Callable[[], None] | None = None,
) -> Answer:
    """Runs worker `module` on the call prepared in `folder`; raises `WorkerStopped` when
    the worker was stopped (its time, its memory: what the machine had available as it
    started, less a margin; a stall). Workers end without the interpreter's teardown: their
    reply is complete when `serve` returns."""
    status = workers.run_worker(
        module,
        folder,
        timeout=timeout,
        env=env,
        memory_limit=memory.budget(),
        stall=stall,
        on_poll=on_poll,
        exit_fast=True,
    )
    fault_file = folder / FAULT_FILE
    fault = fault_file.read_text(errors="replace").strip() if fault_file.exists() else None
    return Answer(folder, status, fault)


def serve(
    handle: Callable[[Mapping[str, Any], Any, Path], Any],
    *,
    faults: tuple[type[BaseException], ...],
    describe: Callable[[BaseException, Mapping[str, Any]], str] = lambda error, request: str(error),
) -> int:
    """A worker module's main: answers the call in the folder given as its argument with
    `handle(request, payload, folder)`. An error among `faults` is described in the fault
    file (`describe(error, request)`) and its traceback printed to the log: status 1. Any
    other error is a bug of the worker's own, left to crash it (status 1, its traceback in
    the log, no fault said). The worker ends when the process that asked for it does."""
    workers.exit_with_parent()
    (folder,) = (Path(argument) for argument in sys.argv[1:])
    request = json.loads((folder / REQUEST_FILE).read_text())
    payload = torch.load(folder / PAYLOAD_FILE, weights_only=True, mmap=True)
    try:
        reply = handle(request, payload, folder)
    except faults as error:
        traceback.print_exc()
        (folder / FAULT_FILE).write_text(describe(error, request))
        return 1
    torch.save(reply, folder / REPLY_FILE)
    return 0
