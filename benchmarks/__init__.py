"""Benchmarks and full-shape checks of ptodsl's examples (see README: Performance)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").rglob("*.pto"))
sys.path.insert(0, str(ROOT / "tests"))
# The examples CI checks scaled down, with their sizes there, live with the tests.
from conftest import CI_DIMS, INTERPRETER_PATTERNS  # noqa: E402

from ptodsl.tools.tables import markdown_table  # noqa: E402

__all__ = [
    "CI_DIMS",
    "EXAMPLES",
    "INTERPRETER_PATTERNS",
    "ROOT",
    "add_row",
    "example_names",
    "print_table",
    "spec_by_kernel",
]

_KERNEL = re.compile(r"^kernel\s+(\w+)", re.MULTILINE)


def spec_by_kernel() -> dict[str, Path]:
    """Each example spec by its kernel's name (the name baselines are filed under)."""
    return {_KERNEL.search(p.read_text(encoding="utf-8")).group(1): p for p in EXAMPLES}


def add_row(rows: list[tuple[str, ...]], row: tuple[str, ...]) -> None:
    """Adds a benchmark's row and prints it at once (a long run shows its progress)."""
    rows.append(row)
    print(" | ".join(row), flush=True)


def print_table(rows: list[tuple[str, ...]], failed: int) -> int:
    """Prints a benchmark's rows (header first) as a Markdown table; the exit status."""
    print()
    print(markdown_table(rows[0], rows[1:]), end="")
    return 1 if failed else 0


def example_names(prog: str, doc: str, argv: list[str], default: str) -> list[str]:
    """The example names benchmark `prog`'s command line gives (`--help` prints its docstring;
    an unknown name is a usage error); none means `default` (the help text says which)."""
    parser = argparse.ArgumentParser(
        prog=f"ptodsl bench {prog}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "examples",
        nargs="*",
        metavar="EXAMPLE",
        help=f"example names, such as 9_tall_skinny_matmul (default: {default})",
    )
    # Checked here, not by `choices`: argparse holds an empty list against the choices too.
    names = parser.parse_args(argv).examples
    known = {path.stem for path in EXAMPLES}
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"no example named {', '.join(unknown)}")
    return names
