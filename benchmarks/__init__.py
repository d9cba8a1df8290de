"""Benchmarks and full-shape checks of ptodsl's examples (see README: Performance)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.pto"))
_KERNEL = re.compile(r"^kernel\s+(\w+)", re.MULTILINE)


def spec_by_kernel() -> dict[str, Path]:
    """Each example spec by its kernel's name (the name baselines are filed under)."""
    return {_KERNEL.search(p.read_text(encoding="utf-8")).group(1): p for p in EXAMPLES}
