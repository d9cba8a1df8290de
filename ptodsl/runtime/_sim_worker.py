"""Worker process for `ptodsl.runtime.simulator.run_model`:
python -m ptodsl.runtime._sim_worker CALL_DIR.

Runs one generated kernel module in pypto's SIM mode. The parent owns the call's folder
(`ptodsl.runtime.calls`) and the environment (output directories, quiet PATH); this process
only answers the call: the model's outputs, or what went wrong in a line or two.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import re
import sys
import traceback
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pypto
import torch

from ptodsl.checking.problems import describe_result, step_counters
from ptodsl.runtime import calls, interpret, simulator

_BACKTRACE_FRAME = re.compile(r"\+0x[0-9a-f]+\) \[0x[0-9a-f]+\]")
_GENERIC_CODE = re.compile(r"^\s*Errcode: FFFFFF!\s*$")


def main() -> int:
    # After importing pypto, whose own SIGSEGV handler prints nothing: a crashing kernel
    # then leaves its Python stack in the log (pypto's handler still runs afterwards).
    faulthandler.enable()
    # Whatever the generated module raises (or exits with) is the kernel's failure, said.
    return calls.serve(simulate, faults=(BaseException,), describe=describe_error)


def simulate(request: Mapping[str, Any], payload: dict[str, Any], folder: Path) -> dict:
    """The reply: the outputs and, for a model, the form of its forward (`_FORM`)."""
    module_path = Path(request["module_path"])
    if request["load"] == "exec":
        module = _exec_text(module_path)
    else:
        module = _import_file(module_path)
    _configure_pypto(request["verify"])
    if "factory" in request:
        return {"outputs": _launch_kernel(module, request, payload), "form": None}
    if payload["goldens"] is not None:
        _set_goldens(request["kernel_inputs"], payload["goldens"])
    model = module.ModelNew(**payload["init_kwargs"])
    if payload["state"]:
        # The weights are every parameter; a module's buffers (BatchNorm's running
        # statistics) are loaded when the spec reads them, else keep their initial values;
        # a carried tensor (`state`) is a buffer outside state_dict, set in place.
        buffers = dict(model.named_buffers())
        persistent = model.state_dict()
        carried = {n: v for n, v in payload["state"].items() if n not in persistent}
        state = {n: v for n, v in payload["state"].items() if n not in carried}
        missing, unexpected = model.load_state_dict(state, strict=False)
        parameters = dict(model.named_parameters())
        unloaded = [name for name in missing if name in parameters]
        unknown = [name for name in carried if name not in buffers]
        assert not (unexpected or unloaded or unknown), (
            f"state {unexpected + unknown} does not fit {unloaded}"
        )
        with torch.no_grad():
            for name, value in carried.items():
                buffers[name].copy_(value)
    model.train(payload["training"])
    if payload["forward_seed"] is not None:
        torch.manual_seed(payload["forward_seed"])  # the problem's run draws dropout so
    with torch.no_grad():
        result = model(*payload["inputs"])
        interpret.finish_launches()  # launches in flight write the outputs when they end
    # The drop-in contract: what forward returned, and whether it wrote to its inputs (the
    # payload file maps afresh: the payload's own pages are private copies).
    sent = torch.load(folder / calls.PAYLOAD_FILE, weights_only=True, mmap=True)
    changed = [
        index
        for index, (before, after) in enumerate(zip(sent["inputs"], payload["inputs"], strict=True))
        if isinstance(before, torch.Tensor) and not torch.equal(before, after)
    ]
    buffers = dict(model.named_buffers())
    form = {
        "returns": describe_result(result),
        "changed_inputs": changed,
        "counters": step_counters(model),
    }
    # training mode's new running statistics, as the problem's Model's are compared
    updated = [buffers[name].detach().clone() for name in payload["updated"]]
    return {"outputs": [_compact(t.detach()) for t in _as_list(result)] + updated, "form": form}


def _launch_kernel(module: Any, request: dict[str, Any], payload: dict[str, Any]) -> list:
    """One launch of a kernel factory's kernel; the outputs it writes are fresh buffers (the
    payload's own are mapped from the request file)."""
    count = request["outputs"]
    inputs = payload["inputs"][:-count]
    outputs = [torch.empty_like(t) for t in payload["inputs"][-count:]]
    kernel = getattr(module, request["factory"])(*payload["arguments"])
    kernel(*inputs, *outputs)
    return outputs


def _compact(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor itself when it owns exactly its storage (torch.save writes whole storages),
    else a copy: a second 1 GB output buffer for a 16384 x 16384 kernel is avoided."""
    owns_storage = tensor.is_contiguous() and tensor.untyped_storage().nbytes() == (
        tensor.numel() * tensor.element_size()
    )
    return tensor if owns_storage else tensor.clone()


def _import_file(path: Path) -> ModuleType:
    # A unique name keeps the generated module clear of anything already imported.
    name = f"{path.stem}_{uuid.uuid4().hex[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _exec_text(path: Path) -> SimpleNamespace:
    """What KernelBench's loader does with an answer: exec() its text in a fresh namespace."""
    context: dict[str, Any] = {}
    exec(compile(path.read_text(encoding="utf-8"), "<string>", "exec", dont_inherit=True), context)
    return SimpleNamespace(**context)


def _configure_pypto(verify: str) -> None:
    simulator.install_verify_fix()
    if verify == "graph":
        # An empty filter checks the tensor graph only; later passes are not re-run.
        pypto.set_verify_options(enable_pass_verify=True, pass_verify_pass_filter=[])
    elif verify == "all":
        pypto.set_verify_options(enable_pass_verify=True)


def _set_goldens(kernel_inputs: int, goldens: list[torch.Tensor]) -> None:
    pypto.set_verify_golden_data(goldens=[None] * kernel_inputs + goldens)


def _as_list(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    return list(result)


def describe_error(error: BaseException, request: Mapping[str, Any]) -> str:
    """One line for the error plus, when known, the generated module's line that caused it."""
    module_path = Path(request["module_path"])
    message = " ".join(_meaningful_lines(str(error)))
    headline = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frame = _innermost_frame_in(error, module_path)
    if frame is None:
        return headline
    return f"{headline}\n  at {module_path.name}:{frame.lineno} in {frame.name}: {frame.line}"


def _meaningful_lines(message: str) -> list[str]:
    # pypto appends a C++ backtrace and a generic error code to its messages.
    return [
        line.strip()
        for line in message.splitlines()
        if line.strip() and not _BACKTRACE_FRAME.search(line) and not _GENERIC_CODE.match(line)
    ]


def _innermost_frame_in(error: BaseException, module_path: Path) -> traceback.FrameSummary | None:
    found = None
    chained: BaseException | None = error
    while chained is not None:  # outermost first, so the innermost match wins
        frames = [
            frame
            for frame in traceback.extract_tb(chained.__traceback__)
            if Path(frame.filename) == module_path
        ]
        found = frames[-1] if frames else found
        chained = chained.__cause__ or chained.__context__
    return found


if __name__ == "__main__":
    sys.exit(main())
