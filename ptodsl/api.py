"""`ptodsl.compile(text)`: the whole pipeline behind one call, for use inside Python."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ptodsl.emission.codegen import emit_pypto
from ptodsl.emission.reference import emit_reference
from ptodsl.frontend.diagnostics import Source
from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import Forward
from ptodsl.ir.plan import program_plan
from ptodsl.ir.target import PYPTO_0_2_0, Target
from ptodsl.pipeline import Lowered, lower
from ptodsl.runtime import settings as run_settings
from ptodsl.runtime.files import load_module, require_run_folders
from ptodsl.runtime.settings import DEFAULT_TIMEOUT_S, Settings
from ptodsl.tools.tuning_cache import DEFAULT_BUDGET, cached_tuning, ignore_entry

if TYPE_CHECKING:  # imported when called: checking and tuning pull in torch
    from ptodsl.checking.check import CheckReport
    from ptodsl.tools.tuning import TuneResult


class Compiled:
    """One compiled spec: generated sources, plan, and (imported on first use) modules."""

    def __init__(self, lowered: Lowered, plan_origin: str = "default plan"):
        self.lowered = lowered
        self.plan_origin = plan_origin  # which plan: default, tuned (from the cache), given
        self.name = lowered.checked.name
        self.filename = lowered.source.filename
        self.source = emit_pypto(lowered.forward, self.filename)
        self.reference_source = emit_reference(lowered.checked, self.filename)
        self.plan = program_plan(lowered.forward)

    def __repr__(self) -> str:
        kernels = self.lowered.kernels
        described = []
        for kernel in kernels:
            launches = kernel.launches
            count = 1 if launches is None else launches.total
            staging = len(kernel.program.staging) if kernel.program else 0
            runs = f"{count} launch{'es' if count > 1 else ''}"
            if staging:
                runs += f", each after {staging} staging launch{'es' if staging > 1 else ''}"
            described.append(runs if len(kernels) == 1 else f"{kernel.name}: {runs}")
        return f"<Compiled {self.name!r} from {self.filename}: {self.plan_origin}, " + (
            "; ".join(described) + ">"
        )

    @property
    def kernel(self) -> ir.Kernel:
        """The lowered IR that `source` was generated from (of a one-kernel program)."""
        return self.lowered.kernel

    @property
    def program(self) -> Forward:
        """The forward program `source` was generated from: its kernels, in call order."""
        return self.lowered.forward

    def in_eval_mode(self) -> Compiled:
        """The same generated module seen through its eval-mode program (a spec whose
        result depends on the module mode): what `check` compares in eval mode."""
        assert self.lowered.eval is not None, "the spec's result does not depend on the mode"
        other = copy.copy(self)
        other.__dict__.pop("reference", None)  # the cached training-mode reference
        other.lowered = self.lowered.eval
        other.reference_source = emit_reference(self.lowered.eval.checked, self.filename)
        other.plan = program_plan(self.lowered.eval.forward)
        return other

    @functools.cached_property
    def module(self) -> ModuleType:
        """The generated module, imported (its `ModelNew`, kernel factories and helpers)."""
        return load_module(self.source, self.name)

    @property
    def ModelNew(self) -> type:  # noqa: N802 - the name KernelBench harnesses use
        return self.module.ModelNew

    @functools.cached_property
    def reference(self) -> ModuleType:
        """The torch reference module: `reference(...)` and a KernelBench-style `Model`."""
        return load_module(self.reference_source, f"{self.name}_reference")


def lower_spec(
    source: Source,
    dims: Mapping[str, int] | None = None,
    target: Target = PYPTO_0_2_0,
    tuning: ir.Tuning | str | None = "cached",
    until: str | None = None,
) -> tuple[Lowered, str]:
    """The one driver behind `ptodsl.compile`, `ptodsl compile`, `check`, `coverage` and
    `tune`: the spec lowered with the plan they would all use, and which plan that is.
    `tuning`: "cached" uses the plan `ptodsl tune` stored for this spec if there is one,
    None the default plan, an `ir.Tuning` those plan choices (its `per_kernel` ones for
    single kernels of several, by name: a name the program lacks raises `UnknownKernels`,
    a ValueError)."""
    if not (tuning is None or tuning == "cached" or isinstance(tuning, ir.Tuning)):
        raise TypeError(f"tuning must be 'cached', None or an ir.Tuning, not {tuning!r}")
    for dim, size in (dims or {}).items():
        if type(size) is not int:  # a bool is an int to Python, not a size
            raise TypeError(f"dims[{dim!r}] must be an int, not {size!r}")
    origin = "default plan"
    cached = tuning == "cached"
    if cached:
        tuning = cached_tuning(source.text, dims, target)
        if tuning is not None:
            origin = f"tuned plan from the tuning cache ({tuning.describe()})"
    elif tuning is not None:
        origin = f"given plan choices ({tuning.describe()})"
    lowered = lower(source, dims, target, until=until, tuning=tuning)
    unknown = _unknown_kernels(lowered) if until is None else ""
    if unknown and cached:  # an edited entry: compile as if there were none
        ignore_entry(source.text, dims, target, f"it tunes {unknown}")
        return lower(source, dims, target, until=until), "default plan"
    if unknown:
        raise UnknownKernels(f"plan choices for {unknown}")
    return lowered, origin


class UnknownKernels(ValueError):
    """Plan choices name a kernel the program does not have: a typo, or a kernel's choice
    that the partition then judged too much for it, cutting the spec otherwise."""


def _unknown_kernels(lowered: Lowered) -> str:
    """The kernels the plan choices name that the program does not have, said, or ""."""
    kernels = {k.name for mode in (lowered, lowered.eval) if mode for k in mode.kernels}
    unknown = [name for name, _ in lowered.tuning.per_kernel if name not in kernels]
    if not unknown:
        return ""
    return f"kernels {unknown}, not among the program's {sorted(kernels)}"


def compile(  # noqa: A001 - the public verb
    text: str | os.PathLike[str],
    name: str | None = None,
    dims: Mapping[str, int] | None = None,
    target: Target | None = None,
    tuning: ir.Tuning | str | None = "cached",
) -> Compiled:
    """Compiles spec text; raises `ptodsl.SpecError` with rendered diagnostics on bad input.
    `dims` resizes declared dims, e.g. a scaled-down copy of a large spec for a quick check;
    `target` describes PyPTO's forms and limits (default: pypto 0.2.0's; tests shrink its
    limits to force loops). `tuning`: see `lower_spec`. `text` may also be a path
    (`pathlib.Path`) of a spec file, which `name` then defaults to."""
    target = PYPTO_0_2_0 if target is None else target
    return Compiled(*lower_spec(_source(text, name), dims, target, tuning))


def _source(text: str | os.PathLike[str], name: str | None) -> Source:
    """A spec given as its text or as a path (which `name` then defaults to)."""
    if isinstance(text, os.PathLike):
        path = Path(text)
        return Source(path.read_text(encoding="utf-8"), name or str(path))
    if not isinstance(text, str):
        raise TypeError(f"a spec is its text or a path, not {type(text).__name__}")
    return Source(text, name or "<spec>")


def check(
    compiled: Compiled,
    *,
    seed: int = 0,
    against: str | os.PathLike[str] | None = None,
    kernel_path: str | os.PathLike[str] | None = None,
    passes: str = "auto",
    timeout: float = DEFAULT_TIMEOUT_S,
    settings: Settings | None = None,
) -> CheckReport:
    """Runs `compiled` in pypto SIM and compares it with its torch reference on inputs and
    weights drawn from `seed`, or with `against` (a KernelBench problem file) with its own
    `Model` on its `get_inputs()`: the report `ptodsl check` prints (`report.ok`,
    `report.outputs`, `report.sim_time_us`). `kernel_path` checks that module (e.g. hand
    edited) instead; `passes` is pypto's verification ("auto", "all" or "graph").
    `settings`: the run configuration (`ptodsl.runtime.settings.Settings`: cache folder,
    ...), for this call and its workers; default: the environment's."""
    from ptodsl.checking.check import run_check

    with _settings(settings):
        require_run_folders()
        return run_check(
            compiled,
            seed=seed,
            against=None if against is None else Path(against),
            kernel_path=None if kernel_path is None else Path(kernel_path),
            passes=passes,
            timeout=timeout,
        )


def tune(
    text: str | os.PathLike[str],
    name: str | None = None,
    dims: Mapping[str, int] | None = None,
    *,
    budget: int = DEFAULT_BUDGET,
    check: bool = True,
    store: bool = True,
    settings: Settings | None = None,
) -> TuneResult:
    """Measures up to `budget` candidate plans of a spec (text or path) in pypto SIM and,
    with `store`, keeps the fastest that passes the check (with `check`) for `compile`, as
    `ptodsl tune` does: the result lists every plan measured. `settings`: as `check`'s (the
    tuning folder among them)."""
    from ptodsl.tools.tuning import tune as measure_plans

    with _settings(settings):
        require_run_folders(tuning=store)
        return measure_plans(_source(text, name), dims, budget=budget, check=check, store=store)


def _settings(chosen: Settings | None):
    """The run configuration of an API call: the one given, else the environment's, read
    once (a bad variable refused before anything runs)."""
    return run_settings.active(run_settings.read() if chosen is None else chosen)
