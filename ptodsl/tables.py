"""Plain-text tables for ptodsl's reports: Markdown, so a README can quote them as printed."""

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
