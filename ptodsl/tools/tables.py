"""Plain-text tables for ptodsl's reports: Markdown, so a README can quote them as printed,
and aligned columns for a terminal report's few lines. Every table ptodsl prints is one of
these two (a table library would add a dependency for twenty lines)."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    table = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"
        for cells in table
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines) + "\n"


def aligned_lines(rows: Sequence[Sequence[str]]) -> list[str]:
    """The rows (header first) in columns two spaces apart, trailing spaces dropped."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
