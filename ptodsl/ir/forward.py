"""The forward program: the IR level above the kernels. `ModelNew.forward` checks its
arguments, allocates the intermediates, calls each kernel (its launches, their loops and
joins as the kernel's `Launches` plan them) in order, and returns the outputs. Codegen
prints it; `verify_forward` checks its invariants: every tensor a kernel reads is an
argument, a weight or an intermediate an earlier kernel wrote; every intermediate is
written once, before it is read, in the layout its readers read; every output is written
once; the kernels' launches cover their outputs exactly (`ptodsl.ir.verify`, per kernel)."""

from __future__ import annotations

import attrs

from ptodsl.frontend.diagnostics import FrameError
from ptodsl.ir import modules
from ptodsl.ir import nodes as ir


@attrs.frozen
class Buffer:
    """An intermediate: a device tensor `forward` allocates, one kernel writes, later
    kernels read."""

    name: str
    type: ir.TensorType


@attrs.frozen
class Call:
    """One kernel's launches. `reads` and `writes` name forward's tensors in the order of
    the kernel's inputs and outputs; `cut_because` is why the spec was cut after it."""

    kernel: ir.Kernel
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    cut_because: FrameError | None = None


@attrs.frozen
class Forward:
    """`spec` is the whole spec's kernel as checked: forward's signature, ModelNew's state
    and the outputs it returns. A spec whose result depends on the module mode has a program
    per mode: this one is training mode's, `eval` eval mode's."""

    spec: ir.Kernel
    buffers: tuple[Buffer, ...]
    calls: tuple[Call, ...]
    eval: Forward | None = None

    @property
    def updates(self) -> tuple[ir.Output, ...]:
        """The outputs forward copies into module buffers after its kernels."""
        return tuple(o for o in self.spec.outputs if o.updates is not None)

    @property
    def counted(self) -> tuple[str, ...]:
        """The modules whose `num_batches_tracked` each forward counts: the BatchNorms it
        updates (torch's instance norm leaves its counter alone)."""
        updated = {o.updates.rpartition(".")[0] for o in self.updates}
        return tuple(
            m.name
            for m in self.spec.modules
            if m.name in updated and modules.MODULES[m.kind].counts_batches
        )

    @property
    def kernels(self) -> tuple[ir.Kernel, ...]:
        return tuple(call.kernel for call in self.calls)

    @property
    def every_kernel(self) -> tuple[ir.Kernel, ...]:
        """Every mode's kernels, training mode's first: what the module defines."""
        return self.kernels + (() if self.eval is None else self.eval.kernels)

    @property
    def launch_count(self) -> int:
        return sum(kernel.launch_count for kernel in self.kernels)

    def written(self, tensor: str) -> tuple[ir.Kernel, ir.Output]:
        """The kernel that writes output or intermediate `tensor`, and its output."""
        kernel = next(call.kernel for call in self.calls if tensor in call.writes)
        return kernel, next(o for o in kernel.outputs if o.name == tensor)

    def read(self, tensor: str) -> tuple[ir.Kernel, ir.Input] | None:
        """The first kernel that reads `tensor`, and its input (None: no kernel does)."""
        for kernel in self.kernels:
            for t in kernel.inputs:
                if t.name == tensor:
                    return kernel, t
        return None


def read_name(kernel: ir.Kernel, tensor: ir.Input) -> str:
    """The forward tensor a kernel input reads (a twin reads its original's)."""
    return tensor.name if tensor.twin_of is None else tensor.twin_of


def build_forward(
    spec: ir.Kernel,
    kernels: list[tuple[ir.Kernel, FrameError | None]],
    eval_program: Forward | None = None,
) -> Forward:
    """The program that calls `kernels` in order; an output of a kernel that is not one of
    the spec's is an intermediate."""
    outputs = {o.name for o in spec.outputs}
    buffers = [
        Buffer(o.name, _layout(kernel, o))
        for kernel, _ in kernels
        for o in kernel.outputs
        if o.name not in outputs
    ]
    calls = [
        Call(
            kernel,
            tuple(read_name(kernel, t) for t in kernel.inputs),
            tuple(o.name for o in kernel.outputs),
            why,
        )
        for kernel, why in kernels
    ]
    return Forward(spec, tuple(buffers), tuple(calls), eval_program)


