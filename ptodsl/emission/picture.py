"""Pictures as SVG, drawn by hand (no plotting dependency): a kernel's plan, and a chart of
benchmark ratios. Sizes are fixed in px and numbers rounded, so that the same input gives
byte-identical output; every text goes through ElementTree, which escapes it."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import NamedTuple

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import Forward
from ptodsl.ir.plan import plan_of
from ptodsl.ir.target import PYPTO_0_2_0

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"
# A monospace advance, as a fraction of the font size (DejaVu Sans Mono's is 0.602): the
# layout knows how wide every text is without measuring fonts.
CHAR_WIDTH = 0.62
MARGIN = 16
LINE = 18  # px from one caption line to the next

# Frame axes are drawn on a log scale, so that 1 x 65536 and 16384 x 16384 both fit: an
# extent of 1 is MIN_SPAN px, every doubling adds SPAN_PER_DOUBLING, up to MAX_DOUBLINGS.
MIN_SPAN = 16
SPAN_PER_DOUBLING = 20
MAX_DOUBLINGS = 22
MIN_MARK = 3  # px: a tile or chunk thinner than this is drawn this thick, to be seen
DECK_STEP = 6  # px between the pages of a frame's deck
DECK_PAGES = 3  # pages drawn behind the frame at most
RULER = 6  # px: the strip beside a frame repeating its loop's chunks, seen even under a tile
RULER_GAP = 4
LABEL_GAP = 6
LAUNCH_BAR = 400  # px: the whole of a launched axis

FRAME_FILL = "#f7f7f7"
OUTLINE = "#444"
PAGE_STYLE = {"fill": "#e4e4e4", "stroke": "#999", "stroke_width": 1}
CHUNK_STYLE = {"fill": "#9ecae1"}
TAIL_STYLE = {"fill": "url(#tail)", "stroke": "#3182bd", "stroke_width": 0.5}
TILE_STYLE = {"fill": "#f28e2b", "stroke": "#b35806", "stroke_width": 1}
LAUNCH_STYLE = {"fill": "#c5b0d5", "stroke": "#6a51a3", "stroke_width": 1}
MUTED = {"fill": "#555"}
CUT = "#5a7d9a"  # the line between two chunks

# Characters XML 1.0 cannot hold even escaped (control characters, lone surrogates).
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_WIDTH


def _number(value: float) -> str:
    """Two decimals at most, no trailing zeros: floats never leak noise into the output."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _svg_name(name: str) -> str:
    """`stroke_width` is stroke-width, `class_` class."""
    return name.rstrip("_").replace("_", "-")


def _svg_value(value: float | str) -> str:
    return value if isinstance(value, str) else _number(value)


class Canvas:
    """SVG elements in drawing order, and how far right and down they reach, so that the
    picture is as big as what is drawn."""

    def __init__(self) -> None:
        self.defs: list[ET.Element] = []
        self.elements: list[ET.Element] = []
        self.right = self.bottom = 0.0

    def _add(self, tag: str, right: float, bottom: float, **attributes) -> ET.Element:
        element = ET.Element(
            tag, {_svg_name(name): _svg_value(v) for name, v in attributes.items()}
        )
        self.elements.append(element)
        self.right, self.bottom = max(self.right, right), max(self.bottom, bottom)
        return element

    def rect(self, x: float, y: float, width: float, height: float, **style) -> None:
        self._add("rect", x + width, y + height, x=x, y=y, width=width, height=height, **style)

    def line(self, x1: float, y1: float, x2: float, y2: float, **style) -> None:
        self._add("line", max(x1, x2), max(y1, y2), x1=x1, y1=y1, x2=x2, y2=y2, **style)

    def text(
        self, x: float, y: float, content: str, size: float = 12, anchor: str = "start", **style
    ) -> None:
        """`content` with its baseline at y, starting, centred or ending at x."""
        width = text_width(content, size)
        left = x - {"start": 0, "middle": width / 2, "end": width}[anchor]
        if anchor != "start":
            style["text_anchor"] = anchor
        descent = size / 4
        element = self._add("text", left + width, y + descent, x=x, y=y, font_size=size, **style)
        element.text = NOT_XML.sub("\ufffd", content)

    def define(self, element: ET.Element) -> None:
        self.defs.append(element)

    def svg(self) -> str:
        width, height = math.ceil(self.right + MARGIN), math.ceil(self.bottom + MARGIN)
        root = ET.Element(
            "svg",
            {
                "xmlns": SVG_NAMESPACE,
                "width": str(width),
                "height": str(height),
                "viewBox": f"0 0 {width} {height}",
                "font-family": FONT,
                "style": "background: #fff",
            },
        )
        if self.defs:
            ET.SubElement(root, "defs").extend(self.defs)
        root.extend(self.elements)
        ET.indent(root)  # one element a line: readable, and diffs of pictures are too
        return ET.tostring(root, encoding="unicode") + "\n"


