"""Run a KernelBench-format problem file in a worker process, under a time limit.

A problem file is the user's code: it may print (which must not reach `--json` output),
call `sys.exit`, hang, crash or return something that is not a tensor. None of that may end
or stall ptodsl: `run_problem` either returns what the problem computed or raises
`ProblemError` with a message that names the file.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from ptodsl.frontend.diagnostics import visible
from ptodsl.ir import nodes as ir
from ptodsl.ir.modules import StateEntry
from ptodsl.runtime import calls
from ptodsl.runtime.files import read_text
from ptodsl.runtime.scratch import make_scratch
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S
from ptodsl.runtime.workers import WorkerStopped, WorkerTimeout, describe_exit, log_lines

MODEL_NEW_FILE = "model_new.py"
# A problem file is a few KiB of Python (KernelBench's largest is under 4 KiB).
MAX_PROBLEM_BYTES = 1 << 20
_LOG_TAIL_LINES = 8
_LOG_NOISE = ("Failed to initialize NumPy", "_conversion_method_template")


def describe_result(result: Any) -> str:
    """What a forward returned, as the drop-in contract compares it: "a tensor", "a tuple
    of 2 tensors", "a list of 1 tensor"."""
    if isinstance(result, torch.Tensor):
        return "a tensor"
    kind = type(result).__name__
    if not isinstance(result, list | tuple):
        return f"a {kind}"
    return f"a {kind} of {len(result)} tensor{'s' * (len(result) != 1)}"


class ProblemError(ValueError):
    """The problem file could not be run, or gave something ptodsl cannot compare."""


@attrs.frozen
class Resize:
    """How a problem file is resized before it runs: `sizes` (`--dim`) maps a dim's size to
    its new size, and module-level int constants of that value take it; `constants`
    (`--set NAME=VALUE`, VALUE a Python literal) rewrites every top-level assignment of NAME
    in the file's syntax tree, so that whatever is computed from it follows."""

    sizes: Mapping[int, int] = attrs.field(factory=dict)
    constants: Mapping[str, str] = attrs.field(factory=dict)


