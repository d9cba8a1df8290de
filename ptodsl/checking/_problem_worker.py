"""Worker process for `ptodsl.checking.problems.run_problem`:
python -m ptodsl.checking._problem_worker DIR.

Runs a KernelBench-format problem file, which is the user's code: it may print, exit, hang
or return anything. The parent owns DIR and the time limit; this process imports the
problem, draws its inputs under the seed, builds its Model, loads the weights the parent
sent when they fit, runs forward in float64 and writes what it saw to DIR. Whatever the
problem's code does wrong is the call's fault (`ptodsl.runtime.calls`), naming the step that
did it.
"""

from __future__ import annotations

import copy
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ptodsl.checking import problems
from ptodsl.checking.convolutions import SampleBySample
from ptodsl.checking.draws import spread
from ptodsl.runtime import calls
from ptodsl.runtime.files import import_file


class ProblemFault(Exception):
    """The problem's own code failed or returned something ptodsl cannot compare."""


def answer(request: Mapping[str, Any], sent: dict[str, Any], folder: Path) -> dict[str, Any]:
    return run(request, sent["weights"], sent["inputs"], sent["buffers"])


def _call(what: str, function: Callable[[], Any]) -> Any:
    """Runs problem code; anything it raises, exits with or interrupts becomes a fault."""
    try:
        return function()
    except SystemExit as stop:
        raise ProblemFault(f"{what} called sys.exit({stop.code!r})") from None
    except BaseException as error:  # noqa: BLE001 - the user's code may raise anything
        frames = traceback.extract_tb(error.__traceback__)
        where = f" (line {frames[-1].lineno})" if frames else ""
        raise ProblemFault(f"{what} raised {type(error).__name__}: {error}{where}") from None


