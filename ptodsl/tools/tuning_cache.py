"""The tuning cache: the plan choices `ptodsl tune` measured fastest, per spec.

Keyed by the spec's text, its dim sizes, the target and the ptodsl and pypto versions.
`cached_tuning` returns only a plan that passed `ptodsl check` (the record says so); a
`--no-check` tune's record lives beside it under another name and is never read here. This
module knows no pipeline, so that `ptodsl.compile` and `ptodsl tune` can both use it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ptodsl import __version__
from ptodsl.ir import nodes as ir
from ptodsl.ir.target import PYPTO_0_2_0, Target
from ptodsl.runtime.files import NotRegularFile, read_regular, tuning_dir, write_atomically


def cache_key(text: str, dims: Mapping[str, int] | None, target: Target) -> str:
    identity = {
        "spec": text,
        "dims": sorted((dims or {}).items()),
        "target": target.name,
        "ptodsl": __version__,
        "pypto": importlib.metadata.version("pypto"),
    }
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]


def _cache_path(
    text: str, dims: Mapping[str, int] | None, target: Target, checked: bool = True
) -> Path:
    """The entry compile reads (a plan that passed `ptodsl check`), or with checked=False
    the record of a `--no-check` tune, which compile never reads."""
    suffix = "" if checked else ".unchecked"
    return tuning_dir() / f"{cache_key(text, dims, target)}{suffix}.json"


class BadEntry(ValueError):
    """A cache entry ptodsl did not write as it reads: edited, truncated or foreign."""


# How many plans `ptodsl tune` measures unless told (`--budget`).
DEFAULT_BUDGET = 12

# The values `ptodsl tune` tries for each plan choice (None: the default plan's): an entry
# holding any other value is not a plan tune made (a 1-element tile, a 4-byte last axis,
# 10^26 loop iterations), and is ignored.
KNOBS: dict[str, tuple[Any, ...]] = {
    "tile_elements": (None, 8192, 4096, 2048),
    "last_axis_tile": (None, 64, 256, 1024),
    "loop_count": (None, 8, 16, 32, 64),
    "matmul_chunks": (None, 1, 2, 8),
    "variance": (None, "one_pass"),
    "kernels": (None, "per_op"),
}


# The choices one kernel of several may take: all but the program's cut into kernels.
KERNEL_KNOBS = {name: values for name, values in KNOBS.items() if name != "kernels"}
_KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def tuning_record(tuning: ir.Tuning) -> dict[str, Any]:
    """An entry's `tuning`: the program's choices, and under `per_kernel` each tuned
    kernel's own, by name."""
    record: dict[str, Any] = {name: getattr(tuning, name) for name in KNOBS}
    if tuning.per_kernel:
        record["per_kernel"] = {
            name: {knob: getattr(choices, knob) for knob in KERNEL_KNOBS}
            for name, choices in tuning.per_kernel
        }
    return record


def _choices(choices: Any, knobs: Mapping[str, tuple[Any, ...]], what: str) -> dict[str, Any]:
    """`choices` checked: one of the values tune tries for each knob (`KNOBS`: not 4096.5,
    NaN, a bool, a string or 10^21 for a count), no other key."""
    if not isinstance(choices, dict):
        raise BadEntry(f"{what} is {type(choices).__name__}, not an object")
    unknown = sorted(set(choices) - set(knobs))
    if unknown:
        raise BadEntry(f"unknown plan choices {unknown} in {what}")
    for name, values in knobs.items():
        value = choices.get(name)
        # `in` alone takes True for 1 and 4096.0 for 4096: the type must match too
        if not any(value == known and type(value) is type(known) for known in values):
            tried = [known for known in values if known is not None]
            raise BadEntry(f"{name} is {value!r} in {what}, not a value tune tries ({tried})")
    return choices


def _tuning(choices: Any) -> ir.Tuning:
    """The plan choices of an entry (`tuning_record`), each checked."""
    if isinstance(choices, dict) and "per_kernel" in choices:
        kernels = choices["per_kernel"]
        if not isinstance(kernels, dict) or not kernels:
            raise BadEntry("its per_kernel choices are not an object of kernels")
        per_kernel = []
        for name, own in sorted(kernels.items()):
            if not _KERNEL_NAME.match(name):
                raise BadEntry(f"{name!r} is not a kernel's name")
            what = f"kernel {name}'s tuning"
            per_kernel.append((name, ir.Tuning(**_choices(own, KERNEL_KNOBS, what))))
        program = {k: v for k, v in choices.items() if k != "per_kernel"}
        return ir.Tuning(**_choices(program, KNOBS, "its tuning"), per_kernel=tuple(per_kernel))
    return ir.Tuning(**_choices(choices, KNOBS, "its tuning"))


