"""Progress of the long commands (`tune`, `coverage`, `check`) on stderr: a tqdm bar on a terminal,
and one plain line per finished step anywhere else, so that a pipe or a log file gets no
carriage returns or escape codes (and no colour: NO_COLOR holds trivially)."""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm


class Progress:
    """Counts `total` steps (each one of `unit`) of a job called `title`; `step(text)` after
    each one."""

    def __init__(self, total: int, unit: str, title: str, stream: TextIO | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.total, self.done = total, 0
        self.bar = None
        if self.stream.isatty():
            self.bar = tqdm(total=total, unit=unit, desc=title, file=self.stream, leave=True)
        else:
            print(f"{title}: {total} {unit}{'s' * (total != 1)}", file=self.stream, flush=True)

    def step(self, text: str) -> None:
        self.done += 1
        if self.done > self.total:  # a job may find more to do (a check's further draws)
            self.total = self.done
            if self.bar is not None:
                self.bar.total = self.total
        line = f"[{self.done}/{self.total}] {text}"
        if self.bar is None:
            print(line, file=self.stream, flush=True)
            return
        self.bar.write(line, file=self.stream)
        self.bar.update(1)

    def tick(self) -> None:
        """Between steps: the bar's elapsed time moves on (nothing is printed elsewhere)."""
        if self.bar is not None:
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
