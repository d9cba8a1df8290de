"""What the code generator's target, PyPTO 0.2.0, supports: op forms and tile limits.

An op *form* is its name with the kind of each operand, `t` for a tensor and `s` for a
compile-time scalar: `sub(s,t)` is `1.0 - x`. Legalization rewrites every form the target
lacks; the rewrites live in `ptodsl.passes.legalize`. Which forms are native is each op's
registry entry's to say (`ptodsl.ir.ops`).
"""

from __future__ import annotations

import math

import attrs

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops


def form(node: ir.Op) -> str:
    """`sub(t,s)`: the op, a variant its attributes select (`cumsum[reverse]`), and whether
    each operand is a tensor or a scalar."""
    kinds = ",".join("s" if ir.is_scalar(operand) else "t" for operand in node.operands)
    variant = getattr(node.attrs, "variant", "")
    return f"{node.op}{variant}({kinds})"


@attrs.frozen
class Target:
    name: str
    forms: frozenset[str]
    max_rank: int
    max_tile_elements: int  # prod(tile) per op
    # The unified buffer a vector op's operands and result share, tile by tile: a binary
    # f32 op at max_tile_elements fits exactly, and so does a where of two f32 tensors (its
    # bool condition is not counted: [4, 4096] passes).
    ub_bytes: int
    # ... except that a where of tensors over rows of one 32-byte block needs this much
    # more: measured on [R, 8] f32 tiles, 96 B per row plus 12448 ([2048, 8] fails with
    # "WHERE_TT ... total size [209056] exceeds MEM_UB size [196608]", [1792, 8] passes;
    # [1024, 16], [256, 64] and [4, 4096] pass at the full budget).
    select_block_workspace_bytes: int
    max_auto_tiles: int  # tiles one vector phase may expand to without a loop
    # The most elements of a convolution block's [C_out/groups, rows * rest] sum (and of its
    # taps' [C_in/groups, rows * rest] matrices). Whole images win: #63 at 158 x 158 outputs
    # takes 418 us in blocks of 64 K elements (27 blocks), 211 us in 1 M, 115 us in 4 M (one);
    # 4 M f32 elements are 256 full vector tiles per op, within the auto-tile limit.
    conv_block_elements: int
    # The most multiply-adds of convolutions one launch may simulate. pypto's simulated
    # machine can run out of workspace slabs ("Slab alloc null", then no progress): #57 at
    # full shape fails in launches of 4 samples (1.2 G) and passes in launches of one
    # (0.3 G); #63 in launches of 8 (0.9 G) passes. Not the whole cause: #80 (padded, 256 x
    # 256) fails even as one sample (0.19 G).
    max_conv_macs_per_launch: int
    min_contiguous_bytes: int  # wanted bytes along the last axis of a tile
    reduce_align_bytes: int  # the reduced tensor's last-axis tile must be a multiple
    # Two or more row sums over rows longer than one full-size tile make pypto 0.2.0 spill
    # UB, and its simulator then fails ("[SIMULATION]: hasCall=0 opSequenceAfterOOO_";
    # InstanceNorm at [1024, 65536]); tiles of this many elements pass (InstanceNorm,
    # BatchNorm, GroupNorm at full size).
    spill_safe_tile_elements: int
    # cumsum along the last axis fails pypto 0.2.0's OoOSchedule pass with a last-axis tile
    # of 2048 or more ([128, 4000] with tiles (8, 2048), (4, 4096), (1, 4000)). Beside a row
    # sum (a reverse scan), tiles of 1024 x 16 rows fail too, and balanced last-axis tiles
    # ((16, 840), (16, 960), (16, 500) on [48, 2500]) fail pypto's tile verification: a scan
    # phase takes the spill-safe budget and exactly this last-axis tile, measured to run.
    max_scan_last_axis_tile: int
    max_inner_axis: int  # a matmul operand's contracted (inner) axis is below this
    cube_align: int  # cube tile extents are multiples of this (a fractal block)
    l0_operand_bytes: int  # L0A and L0B: the m·k and n·k tiles
    l0_result_bytes: int  # L0C: the fp32 m·n block
    l1_bytes: int  # L1: pypto checks one operand at a time; both must fit to run fast
    # The most one launch may need under SIM verification (`ptodsl.ir.sim_memory`'s estimate):
    # a bigger kernel is split into launches, so that `check` fits a 16 GiB machine.
    verify_memory_budget: float

    def supports(self, node: ir.Op) -> bool:
        return form(node) in self.forms


PYPTO_0_2_0 = Target(
    name="pypto-0.2.0",
    # Read from the op registry's `native` forms. Scalar-first arithmetic (`1.0 - x`), unary
    # minus, tanh, clip, expm1, erf, mean and the softmax family are missing or crash on some
    # builds, so legalization rewrites them; prod is absent too (its SIM step fails) and
    # nothing rewrites it.
    forms=ops.native_forms(),
    max_rank=4,
    max_tile_elements=16384,
    ub_bytes=196608,
    select_block_workspace_bytes=12448,
    max_auto_tiles=2048,
    conv_block_elements=1 << 22,
    max_conv_macs_per_launch=1 << 29,
    min_contiguous_bytes=1024,
    reduce_align_bytes=32,
    spill_safe_tile_elements=8192,
    max_scan_last_axis_tile=1024,
    max_inner_axis=65535,  # "inner axis must be less than 65535" for ND operands
    cube_align=16,
    l0_operand_bytes=64 * 1024,
    l0_result_bytes=128 * 1024,
    l1_bytes=512 * 1024,
    verify_memory_budget=10 * (1 << 30),
)


@attrs.frozen
class UbUse:
    """What the phase's widest op holds in UB: bytes per tile element (its tensor operands'
    and result's; a selection's condition uses none) and a fixed workspace (a where of
    tensors over rows of one 32-byte block: see Target.select_block_workspace_bytes)."""

    bytes_per_element: int
    workspace: int

    def held(self, tile: tuple[int, ...], itemsize: int, target: Target) -> int:
        """The UB bytes a tile of the phase (of elements of `itemsize`) holds: a row of the
        last axis in whole 32-byte blocks (a [4096, 1] f32 tile takes as much as [4096, 8]),
        the workspace too."""
        align = max(1, target.reduce_align_bytes // itemsize)
        rows = -(-tile[-1] // align) * align
        return self.bytes_per_element * math.prod(tile[:-1]) * rows + self.workspace


def ub_use(
    kernel: ir.Kernel,
    statements: tuple[int, ...] | list[int],
    shape: tuple[int, ...],
    target: Target,
) -> UbUse:
    itemsize = ir.compute_itemsize(kernel.body[statements[0]].value)  # the phase's, as tiled
    widest, selects = 1, False
    for index in statements:
        for node in ir.walk(kernel.body[index].value):
            if not (isinstance(node, ir.Op) and isinstance(node.type, ir.TensorType)):
                continue
            definition = ops.lookup(node.op)
            operands = node.operands[1:] if definition.selects else node.operands
            held = [o.type for o in (*operands, node) if isinstance(o.type, ir.TensorType)]
            widest = max(widest, sum(t.dtype.itemsize for t in held))
            selects |= definition.selects and len(held) == 3  # two tensor branches, result
    one_block_rows = shape[-1] * itemsize <= target.reduce_align_bytes
    workspace = target.select_block_workspace_bytes if selects and one_block_rows else 0
    return UbUse(widest, workspace)
