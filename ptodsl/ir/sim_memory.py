"""What pypto 0.2.0's SIM verification needs in memory for one kernel launch, estimated from
the kernel before it runs.

The mechanism (pypto's source at r0.2.0; `flow_verifier.cpp`, `function.h`): the calculator
keeps copies of every input and output, the values of every op it ran, and for every loop
iteration two deep copies (before and after) of every whole tensor the loop body touches.
Nothing is freed until the next verified launch has run: all of one launch's copies are
still held while the next makes its own, so launches need twice one launch's copies.
Measured peak RSS of the worker, graph verification, no goldens:

| kernel                     | tensor bytes | iterations | peak GiB          | per tensor byte |
|----------------------------|--------------|------------|-------------------|-----------------|
| y = max(x, 0), 8192 x 8192 | 512 MiB      | 1, 2       | 5.3, 6.4          | 10, 12          |
| [8192, 32] @ [32, 8192]    | 259 MiB      | 1, 2, 4, 8 | 3.2, 3.5, 4.5, 6.4 | 8 + 2 per loop  |
| MaxPool3d (#43), batch 1   | 37 MiB       | 1          | 2.4               | 54: taps kept   |
| same, batch 2 and 4        | 74, 148 MiB  | 2, 4       | 3.9, 7.9          | 48, 53          |
| #7, 2 launches of 8192 rows | 514 MiB each | 4          | 13.1 (+ 1 GiB C)  | 23              |
| #7, 4 launches of 4096 rows | 266 MiB each | 4          | 8.4 (+ 1 GiB C)   | 27              |
| #43, 4 launches of 4        | 148 MiB each | 4          | 13.6 (+ x, y)     | 86              |

Convolutions with the taps stacked (peak RSS of the whole check at full shape): #62 in 8
launches of 2 samples 2.7 GB, #63 in 4 of 4 3.4 GB, #87 in 4 of 4 4.3 GB, all below the
estimate. A convolution that pads its input inside the kernel grows by about 1 GB per launch
and frees nothing between launches: #65 (transposed, 32 -> 64 channels, 128 x 128) peaks at
2.4 GB in one launch, 3.4 GB in two and 17.2 GB in its 16 at full shape, where the estimate
says 1.2; the workers' memory guard (`ptodsl.runtime.workers`) stops such a check before the machine
runs out.
"""

from __future__ import annotations

import math

from ptodsl.ir import nodes as ir
from ptodsl.ir import ops
from ptodsl.ir.forward import Forward
from ptodsl.ir.target import PYPTO_0_2_0
from ptodsl.passes.tiling import conv_rows_per_block

GIB = 1 << 30
BASE_BYTES = 0.5 * GIB  # the worker's torch and pypto before any tensor
COPIES_PER_TENSOR_BYTE = 8  # inputs, outputs and op values kept by the calculator
WINDOW_COPIES_PER_TENSOR_BYTE = 48  # a window kernel's pads, splits and taps are all kept
# A convolution's tap views, matrices and products are all kept too: #63 at full shape in 2
# launches of 8 samples (138 MB each, 8 iterations) peaked at 14.3 GB, 52 copies.
CONV_COPIES_PER_TENSOR_BYTE = 36
COPIES_PER_ITERATION = 2  # the before and after copies of each loop iteration
# Before the loops pass has run: as many iterations as a matmul's default chunks.
ASSUMED_ITERATIONS = 4


def tensor_bytes(kernel: ir.Kernel) -> int:
    """The bytes of one launch's inputs and outputs, and of the whole tensors its matmuls
    compute for later phases: a loop after the matmul copies those too (level 3 #31 at a
    56 x 56 image: attention's scores, 315 MB beside the softmax's 315 MB output, 4
    iterations; 12.3 GiB measured where inputs and outputs alone said 5.7 GiB)."""
    arguments = sum(t.type.size * t.type.dtype.itemsize for t in (*kernel.inputs, *kernel.outputs))
    phases = kernel.schedule.phases if kernel.schedule is not None else ()
    products = (
        kernel.body[index]
        for phase in phases
        if phase.cube is not None
        for index in phase.statements
    )
    return arguments + sum(
        stmt.value.type.size * stmt.value.type.dtype.itemsize
        for stmt in products
        if isinstance(stmt, ir.Let)
    )


def has_window(kernel: ir.Kernel) -> bool:
    return any(
        isinstance(node, ir.Op) and ops.lookup(node.op).kind is ops.Kind.WINDOW
        for stmt in kernel.body
        for node in ir.walk(stmt.value)
    )


