"""Files and folders ptodsl owns: its cache folder, atomic writes, and importing Python
modules from files (generated kernels, problem files). No compiler knowledge here, so that
every module can use it without importing the pipeline."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType


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