def _own(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor contiguous, in storage of its own size (saving a view saves its whole
    storage; a transposed view would reach pypto's goldens as it is, which pypto refuses);
    one that is so already is not copied (#66's golden is 7.2 GB)."""
    whole = tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    if whole and tensor.is_contiguous():
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


def _describe(value: Any) -> str:
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    article = "an" if name[0].lower() in "aeiou" else "a"
    return "None" if value is None else f"{article} {name}"


def _number(what: str, value: Any) -> float | int:
    if not isinstance(value, int | float):  # bools included: a flag such as return_indices
        raise ProblemFault(f"{what} is {_describe(value)}; ptodsl takes tensors, numbers and bools")
    if isinstance(value, int) and abs(value) > 2**53:
        raise ProblemFault(f"{what} is the integer {value}, too large for a kernel scalar")
    return value


def _init_value(what: str, value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_number(f"{what}[{i}]", item) for i, item in enumerate(value))
    return _number(what, value)


def _forward_argument(what: str, value: Any) -> Any:
    return value if isinstance(value, torch.Tensor) else _number(what, value)


def _outputs(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    raise ProblemFault(
        f"Model.forward returned {_describe(value)}; ptodsl compares a tensor or a tuple of "
        "tensors, as ModelNew returns"
    )


def _load(path: Path, constants: dict[str, str]) -> tuple[ModuleType, list[str]]:
    """The problem imported, with `--set`'s constants rewritten in its syntax tree first."""
    if not constants:
        return import_file(path, "ptodsl_problem"), []
    text = path.read_text(encoding="utf-8")
    tree, changed = problems.rewritten_problem(path, text, constants)
    module = ModuleType("ptodsl_problem")
    module.__file__ = str(path)
    sys.modules["ptodsl_problem"] = module
    exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the user's problem
    return module, changed


def _rescale(module: Any, sizes: dict[int, int]) -> list[str]:
    """Module-level int constants equal to a resized dim's size take its new size, and so
    do such ints inside a module-level tuple of ints (`bias_shape = (out_channels, 1, 1,
    1)`, built from a constant when the file was imported)."""
    scaled = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("__"):
            continue
        if type(value) is int and value in sizes:
            new = sizes[value]
        elif (
            type(value) is tuple
            and value
            and all(type(v) is int for v in value)
            and any(v in sizes for v in value)
        ):
            new = tuple(sizes.get(v, v) for v in value)
        else:
            continue
        setattr(module, name, new)
        scaled.append(f"{name} = {value} -> {new}")
    return scaled


def run(
    request: dict[str, Any],
    weights: list[torch.Tensor],
    draws: list[list[torch.Tensor] | None] | None = None,
    buffers: list[dict[str, torch.Tensor]] | None = None,
) -> dict[str, Any]:
    """What the problem gives under the request's seed; its Model runs forward on each of
    `draws`: get_inputs()'s (None), or a draw's tensors followed by get_inputs()'s
    numbers; in the request's mode, each from its own `buffers` (state_dict names)."""
    path = Path(request["problem"])
    module, scaled = _call("loading the problem", lambda: _load(path, request["constants"]))
    for name in ("get_inputs", "get_init_inputs", "Model"):
        if not callable(getattr(module, name, None)):
            raise ProblemFault(f"the problem defines no `{name}`")
    scaled += _rescale(module, {int(k): v for k, v in request["sizes"].items()})
    seed = request["seed"]
    torch.manual_seed(seed)
    init_values = list(_call("get_init_inputs()", module.get_init_inputs))
    given = list(_call("get_inputs()", module.get_inputs))
    init_values = [_init_value(f"get_init_inputs()[{i}]", v) for i, v in enumerate(init_values)]
    given = [_forward_argument(f"get_inputs()[{i}]", v) for i, v in enumerate(given)]
    numbers = [v for v in given if not isinstance(v, torch.Tensor)]
    runs = [
        given if drawn is None else [*drawn, *numbers]
        for drawn in ([None] if draws is None else draws)
    ]
    # A harness seeds again before it builds each model: the weights are the draws after it.
    torch.manual_seed(seed)
    model = _call("Model(*get_init_inputs())", lambda: module.Model(*init_values))
    if not isinstance(model, torch.nn.Module):
        raise ProblemFault(f"Model(...) built {_describe(model)}, not a torch.nn.Module")
    parameters = list(model.parameters())
    described = _described(model)
    state = _state(model)
    drop_in = None
    if request["model_new"] is not None:
        drop_in = _drop_in(Path(request["model_new"]), seed, init_values, model)
    fits = len(parameters) == len(weights) and all(
        p.shape == w.shape and p.dtype == w.dtype for p, w in zip(parameters, weights, strict=False)
    )
    expected = None
    scales = None
    moved: set[str] = set()
    counters: dict[str, int] = {}
    returns, dtypes, shapes = _result_form(model, given)
    if fits:
        scales = [spread(parameter.detach()) for parameter in parameters]
        with torch.no_grad():
            for parameter, weight, scale in zip(parameters, weights, scales, strict=True):
                parameter.copy_(weight * scale)
        model = model.double()
        model.train(request.get("training", True))
        seeds = request.get("forward_seeds") or [None] * len(runs)
        # every draw's forward starts from the state the Model was built with, the drawn
        # running statistics loaded over it
        initial = {name: value.clone() for name, value in model.named_buffers()}
        starts = [{**initial, **given} for given in buffers or [{}] * len(runs)]
        expected = [
            _forward_from(model, arguments, start, seed, request.get("updated", []), moved)
            for arguments, start, seed in zip(runs, starts, seeds, strict=True)
        ]
        counters = problems.step_counters(model)
    return {
        "init_values": init_values,
        "inputs": given,
        "parameters": described,
        "state": state,
        "expected": expected,
        "weight_scales": scales,
        "scaled": scaled,
        "drop_in": drop_in,
        "returns": returns,
        "dtypes": dtypes,
        "shapes": shapes,
        "moved": sorted(moved),
        "counters": counters,
    }


def _forward_from(
    model: torch.nn.Module,
    given: list[Any],
    buffers: dict[str, torch.Tensor],
    seed: int | None,
    updated: list[str],
    moved: set[str],
) -> list[torch.Tensor]:
    """The outputs of one forward from the draw's `buffers` values, torch seeded with
    `seed` just before it as ModelNew's run is (its dropout masks are then the same draws);
    then the `updated` buffers' new values. The buffers forward changed join `moved`. A
    tensor the spec carries (`state hidden`) is a plain attribute of the Model (VanillaRNN's
    `self.hidden = torch.randn(...)`): set before forward, read after it."""
    own = dict(model.named_buffers())
    for name, value in buffers.items():
        if name in own:
            with torch.no_grad():
                own[name].copy_(value)
        elif isinstance(getattr(model, name, None), torch.Tensor):
            setattr(model, name, value.double())
        else:
            raise ProblemFault(f"the Model has no buffer `{name}`, which the spec reads")
    before = {name: value.detach().clone() for name, value in own.items()}
    if seed is not None:
        torch.manual_seed(seed)
    outputs = _forward(model, given)
    moved.update(name for name, value in own.items() if not torch.equal(value, before[name]))
    after = [own[name] if name in own else getattr(model, name) for name in updated]
    return outputs + [_own(value.detach().clone()) for value in after]


def _forward(model: torch.nn.Module, given: list[Any]) -> list[torch.Tensor]:
    """The float64 model's outputs on `given`; integer and bool tensors (class targets,
    masks) keep their dtype, as in float32."""
    arguments = [
        v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in given
    ]
    with torch.no_grad(), SampleBySample():
        result = _call("Model.forward", lambda: model(*arguments))
    return [_own(t.detach()) for t in _outputs(result)]


def _result_form(
    model: torch.nn.Module, given: list[Any]
) -> tuple[str, list[str], list[tuple[int, ...]]]:
    """What the Model's forward returns at its own precision: "a tensor" or "a tuple of N
    tensors", each tensor's dtype and shape, found on torch's meta device (no arithmetic).
    A forward the meta device cannot run tells nothing: ("", [], [])."""
    try:
        meta = copy.deepcopy(model).to("meta")
        arguments = [v.to("meta") if isinstance(v, torch.Tensor) else v for v in given]
        with torch.no_grad():
            result = meta(*arguments)
        _outputs(result)  # a tensor or a tuple of tensors, as the float64 run needs
    except Exception:  # noqa: BLE001 - an op without a meta kernel: the float64 run decides
        return "", [], []
    tensors = [result] if isinstance(result, torch.Tensor) else list(result)
    dtypes, shapes = [str(v.dtype) for v in tensors], [tuple(v.shape) for v in tensors]
    return problems.describe_result(result), dtypes, shapes


def _described(model: torch.nn.Module) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "shape": tuple(p.shape),
            "dtype": str(p.dtype),
            "initial": p.detach().clone(),
        }
        for name, p in model.named_parameters()
    ]


def _state(model: torch.nn.Module) -> list[dict[str, Any]]:
    """state_dict's entries: names, shapes and dtypes (parameters and buffers)."""
    return [
        {"name": name, "shape": tuple(value.shape), "dtype": str(value.dtype).split(".")[-1]}
        for name, value in model.state_dict().items()
    ]


def _drop_in(
    path: Path, seed: int, init_values: list[Any], model: torch.nn.Module
) -> dict[str, Any]:
    """ModelNew built as the harness builds it: seeded again, with the Model's arguments;
    and whether each loads the other's state_dict strictly."""
    try:
        model_new = import_file(path, "ptodsl_model_new").ModelNew
        torch.manual_seed(seed)
        built = model_new(*init_values)
    except Exception as error:  # noqa: BLE001 - reported as the check's failure
        return {"parameters": [], "error": f"{type(error).__name__}: {error}"}
    loads = []
    for loader, source, what in ((built, model, "ModelNew"), (model, built, "Model")):
        try:
            copy.deepcopy(loader).load_state_dict(source.state_dict(), strict=True)
        except Exception as error:  # noqa: BLE001 - reported as the check's failure
            other = "Model" if what == "ModelNew" else "ModelNew"
            loads.append(f"{what}.load_state_dict({other}().state_dict(), strict=True): {error}")
    # a constant the Model registers (GPT's causal mask) must be built alike: the check
    # gives both models the spec's value afterwards, which would hide a wrong one
    built_buffers = dict(built.named_buffers())
    for name, value in model.named_buffers():
        mine = built_buffers.get(name)
        if mine is not None and mine.shape == value.shape and not torch.equal(mine, value):
            loads.append(f"buffer `{name}`: ModelNew builds it with other values than the Model")
    return {"parameters": _described(built), "error": None, "loads": loads}


if __name__ == "__main__":
    sys.exit(calls.serve(answer, faults=(ProblemFault,)))