def _claimed_speed(record: Mapping[str, Any]) -> None:
    """Tune stores a plan only if it is no slower than the default one: an entry saying
    otherwise was not written by tune."""
    time, default = record.get("sim_time_us"), record.get("default_sim_time_us")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (time, default))
    if numbers and time > default:
        raise BadEntry(
            f"its plan takes {time:g} us against the default's {default:g} us: tune keeps a "
            "plan only when it is faster"
        )


_WARNED: set[Path] = set()


def cached_tuning(
    text: str, dims: Mapping[str, int] | None = None, target: Target = PYPTO_0_2_0
) -> ir.Tuning | None:
    """The checked plan `ptodsl tune` stored for this spec, or None. A missing or unreadable
    entry is None; an entry that does not hold what tune writes is ignored with a warning
    that names its file (once per process), and compile uses the default plan."""
    path = _cache_path(text, dims, target)
    try:
        record = json.loads(read_regular(path).decode("utf-8"))
    except NotRegularFile:
        return _ignored(path, "not a regular file")
    except (OSError, UnicodeDecodeError):
        return None  # no entry (or no readable cache folder): compile untuned
    except (ValueError, RecursionError) as error:
        return _ignored(path, f"not JSON ({type(error).__name__})")
    try:
        if not isinstance(record, dict):
            raise BadEntry(f"it holds {type(record).__name__}, not an object")
        if record.get("checked") is not True:
            return None  # only a plan that passed `ptodsl check` changes what compile emits
        _claimed_speed(record)
        return _tuning(record.get("tuning"))
    except BadEntry as bad:
        return _ignored(path, str(bad))


def ignore_entry(text: str, dims: Mapping[str, int] | None, target: Target, why: str) -> None:
    """Warns that the spec's entry is ignored, for a reason found after reading it."""
    _ignored(_cache_path(text, dims, target), why)


def _ignored(path: Path, why: str) -> None:
    if path not in _WARNED:
        _WARNED.add(path)
        print(
            f"ptodsl: warning: ignoring tuning cache entry {path}: {why}; compiling with the "
            "default plan (delete the file, or run `ptodsl tune` again)",
            file=sys.stderr,
        )
    return None


def store_record(
    text: str,
    dims: Mapping[str, int] | None,
    target: Target,
    record: Mapping[str, Any],
    checked: bool,
) -> None:
    path = _cache_path(text, dims, target, checked)
    write_atomically(path, json.dumps({**record, "checked": checked}, indent=2) + "\n")


def forget(text: str, dims: Mapping[str, int] | None, target: Target) -> list[Path]:
    """Removes the spec's entries at these dims (checked and `--no-check`); returns them."""
    removed = []
    for checked in (True, False):
        path = _cache_path(text, dims, target, checked)
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


@attrs.frozen
class Entry:
    """One stored plan as `ptodsl tune --list` shows it (None where an entry written before
    these fields existed, or an edited one, does not say)."""

    path: Path
    spec: str | None
    dims: dict[str, int] | None
    tuning: str | None
    sim_time_us: float | None
    default_sim_time_us: float | None
    checked: bool


# An entry's file name: its key (cache_key), `.unchecked` for a `--no-check` tune's record.
_ENTRY_NAME = re.compile(r"^[0-9a-f]{24}(\.unchecked)?\.json$")


def _entry_paths() -> list[Path]:
    """The files tune wrote in the tuning folder (it may be a folder of other files too:
    PTODSL_TUNING_DIR names any)."""
    return sorted(p for p in tuning_dir().glob("*.json") if _ENTRY_NAME.match(p.name))


def forget_all() -> list[Path]:
    """Removes every entry; returns them."""
    removed = []
    for path in _entry_paths():
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def entries() -> list[Entry]:
    """The tuning cache's entries, by spec file name, then file name."""
    found = []
    for path in _entry_paths():
        try:
            record = json.loads(read_regular(path).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            record = None
        if not isinstance(record, dict):
            record = {}
        try:
            tuning = _tuning(record.get("tuning")).describe()
        except BadEntry:
            tuning = None
        found.append(
            Entry(
                path,
                _text_or_none(record.get("spec")),
                record.get("dims") if isinstance(record.get("dims"), dict) else None,
                tuning,
                _number_or_none(record.get("sim_time_us")),
                _number_or_none(record.get("default_sim_time_us")),
                record.get("checked") is True,
            )
        )
    return sorted(found, key=lambda e: (e.spec or "", e.path.name))


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number_or_none(value: Any) -> float | None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None
