"""The lowering decisions of a forward program as JSON: per kernel, kernel-side shapes, tile
phases and loops; between kernels, the intermediates and why the spec was cut."""

from __future__ import annotations

import json
import math

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import Forward
from ptodsl.ir.target import PYPTO_0_2_0, Target, ub_use
from ptodsl.passes.tiling import auto_tiles


def _phase(kernel: ir.Kernel, phase: ir.Phase, itemsize: int, target: Target) -> dict:
    loop = phase.loop
    if phase.cube is not None:
        return {
            "statements": list(phase.statements),
            "kind": "cube",
            "shape": list(phase.shape),
            "cube_tile": {
                "m": list(phase.cube[0]),
                "k": list(phase.cube[1]),
                "n": list(phase.cube[2]),
            },
            "loop": None if loop is None else _loop(loop),
            "k_loop": None if phase.k_loop is None else _loop(phase.k_loop),
        }
    if phase.window is not None:
        return {
            "statements": list(phase.statements),
            "kind": "window",
            "shape": list(phase.shape),
            "steps": [_window_step(step) for step in phase.window],
            "loop": None if loop is None else _loop(loop),
        }
    if phase.conv is not None:
        plan = phase.conv
        return {
            "statements": list(phase.statements),
            "kind": "conv",
            "shape": list(phase.shape),
            "cube_tile": dict(zip("mkn", map(list, plan.cube), strict=True)),
            "batch_loop": plan.batch,
            "rows_loop": _loop(plan.rows),
            "pad": {"front": list(plan.front), "back": list(plan.back)},
            "padded_by_a_staging_launch": plan.staged,
            "depthwise_on_vector_cores": plan.vector,
            "tiles": [
                {"shape": list(shape), "tile": list(tile), "auto_tiles": auto_tiles(shape, tile)}
                for shape, tile in plan.tiles
            ],
        }
    entry = {
        "statements": list(phase.statements),
        "kind": "vector",
        "shape": list(phase.shape),
        "tile": list(phase.tile),
        "tile_elements": math.prod(phase.tile),
        "tile_last_axis_bytes": phase.tile[-1] * itemsize,
        "auto_tiles": auto_tiles(phase.shape, phase.tile),
        # counted again for the judging target: a plan tiled for another target (tests'
        # old tilings) is measured against this one's UB
        "ub": attrs.asdict(ub_use(kernel, phase.statements, phase.shape, target)),
        "loop": None,
    }
    if loop is not None:
        entry["loop"] = _loop(loop) | {
            "tiles_per_iteration": auto_tiles(phase.block_shape, phase.tile),
            "tail_tile": list(phase.tail_tile) if phase.tail_tile else None,
        }
    return entry


def _window_step(step: ir.WindowStep) -> dict:
    tiles = {
        "pad": (step.padded, step.frame_tile),
        "split": (step.split, step.split_tile),
        "result": (step.working_result, step.result_tile),
    }
    if step.swap_tile is not None:
        tiles = {"swap": (step.shape, step.swap_tile)} | tiles
    return {
        "axis": step.axis,
        "block": list(step.shape),
        "transposed": step.transposed,
        "pad": [step.front, step.back],
        "split": list(step.split),
        "taps": [list(tap) for tap in step.taps],
        "extent": step.extent,
        "tiles": {
            name: {"shape": list(shape), "tile": list(tile), "auto_tiles": auto_tiles(shape, tile)}
            for name, (shape, tile) in tiles.items()
        },
    }


def _loop(loop: ir.Loop) -> dict:
    return {"axis": loop.axis, "count": loop.count, "chunk": loop.chunk, "tail": loop.tail}


def _launches(launches: ir.Launches | None) -> dict | None:
    """How `forward` launches the kernel; the tensor shapes above are one launch's."""
    if launches is None:
        return None
    channels = launches.channels
    return {
        "count": launches.count,
        "chunk": launches.chunk,
        "sliced": list(launches.sliced),
        "channels": None
        if channels is None
        else {
            "count": channels.count,
            "chunk": channels.chunk,
            "inputs": [{"name": c.name, "axis": c.axis, "chunk": c.chunk} for c in channels.inputs],
        },
        "rows": None
        if launches.rows is None
        else {
            "count": launches.rows.count,
            "chunk": launches.rows.chunk,
            "variable": launches.rows.variable,
        },
    }


def plan_of(kernel: ir.Kernel, target: Target = PYPTO_0_2_0) -> dict:
    """One kernel's plan (`program_plan` gives a forward program's)."""
    return {"kernels": [_kernel_plan(kernel, target)]}


def program_plan(program: Forward, target: Target = PYPTO_0_2_0) -> dict:
    """The plan of every kernel `forward` calls, in order. A program of several kernels
    also lists its intermediates, and per kernel what it reads and writes and why the spec
    was cut after it (a one-kernel plan keeps the one-kernel form)."""
    if len(program.calls) == 1:
        return plan_of(program.calls[0].kernel, target)
    kernels = []
    for call in program.calls:
        entry = _kernel_plan(call.kernel, target)
        entry["reads"] = list(call.reads)
        entry["writes"] = list(call.writes)
        why = call.cut_because
        entry["cut_after_because"] = None if why is None else why.message
        kernels.append(entry)
    intermediates = {
        b.name: {"dtype": b.type.dtype.value, "shape": list(b.type.shape)} for b in program.buffers
    }
    return {"intermediates": intermediates, "kernels": kernels}


def _kernel_plan(kernel: ir.Kernel, target: Target) -> dict:
    assert kernel.schedule is not None, "the plan exists after tiling"
    itemsize = ir.compute_itemsize(kernel.body[-1].value)

    def tensors(group: tuple[ir.Tensor, ...]) -> dict:
        return {
            t.name: {
                "dtype": t.type.dtype.value,
                "shape": list(t.type.shape),
                "kernel_shape": list(t.kernel_shape),
            }
            for t in group
        }

    return {
        "name": kernel.name,
        "target": target.name,
        "inputs": tensors(kernel.inputs),
        "outputs": tensors(kernel.outputs),
        "launches": _launches(kernel.launches),
        "phases": [_phase(kernel, p, itemsize, target) for p in kernel.schedule.phases],
        "decisions": list(kernel.decisions),
    }


def format_plan(program: Forward) -> str:
    return json.dumps(program_plan(program), indent=2) + "\n"
