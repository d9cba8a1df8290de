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
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from ptodsl.runtime import settings


def cache_dir() -> Path:
    """Where ptodsl keeps what it builds (`Settings.cache_dir`)."""
    return settings.current().cache_dir


def tuning_dir() -> Path:
    """Where `ptodsl tune` keeps plans (`Settings.tuning_dir`)."""
    return settings.current().tuning_dir


def require_run_folders(tuning: bool = False) -> None:
    """Before a run measures anything: the folders it writes are usable (TMPDIR for its
    scratch folders; the cache; with `tuning`, the tuning folder), else UnusableFolder."""
    require_writable(Path(tempfile.gettempdir()), "TMPDIR")
    require_usable_folder(cache_dir(), "PTODSL_CACHE_DIR")
    if tuning:
        require_usable_folder(tuning_dir(), "PTODSL_TUNING_DIR or PTODSL_CACHE_DIR")


class UnusableFolder(ValueError):
    """A folder ptodsl writes cannot take its files (read-only, full, not a folder), or
    holds something other than files and folders where ptodsl keeps its own (a FIFO would
    block a read forever): the user's environment, named by path (exit 1, not a bug)."""


def require_usable_folder(folder: Path, set_by: str) -> None:
    """Before anything is measured: `folder` exists (it is created), it and the folders
    directly in it, where ptodsl adds files and folders, take a file (one is written,
    synced and removed), and it holds only regular files, folders and links to them.
    `set_by` names what chose the folder, for the message."""
    require_writable(folder, set_by)
    for entry, depth in _walk(folder, 0):
        if depth == 0 and entry.is_dir(follow_symlinks=False):
            require_writable(Path(entry.path), set_by)
        elif not (entry.is_dir() or entry.is_file()) and os.path.exists(entry.path):
            raise UnusableFolder(
                f"{entry.path} is {file_kind(os.stat(entry.path).st_mode)}, where ptodsl keeps "
                "only files and folders: remove it"
            )


def _walk(folder: str | Path, depth: int) -> Iterator[tuple[os.DirEntry, int]]:
    """Everything under `folder` and how deep it lies, without following links to
    folders (a DirEntry keeps the file type its scan read: no stat per entry)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            yield entry, depth
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(entry.path, depth + 1)


def require_writable(folder: Path, set_by: str) -> None:
    """`folder` exists (created if missing) and takes a file: else UnusableFolder."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".ptodsl-probe-")
        try:
            os.write(handle, b"\0")  # a full disk refuses the first block, not the name
            os.fsync(handle)
        finally:
            os.close(handle)
            os.unlink(probe)
    except OSError as error:
        why = error.strerror or str(error)
        if folder.exists() and not folder.is_dir():
            why = f"it is {file_kind(folder.stat().st_mode)}, not a folder"
        raise UnusableFolder(f"cannot write in {folder}: {why} ({set_by} sets it)") from None


class NotRegularFile(OSError):
    """A path read as a file is something else."""


class FileTooLarge(OSError):
    """A file read with a bound holds more than it."""


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """A regular file's bytes; anything else (a FIFO, a device, a folder) is an OSError at
    once rather than a read that blocks or never ends. With `limit`, a file of more bytes
    is a FileTooLarge (a problem file grown to gigabytes is no problem file)."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(handle).st_mode
    if not stat.S_ISREG(mode):  # before fdopen, which refuses a folder in words of its own
        os.close(handle)
        raise NotRegularFile(f"{path} is {file_kind(mode)}, not a regular file")
    with os.fdopen(handle, "rb") as stream:
        if limit is None:
            return stream.read()
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"{path} is larger than {limit // 1024} KiB")
    return data


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


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    """What a stat mode says a path is, as a diagnostic names it ("a FIFO")."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def write_output(path: Path, text: str) -> None:
    """Writes a user-named output (`-o`) as `cp` would and never destroys what it does not
    own: through a symlink to its target (the link stays), keeping an existing file's mode
    (a new one gets 0666 less the umask), refusing a read-only file and anything that is
    not a regular file (a device, a FIFO, a folder: replacing `/dev/null` as root once
    destroyed the device). The write itself is atomic (write_atomically)."""
    if str(path) in ("", "."):  # Path("") is "."
        raise OutputRefused("an empty path names no file: give -o a file name")
    target = path
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except RuntimeError:  # a loop (Python 3.11; 3.13 raises OSError ELOOP)
            raise OutputRefused(f"{path} is a symbolic link in a loop: it names no file") from None
        except FileNotFoundError:  # GNU cp refuses to create a dangling link's target too
            raise OutputRefused(
                f"{path} is a symbolic link to {os.readlink(path)}, which does not exist: "
                "ptodsl writes through a link only to an existing file"
            ) from None
    try:
        existing = target.stat()
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if not stat.S_ISREG(existing.st_mode):
            raise OutputRefused(
                f"{path} is {file_kind(existing.st_mode)}, not a regular file: ptodsl writes files"
            )
        if not existing.st_mode & 0o222:
            raise OutputRefused(f"{path} is read-only: make it writable or choose another name")
        mode = stat.S_IMODE(existing.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    write_atomically(target, text, mode=mode, create_parents=False)


class OutsideFolder(ValueError):
    """A path meant to name something inside a folder names something outside it."""


def inside(folder: Path, relative: str | Path) -> Path:
    """`folder / relative`, which must stay inside `folder`: not absolute, no `..` climbing
    out of it (the path is normalized, not resolved: a link inside the folder is the
    writer's to judge, as `write_output` judges it)."""
    joined = Path(os.path.normpath(folder / relative))
    if Path(relative).is_absolute() or not joined.is_relative_to(os.path.normpath(folder)):
        raise OutsideFolder(f"{relative} names a path outside {folder}")
    return joined


def read_text(path: Path, limit: int) -> str:
    """A regular file's UTF-8 text of at most `limit` bytes (read_regular's refusals, and a
    ValueError for bytes that are not UTF-8)."""
    data = read_regular(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x})") from None


def load_module(source: str, stem: str) -> ModuleType:
    """Imports generated source from a real file (PyPTO reads kernel source with `inspect`).
    Files are content-addressed, so the same source is written once and imported once."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    module_name = f"ptodsl_generated_{stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = cache_dir() / "modules" / digest / f"{stem}.py"
    if not path.exists() or read_regular(path) != source.encode():
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
