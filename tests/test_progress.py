"""Progress goes to a terminal as a tqdm bar and anywhere else as plain lines: a pipe or a
log file never gets carriage returns or escape codes."""

from __future__ import annotations

import io

from ptodsl.tools.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_one_plain_line_per_step():
    stream = io.StringIO()
    with Progress(2, "plan", "measuring plans", stream) as progress:
        progress.step("defaults: 3.81 us")
        progress.step("tile_elements=8192: 6.01 us")
    assert stream.getvalue() == (
        "measuring plans: 2 plans\n[1/2] defaults: 3.81 us\n[2/2] tile_elements=8192: 6.01 us\n"
    )


def test_a_terminal_gets_a_bar_and_the_lines():
    stream = Terminal()
    with Progress(2, "plan", "measuring plans", stream) as progress:
        progress.step("defaults: 3.81 us")
        progress.step("tile_elements=8192: 6.01 us")
    text = stream.getvalue()
    assert "\r" in text and "measuring plans: 100%" in text and "2/2" in text
    assert "[1/2] defaults: 3.81 us\n" in text and "\x1b[3" not in text  # no colour


def test_ticks_between_steps_move_a_terminals_clock_and_print_nothing_elsewhere(monkeypatch):
    clock = iter(range(0, 1000, 7))
    monkeypatch.setattr("tqdm.std.time", lambda: next(clock))  # tqdm's own clock, in seconds
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with Progress(1, "step", "checking relu", stream) as progress:
            progress.tick()
            progress.tick()
    assert "00:14" in terminal.getvalue()  # the elapsed time the second tick drew
    assert pipe.getvalue() == "checking relu: 1 step\n"