# ---- a kernel's plan -----------------------------------------------------------------------


class Box(NamedTuple):
    x: float
    y: float
    width: float
    height: float


def _span(extent: int) -> float:
    return MIN_SPAN + SPAN_PER_DOUBLING * min(math.log2(max(extent, 1)), MAX_DOUBLINGS)


def _shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _axes(sizes: tuple[int, ...], first: int) -> str:
    """`62 (axis 1)`, or a flattened `62 × 62 = 3844 (axes 2–3)`."""
    if len(sizes) == 1:
        return f"{sizes[0]} (axis {first})"
    product = " × ".join(map(str, sizes)) + f" = {math.prod(sizes)}"
    return f"{product} (axes {first}–{first + len(sizes) - 1})"


@attrs.frozen
class View:
    """How a frame of any rank is drawn in two: rows along `row_axis`, the axes after it
    flattened into columns, and the axes before it as a deck of pages behind (none: a
    rank-1 frame, one row). The loop's axis is the row axis when it can be, so that every
    iteration is one band of rows."""

    shape: tuple[int, ...]
    row_axis: int | None

    @classmethod
    def of(cls, shape: tuple[int, ...], loop_axis: int | None) -> View:
        last = len(shape) - 1
        if last == 0:
            return cls(shape, None)
        return cls(shape, loop_axis if loop_axis is not None and loop_axis < last else last - 1)

    @property
    def first_column_axis(self) -> int:
        return 0 if self.row_axis is None else self.row_axis + 1

    @property
    def deck(self) -> tuple[int, ...]:
        return self.shape[: self.row_axis or 0]

    @property
    def rows(self) -> int:
        return 1 if self.row_axis is None else self.shape[self.row_axis]

    @property
    def columns(self) -> int:
        return math.prod(self.shape[self.first_column_axis :])

    def footprint(self, tile: tuple[int, ...]) -> tuple[int, int]:
        """The tile's rows and columns in this view (a tile may overhang the frame: PyPTO
        pads). Over flattened columns this is the tile's area, not its strided layout."""
        clipped = [min(t, s) for t, s in zip(tile, self.shape, strict=True)]
        rows = 1 if self.row_axis is None else clipped[self.row_axis]
        return rows, math.prod(clipped[self.first_column_axis :])

    def row_label(self) -> str:
        return "1 row" if self.row_axis is None else _axes((self.rows,), self.row_axis)

    def column_label(self) -> str:
        return _axes(self.shape[self.first_column_axis :], self.first_column_axis)

    def deck_label(self) -> str:
        return f"pages: {_axes(self.deck, 0)}" if self.deck else ""


@attrs.frozen
class Figure:
    """One phase as drawn: its frame, the tile at the origin, the loop whose first chunk is
    shaded, and caption lines (a line with a style gets a swatch of it)."""

    heading: str
    view: View
    tile: tuple[int, ...] | None
    loop: dict | None
    captions: tuple[tuple[str, dict | None], ...]


