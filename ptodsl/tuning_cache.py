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
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ptodsl import __version__, ir
from ptodsl.files import cache_dir, write_atomically
from ptodsl.target import PYPTO_0_2_0, Target


def tuning_dir() -> Path:
    """`PTODSL_TUNING_DIR`, else `tuning/` in ptodsl's cache folder."""
    configured = os.environ.get("PTODSL_TUNING_DIR")
    if configured:
        return Path(configured)
    return cache_dir() / "tuning"


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


def cached_tuning(
    text: str, dims: Mapping[str, int] | None = None, target: Target = PYPTO_0_2_0
) -> ir.Tuning | None:
    try:
        record = json.loads(_cache_path(text, dims, target).read_text(encoding="utf-8"))
        if record.get("checked") is not True:
            return None  # only a plan that passed `ptodsl check` changes what compile emits
        return ir.Tuning(**record["tuning"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no entry, or one from an incompatible ptodsl: compile untuned


def store_record(
    text: str,
    dims: Mapping[str, int] | None,
    target: Target,
    record: Mapping[str, Any],
    checked: bool,
) -> None:
    path = _cache_path(text, dims, target, checked)
    write_atomically(path, json.dumps({**record, "checked": checked}, indent=2) + "\n")