def iterations(kernel: ir.Kernel) -> int:
    """Loop iterations of one launch: planned ones once the loops pass has run. A
    convolution runs one per block of rows of each batch element (its batch loop holds its
    rows loop): before tiling, as many as blocks of the target's size make."""
    if kernel.schedule is None:
        convolutions = ir.convolutions(kernel)
        if not convolutions:
            return ASSUMED_ITERATIONS
        return sum(_conv_iterations(ir.ConvGeometry.of(conv)) for conv in convolutions)
    loops = [p.loop for p in kernel.schedule.phases if p.loop]
    count = sum(loop.count + (loop.tail > 0) for loop in loops)
    for phase in kernel.schedule.phases:
        if phase.conv is not None:
            rows = phase.conv.rows
            count += phase.conv.batch * (rows.count + (rows.tail > 0))
    return max(1, count)


def _conv_iterations(geometry: ir.ConvGeometry) -> int:
    """A convolution's blocks before tiling plans them, at the target's block size."""
    rows = conv_rows_per_block(geometry, PYPTO_0_2_0, pads=True)  # the more blocks
    return geometry.batch * -(-geometry.out[0] // rows)


def verification_bytes(kernel: ir.Kernel) -> float:
    """The estimated peak memory of one launch of `kernel` under graph verification (beside
    the previous launch's loop copies, when there are launches)."""
    copies = (
        WINDOW_COPIES_PER_TENSOR_BYTE
        if has_window(kernel)
        else CONV_COPIES_PER_TENSOR_BYTE
        if ir.convolutions(kernel)
        else COPIES_PER_TENSOR_BYTE
    )
    copies += COPIES_PER_ITERATION * iterations(kernel)
    held = 2 if kernel.launches is not None else 1
    estimate = BASE_BYTES + held * copies * tensor_bytes(kernel)
    if kernel.launches is not None and kernel.launches.rows is not None:
        estimate += STACK_COPIES * stacked_bytes(kernel)
    return estimate


# A row launch's convolution stacks every tap's view of the input per row: one sample of
# #68 (32 channels, 75 taps, 68 x 68 outputs per row: 44 MiB stacked per row) in one launch
# of 8 rows peaked at >= 3.8 GB, of 22 rows at >= 11.4 GB (sampled every 10 s), where the
# copies above say 1.1 and 3.3 GiB. With this term #68's launches of 11 rows are estimated
# at 7.4 GiB; they peak at 7.3 GB. Counted for row launches only: the same term would say
# #72's launches (measured 19.7 GB, estimated 7.2) need more launches than the plan that
# passed at full shape, which has not been re-run since.
STACK_COPIES = 4


def stacked_bytes(kernel: ir.Kernel) -> int:
    """The bytes of every cube convolution's stacked taps over one launch's rows."""
    total = 0
    for conv in ir.convolutions(kernel):
        geometry = ir.ConvGeometry.of(conv)
        if geometry.depthwise:
            continue
        columns = geometry.batch * geometry.out[0] * math.prod(geometry.out[1:])
        per_group = geometry.stacked * columns * conv.type.dtype.itemsize
        total += geometry.attributes.groups * per_group
    return total


def one_worker_bytes(program: Forward) -> float:
    """The estimated peak memory of one worker running every launch of every kernel of
    `program`: a worker frees nothing between launches (#65 above), so every launch's
    copies count. Several kernels' launches add up alike: level-2 #19 (128 launches of a
    transposed convolution, then a GroupNorm) peaked at 15.7 GB in one worker, #7 (4
    launches of a 3-D convolution, then channel-wise work) at 15.2 GB. A time loop's
    launches repeat per step."""
    launches = sum(k.launch_count * verification_bytes(k) for k in program.kernels)
    loop = program.spec.recurrence
    return launches if program.step is None or loop is None else launches * loop.count


def worker_per_launch(program: Forward) -> bool:
    """Whether `check` runs each launch of `program` (of any of its kernels) in a worker of
    its own: when one worker running them all could exceed the verification budget. A
    worker each costs ~3 s of start-up per launch (#56: 27 s in 4 workers, 16 s in one)."""
    return program.launch_count > 1 and one_worker_bytes(program) > PYPTO_0_2_0.verify_memory_budget


# The golden side of a check (measured on #9, a 16384 x 16384 output: 8 GiB): the float64
# golden, the spec's own float64 value and error scale, and their temporaries per output
# element; each input and its float64 copy.
REFERENCE_BYTES_PER_OUTPUT_ELEMENT = 32
REFERENCE_BYTES_PER_INPUT_ELEMENT = 16
# A convolution's error scale is four float64 convolutions: #68 evaluated whole peaked at
# 20.7 GB, 58 bytes per output element beside its inputs.
CONV_REFERENCE_BYTES_PER_OUTPUT_ELEMENT = 64
# Evaluated a launch's samples at a time (`checking._scales`), the float64 golden and error
# scale stay whole; the evaluation's temporaries are one launch's.
KEPT_BYTES_PER_OUTPUT_ELEMENT = 16


def _unfolded_bytes(conv: ir.Op) -> int:
    """torch's float64 convolution on the CPU unfolds one sample's input into a matrix of
    every tap's view, [C_in/groups * taps, outputs] (a transposed one's [C_out/groups * taps,
    inputs]): #68's is 10.1 GB, and its golden side peaked at 16.1 GB with 6 GB beside it."""
    geometry = ir.ConvGeometry.of(conv)
    taps = len(geometry.taps)
    if geometry.transposed:
        return geometry.group_out * taps * math.prod(geometry.spatial) * 8
    return geometry.group_in * taps * math.prod(geometry.out) * 8


# The error bounds' float64 evaluation of the spec (`checking.error_bounds`) holds a value
# and a scale (16 bytes an element) of every let still to be read, and inside the
# statement it is at, an op's operands, result and temporaries: measured, the largest op
# node's bytes about three times (level 3 #31 at a 48 x 48 image: its scores' softmax,
# 0.63 GiB a node, 2.0 GiB over the process's start; #43 at batch 16 and #50 at batch 4:
# 3.1 and 2.5 GiB, within 3 % of this rule). The outputs-only rule above had #50 at 7.0
# GiB where its golden reached 10.3 GiB.
EVALUATION_BYTES_PER_ELEMENT = 16
EVALUATION_NODE_COPIES = 3


def evaluation_bytes(checked: ir.Kernel) -> float:
    """The bytes the spec's float64 evaluation with error scales holds at its peak."""
    sizes = {
        stmt.name: stmt.value.type.size
        for stmt in checked.body
        if isinstance(stmt, ir.Let) and isinstance(stmt.value.type, ir.TensorType)
    }
    ending = ir.let_lifetimes(checked.body)
    live = peak = 0
    for index, stmt in enumerate(checked.body):
        nodes = [
            node.type.size
            for node in ir.walk(stmt.value)
            if isinstance(node, ir.Op) and isinstance(node.type, ir.TensorType)
        ]
        peak = max(peak, live + EVALUATION_NODE_COPIES * max(nodes, default=0))
        if isinstance(stmt, ir.Let):
            live += sizes.get(stmt.name, 0)
        live -= sum(sizes.get(name, 0) for name in ending.get(index, ()))
    return EVALUATION_BYTES_PER_ELEMENT * peak


def check_bytes(checked: ir.Kernel, program: Forward) -> float:
    """The estimated peak memory of `ptodsl check` of `checked` lowered to `program`: the
    larger of computing the golden and simulating one launch beside the whole outputs (and
    the intermediates between kernels, all held until forward returns)."""
    outputs = sum(o.type.size for o in checked.outputs)
    inputs = sum(i.type.size for i in checked.inputs)
    per_output = (
        CONV_REFERENCE_BYTES_PER_OUTPUT_ELEMENT
        if ir.convolutions(checked)
        else REFERENCE_BYTES_PER_OUTPUT_ELEMENT
    )
    kernels = program.kernels
    launches = kernels[0].launches if len(kernels) == 1 else None
    parts = 1 if launches is None else launches.count
    golden = per_output * outputs
    if parts > 1:
        golden = KEPT_BYTES_PER_OUTPUT_ELEMENT * outputs + per_output * outputs / parts
    golden += max(map(_unfolded_bytes, ir.convolutions(checked)), default=0)
    golden += evaluation_bytes(checked) / parts
    reference = BASE_BYTES + golden + REFERENCE_BYTES_PER_INPUT_ELEMENT * inputs
    # The worker's whole outputs and their copy on the way back; the caller's inputs.
    between = sum(b.type.size * b.type.dtype.itemsize for b in program.buffers)
    workers = (
        max(map(verification_bytes, kernels))
        if worker_per_launch(program)
        else one_worker_bytes(program)
    )
    simulation = workers + 8 * outputs + 4 * inputs + between
    return max(reference, simulation)
