"""Benchmarks and full-shape checks of ptodsl's examples (see README: Performance)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.pto"))
sys.path.insert(0, str(ROOT / "tests"))
# The examples CI checks scaled down, with their sizes there, live with the tests.
from conftest import CI_DIMS  # noqa: E402

__all__ = ["CI_DIMS", "EXAMPLES", "ROOT", "spec_by_kernel"]

_KERNEL = re.compile(r"^kernel\s+(\w+)", re.MULTILINE)


def spec_by_kernel() -> dict[str, Path]:
    """Each example spec by its kernel's name (the name baselines are filed under)."""
    return {_KERNEL.search(p.read_text(encoding="utf-8")).group(1): p for p in EXAMPLES}