def _count(number: int, noun: str, plural: str | None = None) -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _bytes(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"


def _chunks(count: int, chunk: int, tail: int, unit: str) -> str:
    """`64 × 256 rows + tail 17`."""
    return f"{count} × {chunk} {unit}".rstrip() + (f" + tail {tail}" if tail else "")


def _vector_figure(entry: dict, view: View) -> tuple[tuple[int, ...], list]:
    tile, loop, elements = tuple(entry["tile"]), entry["loop"], entry["tile_elements"]
    tiles = _count(entry["auto_tiles"], "tile") + " per phase"
    if loop is not None:
        tiles = _count(loop["tiles_per_iteration"], "tile") + " per iteration"
    ub = entry["ub"]
    used = ub["bytes_per_element"] * elements + ub["workspace"]
    limit = PYPTO_0_2_0.ub_bytes
    captions = [
        (f"tile {_shape(tile)}: {_count(elements, 'element')}, {tiles}", TILE_STYLE),
        (
            f"UB per tile: {ub['bytes_per_element']} B × {_count(elements, 'element')} + "
            f"{ub['workspace']} B = {_bytes(used)} of {_bytes(limit)} ({used / limit:.0%})",
            None,
        ),
    ]
    if loop is not None and loop["tail_tile"]:
        captions.append((f"tail tile {_shape(loop['tail_tile'])}", None))
    return tile, captions


def _cube_figure(entry: dict, view: View) -> tuple[tuple[int, ...], list]:
    cube = entry["cube_tile"]
    # the cube's output block, m × n, on the frame's last two axes
    tile = (1,) * (len(view.shape) - 2) + (cube["m"][0], cube["n"][0])
    captions = [
        (
            f"output block {_shape(tile)} of cube tile m {_shape(cube['m'])} · "
            f"k {_shape(cube['k'])} · n {_shape(cube['n'])}",
            TILE_STYLE,
        )
    ]
    k_loop = entry["k_loop"]
    if k_loop is not None:
        chunks = _chunks(k_loop["count"], k_loop["chunk"], k_loop["tail"], "")
        captions.append((f"K loop {chunks} (the contracted axis: not drawn)", None))
    return tile, captions


def _window_figure(entry: dict, view: View) -> tuple[tuple[int, ...], list]:
    steps = entry["steps"]
    # the tile of the first op on the frame's block: the exchange, else the padding
    first = steps[0]["tiles"]
    tile = tuple(first.get("swap", first["pad"])["tile"])
    captions = [(f"tile {_shape(tile)} of the first step", TILE_STYLE)]
    for number, step in enumerate(steps, 1):
        tiles = " · ".join(f"{name} {_shape(t['tile'])}" for name, t in step["tiles"].items())
        exchanged = ", exchanged" if step["transposed"] else ""
        captions.append((f"step {number}, axis {step['axis']}{exchanged}: {tiles}", None))
    return tile, captions


def _conv_figure(entry: dict, view: View) -> tuple[tuple[int, ...] | None, list]:
    rows = entry["rows_loop"]
    # The result block of a chunk of rows is the last shape of the frame's rank computed
    # for that chunk (the tail's come after): its tile is the one drawn.
    blocks = [
        t
        for t in entry["tiles"]
        if len(t["shape"]) == len(view.shape) and t["shape"][rows["axis"]] == rows["chunk"]
    ]
    tile = tuple(blocks[-1]["tile"]) if blocks else None
    cube = entry["cube_tile"]
    engine = f"cube tile m {_shape(cube['m'])} · k {_shape(cube['k'])} · n {_shape(cube['n'])}"
    if entry["depthwise_on_vector_cores"]:
        engine = "depthwise: multiply-adds on the vector cores"
    captions = []
    if tile is not None:
        block = _shape(blocks[-1]["shape"])
        captions.append((f"tile {_shape(tile)} of the result block {block}", TILE_STYLE))
    if entry["batch_loop"] > 1:
        captions.append((f"batch loop {entry['batch_loop']} × 1 sample (axis 0)", None))
    captions += [
        (engine, None),
        (f"{_count(len(entry['tiles']), 'vector tile')} in all (--emit plan lists them)", None),
    ]
    if entry["padded_by_a_staging_launch"]:
        captions.append(("input padded by a staging launch of its own", None))
    return tile, captions


FIGURES = {
    "vector": _vector_figure,
    "cube": _cube_figure,
    "window": _window_figure,
    "conv": _conv_figure,
}


def _computes(kernel: ir.Kernel, statements: list[int]) -> str:
    names = (getattr(kernel.body[i], "name", None) or kernel.body[i].output for i in statements)
    return ", ".join(names)


def _figure(kernel: ir.Kernel, entry: dict, number: int, count: int) -> Figure:
    kind = entry["kind"]
    loop = entry.get("rows_loop", entry.get("loop"))
    view = View.of(tuple(entry["shape"]), None if loop is None else loop["axis"])
    tile, captions = FIGURES[kind](entry, view)
    if loop is None:
        captions.insert(1, ("no loop: one block", None))
    else:
        unit = "rows" if loop["axis"] == view.row_axis else "columns"
        chunks = _chunks(loop["count"], loop["chunk"], loop["tail"], unit)
        captions.insert(1, (f"loop {chunks} (axis {loop['axis']}), the first shaded", CHUNK_STYLE))
        if loop["tail"]:
            captions.insert(2, (f"tail {_count(loop['tail'], unit[:-1])}", TAIL_STYLE))
    heading = (
        f"phase {number} of {count}: {kind}, computes {_computes(kernel, entry['statements'])}"
    )
    return Figure(heading, view, tile, loop, tuple(captions))


def _tensors_line(kernel: ir.Kernel) -> str:
    def spelled(tensor: ir.Tensor) -> str:
        return f"{tensor.name}: {tensor.type.dtype.value}{_shape(kernel.forward_shape(tensor))}"

    inputs = ", ".join(spelled(t) for t in kernel.inputs if t.twin_of is None)
    return f"{inputs} → {', '.join(spelled(t) for t in kernel.outputs)}"


def _hatch() -> ET.Element:
    """The tail's fill: diagonal stripes."""
    pattern = ET.Element(
        "pattern",
        {
            "id": "tail",
            "width": "6",
            "height": "6",
            "patternUnits": "userSpaceOnUse",
            "patternTransform": "rotate(45)",
        },
    )
    ET.SubElement(pattern, "rect", {"width": "6", "height": "6", "fill": "#fff"})
    stripe = {"x1": "0", "y1": "0", "x2": "0", "y2": "6", "stroke": "#3182bd", "stroke-width": "3"}
    ET.SubElement(pattern, "line", stripe)
    return pattern


def program_svg(program: Forward) -> str:
    """The forward program's plan: each kernel's picture (`plan_svg`), in call order, under
    a line saying what it writes and why the spec was cut after it."""
    if len(program.calls) == 1:
        return plan_svg(program.calls[0].kernel)
    canvas = Canvas()
    canvas.define(_hatch())
    y = MARGIN + 16
    title = f"{program.spec.name}: {len(program.calls)} kernels"
    canvas.text(MARGIN, y, title, size=18, font_weight="bold")
    for number, call in enumerate(program.calls, 1):
        y += LINE
        line = f"{number}. {call.kernel.name} writes {', '.join(call.writes)}"
        canvas.text(MARGIN, y, line)
        if call.cut_because is not None:
            y += LINE
            canvas.text(MARGIN + 16, y, f"cut after it: {call.cut_because.message}")
    y += LINE
    for call in program.calls:
        y = _kernel_picture(canvas, call.kernel, y + LINE)
    return canvas.svg()


def plan_svg(kernel: ir.Kernel) -> str:
    """The lowered kernel's plan: per phase, its frame to a log scale, the tile at the
    origin, the loop's first chunk shaded and its tail hatched; launches as a division of
    axis 0 above them."""
    canvas = Canvas()
    canvas.define(_hatch())
    _kernel_picture(canvas, kernel, 0)
    return canvas.svg()


def _kernel_picture(canvas: Canvas, kernel: ir.Kernel, top: float) -> float:
    """Draws `kernel`'s plan from `top` down; returns the y below it."""
    plan = plan_of(kernel)["kernels"][0]
    phases = plan["phases"]
    figures = [_figure(kernel, entry, n, len(phases)) for n, entry in enumerate(phases, 1)]
    y = _title(canvas, kernel, top)
    if kernel.launches is not None:
        y = _launches(canvas, kernel, y)
    # frames share a left edge, right of the widest row label and the ruler
    labels = max((text_width(f.view.row_label(), 12) for f in figures), default=0)
    left = MARGIN + labels + LABEL_GAP + RULER + RULER_GAP
    for figure in figures:
        y = _draw_figure(canvas, figure, left, y) + 14
    return y


def _title(canvas: Canvas, kernel: ir.Kernel, top: float) -> float:
    canvas.text(MARGIN, top + MARGIN + 16, kernel.name, size=18, font_weight="bold")
    y = top + MARGIN + 40
    canvas.text(MARGIN, y, _tensors_line(kernel))
    if kernel.dims:
        y += LINE
        canvas.text(MARGIN, y, "dims " + ", ".join(f"{d.name} = {d.size}" for d in kernel.dims))
    y += LINE
    canvas.text(
        MARGIN,
        y,
        f"frames drawn to a log scale ({MIN_SPAN} px + {SPAN_PER_DOUBLING} px per doubling); "
        "tiles, loops and launches to a linear one within them",
        size=11,
        **MUTED,
    )
    return y + 12


def _launch_count(count: int) -> str:
    return _count(count, "launch", "launches")


def _launches(canvas: Canvas, kernel: ir.Kernel, y: float) -> float:
    """Each division of the launched axes as a bar of launches, this kernel's shaded."""
    launches = kernel.launches
    assert launches is not None
    tensors = ", ".join((*(t.name for t in kernel.outputs), *launches.sliced))
    bars = [
        (
            launches.count,
            f"{_launch_count(launches.count)} × {launches.chunk} along axis 0 of {tensors} "
            f"({launches.extent} in all); the phases below are one launch's",
        )
    ]
    channels = launches.channels
    if channels is not None:
        parts = ", ".join(f"axis {c.axis} of {c.name}" for c in channels.inputs)
        bars.append(
            (
                channels.count,
                f"each of them {_launch_count(channels.count)} × {channels.chunk} channels "
                f"along axis 1 of the outputs, {parts}",
            )
        )
    rows = launches.rows
    if rows is not None:
        bars.append(
            (
                rows.count,
                f"each of them {_launch_count(rows.count)} × {rows.chunk} rows along axis 2 of "
                "the outputs, every channel, reading the whole sample",
            )
        )
    for count, caption in bars:
        canvas.text(MARGIN, y + 19, caption)
        _strip(canvas, Box(MARGIN, y + 26, LAUNCH_BAR, 14), False, (count, 1, 0), LAUNCH_STYLE)
        y += 44
    if kernel.launch_count != launches.count:
        staging = kernel.launch_count - launches.total
        of_them = f": {staging} of them staging the input" if staging else ""
        canvas.text(MARGIN, y + 13, f"{_launch_count(kernel.launch_count)} in all{of_them}")
        y += LINE
    return y + 8


def _draw_figure(canvas: Canvas, figure: Figure, left: float, y: float) -> float:
    """Draws the phase from `y` down; where it ends."""
    view = figure.view
    canvas.text(MARGIN, y + 14, figure.heading, size=13, font_weight="bold")
    pages = min(math.prod(view.deck) - 1, DECK_PAGES)
    lift = pages * DECK_STEP  # the deck rises above the frame
    frame = Box(left, y + 22 + LINE + lift, _span(view.columns), _span(view.rows))
    canvas.text(left, frame.y - lift - 6, view.column_label())
    for page in range(pages, 0, -1):
        canvas.rect(left + page * DECK_STEP, frame.y - page * DECK_STEP, *frame[2:], **PAGE_STYLE)
    middle = frame.y + min(frame.height, 2 * MIN_SPAN) / 2 + 4
    canvas.text(left - RULER_GAP - RULER - LABEL_GAP, middle, view.row_label(), anchor="end")
    if view.deck:
        canvas.text(left + frame.width + lift + 10, middle, view.deck_label())
    y = _draw_frame(canvas, figure, frame) + 8
    for text, style in figure.captions:
        if style is not None:
            canvas.rect(left, y + 3, 10, 10, **style)
        canvas.text(left + 16, y + 13, text)
        y += LINE
    return y


def _draw_frame(canvas: Canvas, figure: Figure, frame: Box) -> float:
    """The frame with the loop's chunks, their ruler and the tile; where they end."""
    view, loop = figure.view, figure.loop
    canvas.rect(*frame, fill=FRAME_FILL)
    bottom = frame.y + frame.height
    if loop is not None:
        chunks = (loop["count"], loop["chunk"], loop["tail"])
        along_rows = loop["axis"] == view.row_axis
        _draw_chunks(canvas, frame, along_rows, chunks, CHUNK_STYLE)
        if along_rows:
            ruler = Box(frame.x - RULER_GAP - RULER, frame.y, RULER, frame.height)
        else:
            ruler = Box(frame.x, bottom + RULER_GAP, frame.width, RULER)
            bottom += RULER_GAP + RULER
        _strip(canvas, ruler, along_rows, chunks, CHUNK_STYLE)
    if figure.tile is not None:
        rows, columns = view.footprint(figure.tile)
        width = max(frame.width * columns / view.columns, MIN_MARK)
        height = max(frame.height * rows / view.rows, MIN_MARK)
        canvas.rect(frame.x, frame.y, width, height, class_="tile", **TILE_STYLE)
    canvas.rect(*frame, fill="none", stroke=OUTLINE, class_="frame")  # over what is inside
    return bottom


def _strip(
    canvas: Canvas, box: Box, along_rows: bool, chunks: tuple[int, int, int], first: dict
) -> None:
    """A narrow bar of `chunks` on its own: a loop's ruler, or launches."""
    canvas.rect(*box, fill="#fff")
    _draw_chunks(canvas, box, along_rows, chunks, first)
    canvas.rect(*box, fill="none", stroke=OUTLINE)


def _draw_chunks(
    canvas: Canvas, box: Box, along_rows: bool, chunks: tuple[int, int, int], first: dict
) -> None:
    """`count` chunks and a tail across `box`, down (along rows) or across: the first in
    style `first`, cuts between them, the tail hatched."""
    count, chunk, tail = chunks
    length = box.height if along_rows else box.width
    step = length * chunk / (count * chunk + tail)

    def band(start: float, size: float, **style) -> None:
        if along_rows:
            canvas.rect(box.x, box.y + start, box.width, size, **style)
        else:
            canvas.rect(box.x + start, box.y, size, box.height, **style)

    band(0, max(step, MIN_MARK), **first)
    if step >= MIN_MARK:  # cuts closer than that would be a smear
        for cut in range(1, count + (tail > 0)):
            at = cut * step
            if along_rows:
                canvas.line(box.x, box.y + at, box.x + box.width, box.y + at, stroke=CUT)
            else:
                canvas.line(box.x + at, box.y, box.x + at, box.y + box.height, stroke=CUT)
    if tail:
        start = count * step
        band(start, max(length - start, MIN_MARK), **TAIL_STYLE)


# ---- a chart of benchmark ratios ----------------------------------------------------------

HALF_PLOT = 280  # px from the 1.0 line to either end of the plot
ROW = 22  # px per bar
FASTER, SLOWER = "#4e79a7", "#e15759"  # ptodsl's bars: blue and red tell apart to most eyes


def _doublings(rows: list[tuple[str, float]]) -> int:
    """The plot's reach either side of 1.0, in doublings: enough for every finite ratio."""
    spread = [abs(math.log2(r)) for _, r in rows if _drawable(r)]
    return max(1, math.ceil(max(spread, default=1)))


def _drawable(ratio: float) -> bool:
    return math.isfinite(ratio) and ratio > 0


def _power_label(exponent: int) -> str:
    return str(2**exponent) if exponent >= 0 else f"1/{2**-exponent}"


def ratio_chart_svg(rows: list[tuple[str, float]], title: str) -> str:
    """Horizontal bars of `baseline time / ptodsl time` per example, on a log scale centred
    at 1.0: a bar right of the line is ptodsl faster. A ratio that is not a positive number
    gets no bar, and "n/a"."""
    canvas = Canvas()
    canvas.text(MARGIN, MARGIN + 14, title, size=15, font_weight="bold")
    canvas.text(
        MARGIN,
        MARGIN + 34,
        "baseline time / ptodsl time, log scale: right of 1.00, ptodsl is faster",
        size=11,
        **MUTED,
    )
    names = max((text_width(name, 12) for name, _ in rows), default=0)
    centre = MARGIN + names + 12 + HALF_PLOT
    labels = max((text_width(f"{r:.2f}", 12) for _, r in rows if _drawable(r)), default=0)
    doublings = _doublings(rows)
    scale = (HALF_PLOT - labels - 8) / doublings  # px per doubling: labels fit past the bars
    top = MARGIN + 50
    for index, (name, ratio) in enumerate(rows):
        y = top + index * ROW
        canvas.text(centre - HALF_PLOT - 12, y + 15, name, anchor="end")
        _draw_ratio(canvas, centre, scale, y, ratio)
    if not rows:
        canvas.text(centre + 6, top + 15, "no ratios", **MUTED)
    bottom = top + max(len(rows), 1) * ROW + 4
    canvas.line(centre, top, centre, bottom, stroke="#222", stroke_width=1.5, class_="one")
    _ratio_axis(canvas, centre, bottom, doublings, scale)
    return canvas.svg()


def _draw_ratio(canvas: Canvas, centre: float, scale: float, y: float, ratio: float) -> None:
    """A bar from the 1.0 line to the ratio, labelled past its end."""
    if not _drawable(ratio):
        canvas.text(centre + 6, y + 15, "n/a", **MUTED)
        return
    end = centre + math.log2(ratio) * scale
    faster = ratio >= 1
    colour = FASTER if faster else SLOWER
    canvas.rect(min(centre, end), y + 5, abs(end - centre), 12, fill=colour, class_="bar")
    label, anchor = f"{ratio:.2f}", "start" if faster else "end"
    canvas.text(end + (6 if faster else -6), y + 15, label, anchor=anchor)


def _ratio_axis(canvas: Canvas, centre: float, y: float, doublings: int, scale: float) -> None:
    """The log axis under the bars: a tick per power of two, at most nine labelled, and
    which side is whose."""
    canvas.line(centre - HALF_PLOT, y, centre + HALF_PLOT, y, stroke="#222")
    step = math.ceil(doublings / 4)
    reach = doublings // step * step
    for exponent in range(-reach, reach + 1, step):  # 0 among them
        x = centre + exponent * scale
        canvas.line(x, y, x, y + 5, stroke="#222")
        canvas.text(x, y + 19, _power_label(exponent), size=11, anchor="middle")
    canvas.text(centre - 8, y + 38, "← baseline faster", anchor="end", **MUTED)
    canvas.text(centre + 8, y + 38, "ptodsl faster →", **MUTED)
