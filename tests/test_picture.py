"""Pictures of plans and of benchmark ratios: well-formed, deterministic SVG that says what the
plan says, escapes what specs name, and never writes text over a shape."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import attrs
import pytest
from conftest import ROOT

import ptodsl
from ptodsl.emission.picture import CHAR_WIDTH, Canvas, plan_svg, ratio_chart_svg
from ptodsl.ir import nodes as ir
from ptodsl.ir.plan import plan_of

KERNELBENCH = ROOT / "examples" / "kernelbench"
SVG = "{http://www.w3.org/2000/svg}"
PICTURED = {
    "elementwise": "31_elu",
    "reduction": "47_sum_dim",
    "two phases": "48_mean_dim",
    "matmul": "1_square_matmul",
    "matmul with a tail": "8_matmul_irregular_shapes",
    "K loop": "4_matrix_vector_multiply",
    "loop over a middle axis": "33_batch_norm",
    "window": "43_max_pool_3d",
    "convolution": "56_conv2d_asymmetric_input_asymmetric_kernel",
    "staged convolution": "75_conv_transpose2d_strided_grouped_padded_dilated",
    "channel launches": "54_conv3d_square_input_square_kernel",
    "launches": "9_tall_skinny_matmul",
}
RATIOS = [
    ("31_elu", 1.23),
    ("23_softmax", 0.61),
    ("1_square_matmul", 2.87),
    ("47_sum_dim", 1.0),
    ("56_conv2d", 0.08),
    ("94_mse_loss", float("nan")),
    ("88_min_gpt_new_gelu", 12.5),
]


@cache
def lowered(stem: str) -> ir.Kernel:
    return ptodsl.compile(KERNELBENCH / f"{stem}.pto", tuning=None).lowered.kernel


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [element.text or "" for element in root.iter(f"{SVG}text")]


def tile_texts(entry: dict) -> list[list[int]]:
    """The tile shapes the plan gives a phase, which its picture must state."""
    if entry["kind"] == "vector":
        return [entry["tile"]]
    if entry["kind"] == "window":
        return [t["tile"] for step in entry["steps"] for t in step["tiles"].values()]
    return list(entry["cube_tile"].values())


@pytest.mark.parametrize("stem", PICTURED.values(), ids=PICTURED.keys())
def test_a_plan_picture_states_the_plan(stem):
    kernel = lowered(stem)
    svg = plan_svg(kernel)
    assert plan_svg(kernel) == svg, "deterministic"
    words = "\n".join(texts(parsed(svg)))
    assert kernel.name in words
    phases = plan_of(kernel)["kernels"][0]["phases"]
    assert f"phase {len(phases)} of {len(phases)}" in words
    for entry in phases:
        for tile in tile_texts(entry):
            assert "[" + ", ".join(map(str, tile)) + "]" in words
    if kernel.launches is not None:
        assert f"{kernel.launches.count} launches × {kernel.launches.chunk}" in words


def test_the_loop_and_its_tail_are_labelled():
    words = texts(parsed(plan_svg(lowered("8_matmul_irregular_shapes"))))
    assert "loop 3 × 2064 rows + tail 2013 (axis 0), the first shaded" in words
    assert "tail 2013 rows" in words


def test_the_tile_is_drawn_at_the_frames_origin_and_inside_it():
    root = parsed(plan_svg(lowered("47_sum_dim")))
    frame = root.find(f"{SVG}rect[@class='frame']")
    tile = root.find(f"{SVG}rect[@class='tile']")
    assert (tile.get("x"), tile.get("y")) == (frame.get("x"), frame.get("y"))
    assert float(tile.get("width")) < float(frame.get("width"))  # 64 of 256 columns
    assert tile.get("height") == frame.get("height")  # all 256 rows


def test_hostile_names_are_escaped():
    kernel = lowered("31_elu")
    hostile = attrs.evolve(
        kernel,
        name='<k&"x>',
        inputs=(attrs.evolve(kernel.inputs[0], name="</text><script>"),),
    )
    svg = plan_svg(hostile)
    assert "<script>" not in svg and '<k&"' not in svg
    words = texts(parsed(svg))
    assert '<k&"x>' in words
    assert any(w.startswith("</text><script>: f32") for w in words)


def test_text_the_grammar_never_makes_is_escaped_too():
    canvas = Canvas()
    canvas.text(0, 10, '<&"\x01>')
    assert texts(parsed(canvas.svg())) == ['<&"\ufffd>']  # a control character is no XML


def text_box(element: ET.Element) -> tuple[float, float, float, float]:
    size = float(element.get("font-size"))
    width = len(element.text) * size * CHAR_WIDTH
    x, y = float(element.get("x")), float(element.get("y"))
    shift = {"start": 0, "middle": width / 2, "end": width}[element.get("text-anchor", "start")]
    return x - shift, y - 0.8 * size, x - shift + width, y + size / 4


def shape_box(element: ET.Element) -> tuple[float, float, float, float]:
    if element.tag == f"{SVG}line":
        x1, y1, x2, y2 = (float(element.get(k)) for k in ("x1", "y1", "x2", "y2"))
        return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)
    x, y = float(element.get("x")), float(element.get("y"))
    return x, y, x + float(element.get("width")), y + float(element.get("height"))


def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    slack = 0.5  # touching is not overlapping
    ranges = ((a[0], b[2]), (b[0], a[2]), (a[1], b[3]), (b[1], a[3]))
    return all(low < high - slack for low, high in ranges)


def picture(label: str) -> str:
    if label == "ratio chart":
        return ratio_chart_svg(RATIOS, "ratios")
    return plan_svg(lowered(PICTURED[label]))


@pytest.mark.parametrize("label", [*PICTURED, "ratio chart"])
def test_no_text_overlaps_a_shape_or_another_text(label):
    root = parsed(picture(label))
    drawn = [e for e in root if e.tag != f"{SVG}defs"]
    words = [text_box(e) for e in drawn if e.tag == f"{SVG}text"]
    shapes = [shape_box(e) for e in drawn if e.tag in (f"{SVG}rect", f"{SVG}line")]
    for index, word in enumerate(words):
        assert not any(overlap(word, shape) for shape in shapes)
        assert not any(overlap(word, other) for other in words[index + 1 :])
    width, height = float(root.get("width")), float(root.get("height"))
    assert all(box[2] <= width and box[3] <= height for box in words + shapes), "not clipped"


def test_ratio_bars_point_right_when_ptodsl_is_faster():
    svg = ratio_chart_svg(RATIOS, "tuned / baseline")
    assert ratio_chart_svg(RATIOS, "tuned / baseline") == svg
    root = parsed(svg)
    one = float(root.find(f"{SVG}line[@class='one']").get("x1"))
    bars = root.findall(f"{SVG}rect[@class='bar']")
    drawn = [ratio for _, ratio in RATIOS if not math.isnan(ratio)]  # nan has no bar
    assert len(bars) == len(drawn)
    for bar, ratio in zip(bars, drawn, strict=True):
        left = float(bar.get("x"))
        right = left + float(bar.get("width"))
        if ratio > 1:
            assert left == pytest.approx(one) and right > one
        elif ratio < 1:
            assert left < one and right == pytest.approx(one)
        else:
            assert right - left == pytest.approx(0)
    words = texts(root)
    assert {"1.23", "0.61", "2.87", "1.00", "0.08", "12.50", "n/a"} <= set(words)


def test_a_chart_of_nothing_is_still_a_picture():
    assert "no ratios" in texts(parsed(ratio_chart_svg([], "empty")))


def test_speedups_turn_the_ratio_column_around(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.run import HEADER, speedups

    def row(example: str, baseline: str, tuned: str) -> tuple[str, ...]:
        cells = dict.fromkeys(HEADER, "")
        cells |= {"example": example, "baseline us": baseline, "tuned us": tuned}
        return tuple(cells[column] for column in HEADER)

    rows = [row("fast", "10.00", "5.00"), row("no baseline", "", "3.00"), row("slow", "2", "8")]
    assert speedups(rows) == [("fast", 2.0), ("slow", 0.25)]


def ptodsl_command(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ptodsl", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def test_compile_writes_the_plans_picture(tmp_path):
    spec = KERNELBENCH / "31_elu.pto"
    out = tmp_path / "tmp" / "elu.svg"
    out.parent.mkdir()
    result = ptodsl_command("compile", spec, "--emit", "plan", "--format", "svg", "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == plan_svg(lowered("31_elu"))
    printed = ptodsl_command("compile", spec, "--emit", "plan", "--format", "svg")
    assert printed.stdout == out.read_text()
    text = ptodsl_command("compile", spec, "--emit", "plan", "--format", "text")
    assert text.stdout == ptodsl_command("compile", spec, "--emit", "plan").stdout


@pytest.mark.parametrize("stage", ["pypto", "kernelbench", "ir"])
def test_svg_is_only_a_format_of_the_plan(stage, tmp_path):
    out = tmp_path / "never.svg"
    spec = KERNELBENCH / "31_elu.pto"
    result = ptodsl_command("compile", spec, "--emit", stage, "--format", "svg", "-o", out)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ptodsl compile")
    assert "--format svg draws the plan: use it with --emit plan" in result.stderr
    assert not out.exists()


def test_bench_run_refuses_a_chart_it_could_not_write():
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--chart", "/no/such/folder/chart.svg"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "--chart: no folder /no/such/folder" in result.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH: no browser to render with")
def test_a_browser_renders_the_picture(tmp_path):
    svg, png = tmp_path / "elu.svg", tmp_path / "elu.png"
    svg.write_text(plan_svg(lowered("31_elu")))
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={png}",
            "--window-size=800,400",
            svg.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