def forward_faults(program: Forward) -> list[str]:
    """What breaks the forward program's invariants (empty when none does)."""
    faults: list[str] = []
    spec = program.spec
    arguments = {t.name for t in spec.inputs}
    buffers = {b.name: b for b in program.buffers}
    outputs = {o.name: o for o in spec.outputs}
    if len(buffers) != len(program.buffers):
        faults.append("two intermediates share a name")
    if set(buffers) & (arguments | set(outputs)):
        faults.append("an intermediate is named as one of the spec's tensors")
    written: dict[str, int] = {}
    read_at: dict[str, list[int]] = {}
    for index, call in enumerate(program.calls):
        kernel = call.kernel
        if call.reads != tuple(read_name(kernel, t) for t in kernel.inputs):
            faults.append(f"call {index} ({kernel.name}) reads other tensors than its inputs")
        if call.writes != tuple(o.name for o in kernel.outputs):
            faults.append(f"call {index} ({kernel.name}) writes other tensors than its outputs")
        for tensor in kernel.inputs:
            source = read_name(kernel, tensor)
            read_at.setdefault(source, []).append(index)
            if source in arguments:
                continue
            if source not in buffers:
                faults.append(f"`{kernel.name}` reads `{source}`, which nothing provides")
            elif source not in written:
                faults.append(f"`{kernel.name}` reads `{source}` before any kernel writes it")
            elif tensor.twin_of is None and _layout(kernel, tensor) != buffers[source].type:
                faults.append(
                    f"`{kernel.name}` reads `{source}` as {_layout(kernel, tensor)}, which "
                    f"is written as {buffers[source].type}"
                )
        for output in kernel.outputs:
            if output.name in written:
                faults.append(f"`{output.name}` is written twice")
            written[output.name] = index
            layout = _layout(kernel, output)
            if output.name in buffers and layout != buffers[output.name].type:
                faults.append(f"`{kernel.name}` writes `{output.name}` in another layout")
            elif output.name not in buffers and output.name not in outputs:
                faults.append(f"`{kernel.name}` writes `{output.name}`, no tensor of forward")
            elif output.name in outputs and layout != _layout(spec, outputs[output.name]):
                faults.append(f"`{kernel.name}` writes output `{output.name}` in another shape")
    for name in outputs:
        if name not in written:
            faults.append(f"no kernel writes output `{name}`")
    for name in buffers:
        if name not in read_at:
            faults.append(f"intermediate `{name}` is written and never read")
    faults += _mode_faults(program)
    return faults


def _mode_faults(program: Forward) -> list[str]:
    """A mode-dependent spec has a program per mode: training mode's updates each module
    buffer it reads, eval mode's reads them, updates none and draws no mask, and both
    return the same outputs. Any other spec reads no buffers."""
    spec, other = program.spec, program.eval
    faults = []
    # a carried tensor (`state`) is read and replaced in every mode: not a module's
    carried = {t.name for t in spec.inputs if t.is_carried}
    read = sorted(str(t.init) for t in spec.buffer_inputs if t.name not in carried)
    updated = sorted(str(o.updates) for o in program.updates if o.updates not in carried)
    if spec.mode is ir.Mode.TRAINING and read != updated:
        faults.append(f"training mode reads buffers {read} and updates {updated}")
    if spec.mode is not ir.Mode.TRAINING and updated:
        faults.append(f"buffers {updated} are updated outside training mode")
    if spec.mode is None and read:
        faults.append(f"buffers {read} are read by a spec whose result ignores the mode")
    if spec.mode is ir.Mode.EVAL and spec.dropout_masks:
        faults.append("eval mode draws a dropout mask")
    if (other is not None) != (spec.mode is ir.Mode.TRAINING):
        faults.append("an eval program exactly when the spec's result depends on the mode")
    if other is None:
        return faults
    if other.spec.mode is not ir.Mode.EVAL:
        faults.append("the eval program is not in eval mode")
    names = [kernel.name for kernel in program.every_kernel]
    if len(set(names)) != len(names):  # one module defines every mode's kernels
        faults.append(f"kernels of the two modes share a name: {names}")

    def returned(kernel: ir.Kernel) -> list[tuple[str, tuple[int, ...]]]:
        return [(o.name, o.declared_shape) for o in kernel.returned_outputs]

    if returned(spec) != returned(other.spec):
        faults.append("the modes return different outputs")
    return faults + _mode_faults(other)


def _layout(kernel: ir.Kernel, tensor: ir.Tensor) -> ir.TensorType:
    """The tensor as forward holds it: all launches' extent along an axis they cut."""
    return ir.TensorType(kernel.forward_shape(tensor), tensor.type.dtype)


def format_forward(program: Forward) -> str:
    """`--emit forward`: the buffers and the calls, each with what it reads and writes."""
    mode = program.spec.mode
    lines = [f"forward {program.spec.name}" + ("" if mode is None else f" ({mode.value} mode)")]
    for mask in program.spec.dropout_masks:
        shape = ", ".join(map(str, mask.declared_shape))
        lines.append(f"  draw {mask.name}: {mask.type.dtype.value}[{shape}]  # {mask.init}")
    for buffer in program.buffers:
        shape = ", ".join(map(str, buffer.type.shape))
        lines.append(f"  buffer {buffer.name}: {buffer.type.dtype.value}[{shape}]")
    for call in program.calls:
        kernel = call.kernel
        launches = kernel.launch_count
        lines.append(
            f"  call {kernel.name}({', '.join(call.reads)}) -> {', '.join(call.writes)}"
            f"  # {launches} launch{'es' if launches > 1 else ''}"
        )
        if call.cut_because is not None:
            lines.append(f"    # cut after it: {call.cut_because.message}")
    for output in program.updates:
        lines.append(f"  update {output.updates} = {output.name}")
    lines += [f"  update {name}.num_batches_tracked += 1" for name in program.counted]
    text = "\n".join(lines) + "\n"
    return text if program.eval is None else text + "\n" + format_forward(program.eval)
