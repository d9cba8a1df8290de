"""Files and folders ptodsl owns: its cache folder, atomic writes, and importing Python
modules from files (generated kernels, problem files). No compiler knowledge here, so that
every module can use it without importing the pipeline."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import platformdirs


def cache_dir() -> Path:
    """Where ptodsl keeps what it builds: `PTODSL_CACHE_DIR`, else the platform's user cache
    folder (platformdirs: `$XDG_CACHE_HOME/ptodsl`, by default ~/.cache/ptodsl on Linux)."""
    configured = os.environ.get("PTODSL_CACHE_DIR")
    return Path(configured) if configured else platformdirs.user_cache_path("ptodsl")


def write_atomically(
    path: Path, text: str, mode: int | None = None, create_parents: bool = True
) -> None:
    """Writes through a temporary file in the same folder, then renames: readers never see a
    half-written file, and a failure leaves nothing behind. `mode`: the file's permission
    bits (default: mkstemp's 0600, for ptodsl's own cache files)."""
    if create_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            if mode is not None:
                os.fchmod(stream.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class OutputRefused(OSError):
    """An output path ptodsl will not write: it does not own what is there."""


_NOT_REGULAR = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def write_output(path: Path, text: str) -> None:
    """Writes a user-named output (`-o`) as `cp` would and never destroys what it does not
    own: through a symlink to its target (the link stays), keeping an existing file's mode
    (a new one gets 0666 less the umask), refusing a read-only file and anything that is
    not a regular file (a device, a FIFO, a folder: replacing `/dev/null` as root once
    destroyed the device). The write itself is atomic (write_atomically)."""
    target = path.resolve() if path.is_symlink() else path
    try:
        existing = target.stat()
    except FileNotFoundError:
        existing = None
    if existing is not None:
        kind = next((name for test, name in _NOT_REGULAR if test(existing.st_mode)), None)
        if kind is not None:
            raise OutputRefused(f"{path} is {kind}, not a regular file: ptodsl writes files")
        if not existing.st_mode & 0o222:
            raise OutputRefused(f"{path} is read-only: make it writable or choose another name")
        mode = stat.S_IMODE(existing.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    write_atomically(target, text, mode=mode, create_parents=False)


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