def parse_setting(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (`--set`): NAME a Python name or `Class.NAME`, VALUE a Python literal."""
    name, equals, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not equals or not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"expected NAME=VALUE (a problem file's constant), got {text!r}")
    literal_value(name, value)
    return name, value


def literal_value(name: str, value: str) -> object:
    """`--set`'s VALUE: a number, a bool, a string or a tuple or list of those."""
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise ValueError(
            f"--set {name}={value}: the value is not a Python literal (a number, a tuple)"
        ) from None
    return parsed


def rewritten_problem(
    path: Path, text: str, constants: Mapping[str, str]
) -> tuple[ast.Module, list[str]]:
    """The problem's syntax tree with every top-level assignment of each NAME in `constants`
    (`NAME = ...`, `a, NAME = ..., ...`, `NAME: int = ...`; and in the body of a top-level
    class `C`, for `C.NAME`) assigning the new value, and what changed ("batch_size = 16 ->
    2"). Line numbers are kept, so the problem's own errors still point at its lines. A NAME
    the file never assigns is an error naming the constants it has."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise ProblemError(f"problem {path}:{error.lineno}: {error.msg}") from None
    changed: list[str] = []
    for name, value in constants.items():
        owner, _, constant = name.rpartition(".")
        body = tree.body
        if owner:
            classes = [c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == owner]
            body = [statement for c in classes for statement in c.body]
        slots = [slot for statement in body for slot in _assignments(statement, constant)]
        if not slots:
            known = sorted({n for statement in tree.body for n, _ in _assigned(statement) if n})
            raise ProblemError(
                f"--set {name}: problem {path} assigns no top-level `{name}`; its constants: "
                f"{', '.join(known) or 'none'}"
            )
        for old, replace in slots:
            replace(ast.copy_location(ast.parse(value, mode="eval").body, old))
            changed.append(f"{name} = {ast.unparse(old)} -> {value}")
    ast.fix_missing_locations(tree)
    return tree, changed


def _assignments(statement: ast.stmt, name: str) -> list[tuple[ast.expr, Callable]]:
    """Where `statement` assigns `name`: the value's node, and how to replace it."""
    return [(old, replace) for target, (old, replace) in _assigned(statement) if target == name]


def _assigned(statement: ast.stmt) -> list[tuple[str, tuple[ast.expr, Callable]]]:
    """The names a plain assignment binds, each with its value's node and a replacer;
    unpacking (`d, h, w = 16, 32, 32`) binds each name to its element."""
    if isinstance(statement, ast.AnnAssign):
        if not isinstance(statement.target, ast.Name) or statement.value is None:
            return []
        return [(statement.target.id, (statement.value, _setter(statement, "value")))]
    if not isinstance(statement, ast.Assign):
        return []
    found = []
    for target in statement.targets:
        if isinstance(target, ast.Name):
            found.append((target.id, (statement.value, _setter(statement, "value"))))
        elif (
            isinstance(target, ast.Tuple | ast.List)
            and isinstance(statement.value, ast.Tuple | ast.List)
            and len(target.elts) == len(statement.value.elts)
        ):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    elements = statement.value.elts
                    found.append((element.id, (elements[index], _item_setter(elements, index))))
    return found


def _setter(node: ast.AST, field: str) -> Callable[[ast.expr], None]:
    return lambda new: setattr(node, field, new)


def _item_setter(items: list[ast.expr], index: int) -> Callable[[ast.expr], None]:
    return lambda new: items.__setitem__(index, new)


@attrs.frozen(eq=False)
class Parameter:
    name: str  # in `named_parameters()`, e.g. gemm.weight
    shape: tuple[int, ...]
    dtype: str  # torch's name, e.g. torch.float32
    initial: torch.Tensor


@attrs.frozen(eq=False)
class DropIn:
    """ModelNew built as a harness builds it, seeded as the Model was: its parameters in
    `parameters()` order, or why it could not be built."""

    parameters: list[Parameter]
    error: str | None = None
    # why ModelNew does not load the Model's state_dict strictly, or the Model ModelNew's
    loads: list[str] = attrs.Factory(list)


@attrs.frozen(eq=False)
class ProblemRun:
    """What the problem's code gave under the seed: `Model(*init_values)`, `inputs` being
    get_inputs()'s (tensors and numbers in the problem's order). `expected` holds forward's
    outputs in float64 with `weights` loaded, one list per draw asked for (`run_problem`'s
    `inputs`), or is None when the weights did not fit its parameters."""

    init_values: list[Any]
    inputs: list[torch.Tensor | float | int]
    parameters: list[Parameter]
    expected: list[list[torch.Tensor]] | None
    scaled: list[str]  # the module-level constants that were resized
    state: list[StateEntry] = attrs.Factory(list)  # the Model's state_dict, in its order
    drop_in: DropIn | None = None  # when a ModelNew module was given
    # what each given weight was multiplied by (the spread of the parameter's own initial
    # values), in `parameters()` order; None when the weights did not fit
    weight_scales: list[float] | None = None
    # what forward returns at the Model's own precision: "a tensor", "a tuple of 2
    # tensors" ("" when torch's meta device could not tell), and each output's dtype
    returns: str = ""
    dtypes: list[str] = attrs.Factory(list)
    shapes: list[tuple[int, ...]] = attrs.Factory(list)  # forward's outputs', as dtypes
    # the buffers forward changed (state_dict names): training mode's running statistics
    moved: list[str] = attrs.Factory(list)
    counters: dict[str, int] = attrs.Factory(dict)  # `step_counters` after each forward


def step_counters(model: torch.nn.Module) -> dict[str, int]:
    """Each `num_batches_tracked` buffer's value (a BatchNorm's training-mode steps)."""
    return {
        name: int(value)
        for name, value in model.named_buffers()
        if name.split(".")[-1] == "num_batches_tracked"
    }


def problem_text(path: Path) -> str:
    """A problem file's text, read as a regular file of at most MAX_PROBLEM_BYTES: a FIFO,
    a device (`/dev/zero` grew to 2.6 GB) or a huge file is a ProblemError at once."""
    try:
        return read_text(path, MAX_PROBLEM_BYTES)
    except (OSError, ValueError) as error:  # each names the path
        raise ProblemError(f"problem {visible(str(error))}") from None


def run_problem(
    path: Path,
    seed: int,
    weights: Sequence[torch.Tensor],
    resize: Resize | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    model_new: str | None = None,
    inputs: Sequence[Sequence[torch.Tensor] | None] = (None,),
    mode: ir.Mode | None = None,
    buffers: Sequence[Mapping[str, torch.Tensor]] | None = None,
    forward_seeds: Sequence[int] | None = None,
    updated: Sequence[str] = (),
) -> ProblemRun:
    """`resize` resizes the problem before `get_inputs()` and `get_init_inputs()` run
    (`Resize`). `model_new`: the
    text of a module defining ModelNew, built after the Model under the same seed (as a
    harness builds both) to compare their initial parameters. `inputs`: the draws to run
    forward on, each None (get_inputs()'s) or the tensor arguments of another of the
    check's draws (get_inputs()'s numbers follow them). A spec whose result depends on the
    module mode: the Model runs in `mode`, its `buffers` (state_dict names) set to the
    draw's values before each forward, torch seeded with that draw's `forward_seeds` entry just
    before it (dropout draws from it); each draw's outputs are followed by the `updated`
    buffers' values after it."""
    resize = resize or Resize()
    text = problem_text(path)  # its worker reads it again: a FIFO would block it, unbounded
    if resize.constants:  # a NAME the file does not assign is the user's error, said here
        rewritten_problem(path, text, resize.constants)
    work_dir = make_scratch("problem")
    try:
        request = {
            "problem": str(path.resolve()),
            "seed": seed,
            "sizes": {str(k): v for k, v in resize.sizes.items()},
            "constants": dict(resize.constants),
            "model_new": None,
            "training": mode is not ir.Mode.EVAL,
            "forward_seeds": None if forward_seeds is None else list(forward_seeds),
            "updated": list(updated),
        }
        if model_new is not None:
            request["model_new"] = str(work_dir / MODEL_NEW_FILE)
            (work_dir / MODEL_NEW_FILE).write_text(model_new, encoding="utf-8")
        sent = {
            "weights": [w.detach().cpu() for w in weights],
            "inputs": [None if d is None else [_detached(v) for v in d] for d in inputs],
            "buffers": [{name: _detached(v) for name, v in b.items()} for b in buffers or ()],
        }
        calls.prepare(work_dir, request, sent)
        try:
            answer = calls.call("ptodsl.checking._problem_worker", work_dir, timeout=timeout)
        except WorkerStopped as error:
            hint = " (--timeout sets the limit)" if isinstance(error, WorkerTimeout) else ""
            raise ProblemError(f"problem {path}: {error}{hint}") from None
        return _result(answer, path)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _detached(value: Any) -> Any:
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _result(answer: calls.Answer, path: Path) -> ProblemRun:
    if answer.fault is not None:
        raise ProblemError(f"problem {path}: {answer.fault}")
    if not answer.replied:
        lines = log_lines(answer.folder, _LOG_NOISE)[-_LOG_TAIL_LINES:]
        tail = "\n  ".join(["", *lines]) if lines else ""
        raise ProblemError(
            f"problem {path}: its process {describe_exit(answer.status)} before it gave "
            f"its Model's output{tail}"
        )
    # mapped: the golden of a large output (#66's float64 7.2 GB) stays in the page cache
    # after its folder is removed
    result = answer.reply()
    return ProblemRun(
        init_values=result["init_values"],
        inputs=result["inputs"],
        parameters=[Parameter(**p) for p in result["parameters"]],
        expected=result["expected"],
        scaled=result["scaled"],
        weight_scales=result["weight_scales"],
        returns=result["returns"],
        dtypes=result["dtypes"],
        shapes=result["shapes"],
        moved=result["moved"],
        counters=result["counters"],
        state=[StateEntry(**entry) for entry in result["state"]],
        drop_in=None
        if result["drop_in"] is None
        else DropIn(
            [Parameter(**p) for p in result["drop_in"]["parameters"]],
            result["drop_in"]["error"],
            result["drop_in"].get("loads", []),
        ),
    )
