"""Source spans and rustc-style error rendering.

Every error ptodsl reports about a spec is a `SpecError`: it carries the span it points at and
renders as::

    elu.pto:7:5: error: unknown name `z`
      --> elu.pto:7:5
       |
     7 | y = z + 1.0
       |     ^
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Span:
    """A 1-based, end-exclusive range of source text on one or more lines."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, line: int, column: int) -> Span:
        return cls(line, column, line, column + 1)


BYTE_ORDER_MARK = "\ufeff"
MAX_SPEC_BYTES = 1 << 20  # a spec is a page of text; the largest example is under 2 KiB


# Characters a terminal obeys rather than shows: C1 controls (0x9b starts a command as ESC [
# does) and the bidirectional overrides, isolates and marks that reorder what follows them
# (a line that reads otherwise than it parses: CVE-2021-42574).
_UNSHOWN = frozenset(
    [*map(chr, range(0x80, 0xA0)), "\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
)
UNSHOWN_PICTURE = "\ufffd"


def visible(text: str) -> str:
    """Control characters as their Unicode pictures (ESC as ␛, NUL as ␀, a newline in a
    file name as ␊), and those without one (C1 controls, bidi controls) as �, one column
    each so that carets stay aligned: a spec's bytes never reach the terminal as commands."""
    return "".join(_picture(c) for c in text)


def _picture(character: str) -> str:
    code = ord(character)
    if code < 0x20:
        return chr(0x2400 + code)
    if character == "\x7f":
        return "\u2421"
    return UNSHOWN_PICTURE if character in _UNSHOWN else character


@attrs.frozen
class Source:
    """A spec's text and the name diagnostics call it by. A leading byte-order mark is an
    encoding marker, not text: it is dropped, so that columns are the ones editors show."""

    text: str = attrs.field(converter=lambda text: text.removeprefix(BYTE_ORDER_MARK))
    filename: str = "<spec>"

    @classmethod
    def decode(cls, data: bytes, filename: str) -> Source:
        """A spec file's bytes, which must be UTF-8: an invalid byte is a located error."""
        try:
            return cls(data.decode("utf-8"), filename)
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            column = error.start - data.rfind(b"\n", 0, error.start)
            raise EncodingError(
                f"{visible(filename)}:{line}:{column}: error: invalid UTF-8 (byte "
                f"0x{data[error.start]:02x}): a spec is UTF-8 text"
            ) from None

    def line_text(self, line: int) -> str:
        lines = self.text.split("\n")  # as the parser counts lines: \r, \f, ... do not break
        return lines[line - 1].removesuffix("\r") if 0 < line <= len(lines) else ""


class EncodingError(ValueError):
    """A spec file that is not UTF-8 text; its message is located (file:line:col)."""


class SpecError(Exception):
    """A problem with the spec, located in its source.

    Passes raise it with a span only; the pipeline attaches the `Source` before it reaches a
    user, so that the rendered text always shows the offending line.
    """

    def __init__(self, message: str, span: Span, note: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.note = note
        self.source: Source | None = None

    def __str__(self) -> str:
        return self.render() if self.source else self.message

    def attach(self, source: Source) -> SpecError:
        if self.source is None:
            self.source = source
        return self

    def render(self) -> str:
        span, source = self.span, self.source or Source("")
        location = f"{visible(source.filename)}:{span.line}:{span.column}"
        text = visible(source.line_text(span.line).expandtabs(1))
        gutter = " " * len(str(span.line))
        last_column = span.end_column if span.end_line == span.line else len(text) + 1
        width = max(1, min(last_column, len(text) + 1) - span.column)
        lines = [
            f"{location}: error: {visible(self.message)}",
            f"{gutter}--> {location}",
            f"{gutter} |",
            f"{span.line} | {text}",
            f"{gutter} | {' ' * (span.column - 1)}{'^' * width}",
        ]
        if self.note:
            lines.append(f"{gutter} = note: {visible(self.note)}")
        return "\n".join(lines)


class FrameError(SpecError):
    """A kernel's values need frames PyPTO cannot hold in one kernel (more than its rank, a
    convolution's own layout against another's): the values are fine, the kernel is too big.
    `passes/partition.py` cuts a spec that hits one into several kernels; a user sees it only
    when no cut helps."""
