"""`ptodsl.compile(text)`: the whole pipeline behind one call, for use inside Python."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from ptodsl import ir
from ptodsl.codegen import emit_pypto
from ptodsl.diagnostics import Source
from ptodsl.pipeline import Lowered, lower
from ptodsl.plan import plan_of
from ptodsl.reference import emit_reference
from ptodsl.target import PYPTO_0_2_0, Target
from ptodsl.tuning import cached_tuning


def cache_dir() -> Path:
    """Where ptodsl keeps what it builds: `PTODSL_CACHE_DIR`, else ~/.cache/ptodsl."""
    configured = os.environ.get("PTODSL_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "ptodsl"


def write_atomically(path: Path, text: str) -> None:
    """Writes through a temporary file in the same folder, then renames: readers never see a
    half-written file, and a failure leaves nothing behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_module(source: str, stem: str) -> ModuleType:
    """Imports generated source from a real file (PyPTO reads kernel source with `inspect`).
    Files are content-addressed, so the same source is written once and imported once."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    module_name = f"ptodsl_generated_{stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = cache_dir() / "modules" / digest / f"{stem}.py"
    if not path.exists() or path.read_text(encoding="utf-8") != source:
        write_atomically(path, source)
    return import_file(path, module_name)


def import_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


class Compiled:
    """One compiled spec: generated sources, plan, and (imported on first use) modules."""

    def __init__(self, lowered: Lowered, plan_origin: str = "default plan"):
        self.lowered = lowered
        self.plan_origin = plan_origin  # which plan: default, tuned (from the cache), given
        self.name = lowered.kernel.name
        self.filename = lowered.source.filename
        self.source = emit_pypto(lowered.kernel, self.filename)
        self.reference_source = emit_reference(lowered.checked, self.filename)
        self.plan = plan_of(lowered.kernel)

    @property
    def kernel(self) -> ir.Kernel:
        """The lowered IR that `source` was generated from."""
        return self.lowered.kernel

    @functools.cached_property
    def module(self) -> ModuleType:
        return load_module(self.source, self.name)

    @property
    def ModelNew(self) -> type:  # noqa: N802 - the name KernelBench harnesses use
        return self.module.ModelNew

    @functools.cached_property
    def reference(self) -> ModuleType:
        """The torch reference module: `reference(...)` and a KernelBench-style `Model`."""
        return load_module(self.reference_source, f"{self.name}_reference")


def compile(  # noqa: A001 - the public verb
    text: str,
    name: str = "<spec>",
    dims: Mapping[str, int] | None = None,
    target: Target = PYPTO_0_2_0,
    tuning: ir.Tuning | str | None = "cached",
) -> Compiled:
    """Compiles spec text; raises `ptodsl.SpecError` with rendered diagnostics on bad input.
    `dims` resizes declared dims, e.g. a scaled-down copy of a large spec for a quick check;
    `target` describes PyPTO's forms and limits (tests shrink its limits to force loops).
    `tuning`: "cached" uses the plan `ptodsl tune` stored for this spec if there is one,
    None the default plan, an `ir.Tuning` those plan choices."""
    origin = "default plan"
    if tuning == "cached":
        tuning = cached_tuning(text, dims, target)
        if tuning is not None:
            origin = f"tuned plan from the tuning cache ({tuning.describe()})"
    elif tuning is not None:
        origin = f"given plan choices ({tuning.describe()})"
    assert tuning is None or isinstance(tuning, ir.Tuning), tuning
    return Compiled(lower(Source(text, name), dims, target, tuning=tuning), origin)
