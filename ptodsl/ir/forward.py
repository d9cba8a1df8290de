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
    # a spec with a time loop (`spec.recurrence`): the program of one step, which forward
    # runs once per step; `buffers` and `calls` are then its
    step: Forward | None = None

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
    def single_call(self) -> bool:
        """One kernel call writes the spec's outputs (not a time loop's, called per step)."""
        return self.step is None and len(self.calls) == 1

    @property
    def kernels(self) -> tuple[ir.Kernel, ...]:
        return tuple(call.kernel for call in self.calls)

    @property
    def every_kernel(self) -> tuple[ir.Kernel, ...]:
        """Every mode's kernels, training mode's first: what the module defines."""
        return self.kernels + (() if self.eval is None else self.eval.kernels)

    @property
    def launch_count(self) -> int:
        """The launches one forward makes (a time loop's step's, once per step)."""
        launches = sum(kernel.launch_count for kernel in self.kernels)
        loop = self.spec.recurrence
        return launches if self.step is None or loop is None else launches * loop.count

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
    the spec's is an intermediate. For a spec with a time loop, `kernels` are one step's:
    the program runs the step's program once per step."""
    if spec.recurrence is not None:
        step = build_forward(spec.recurrence.step, kernels)
        return Forward(spec, step.buffers, step.calls, eval_program, step)
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
    if program.step is not None:
        return _loop_faults(program) + forward_faults(program.step) + _mode_faults(program)
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


def _loop_faults(program: Forward) -> list[str]:
    """A time loop's step reads each sequence's step, each carried value and the spec's
    other inputs, in their shapes; its outputs are each output's step and each carried
    value's next one; every output of the spec is one of those or a carried value's last."""
    spec, step = program.spec, program.step
    loop = spec.recurrence
    if loop is None or step is None or step.spec is not loop.step:
        return ["a step program without the spec's time loop"]
    faults: list[str] = []
    inputs = {t.name: t for t in spec.inputs}
    outputs = {o.name: o for o in spec.outputs}
    step_inputs = {t.name: t for t in step.spec.inputs}
    step_outputs = {o.name: o for o in step.spec.outputs}

    def shape(tensor: ir.Tensor) -> tuple[int, ...]:
        return tensor.declared_shape

    for step_input, sequence in loop.sliced:
        steps, *rest = shape(inputs[sequence])
        if steps < loop.count or tuple(rest) != shape(step_inputs[step_input]):
            faults.append(f"`{step_input}` is not one step of `{sequence}`")
    for step_input, step_output, start in loop.carried:
        shapes = {shape(step_inputs[step_input]), shape(step_outputs[step_output])}
        if shapes != {shape(inputs[start])}:
            faults.append(f"`{step_input}` is carried in other shapes than `{start}`'s")
    for step_output, output in loop.stacked:
        if shape(outputs[output]) != (loop.count, *shape(step_outputs[step_output])):
            faults.append(f"`{step_output}` is not one step of output `{output}`")
    for output, step_input in loop.final:
        if shape(outputs[output]) != shape(step_inputs[step_input]):
            faults.append(f"output `{output}` is not the last `{step_input}`")
    written = [o for _, o in loop.stacked] + [o for o, _ in loop.final]
    if sorted(written) != sorted(outputs):
        faults.append(f"the loop writes outputs {written}, the spec has {sorted(outputs)}")
    read = {name for name, _ in loop.sliced} | {name for name, _, _ in loop.carried}
    others = set(step_inputs) - read
    if not others <= set(inputs):
        faults.append(f"the step reads {sorted(others - set(inputs))}, which nothing provides")
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
    lines += _call_lines(program) if program.step is None else _loop_lines(program)
    for output in program.updates:
        lines.append(f"  update {output.updates} = {output.name}")
    lines += [f"  update {name}.num_batches_tracked += 1" for name in program.counted]
    text = "\n".join(lines) + "\n"
    return text if program.eval is None else text + "\n" + format_forward(program.eval)


def _loop_lines(program: Forward) -> list[str]:
    """The time loop: the carried values' starts, then per step its reads, the step's
    calls, its writes and the carried values' next ones; the outputs of their last."""
    loop, step = program.spec.recurrence, program.step
    assert loop is not None and step is not None
    lines = [f"  let {name} = {start}" for name, _, start in loop.carried]
    lines.append(f"  for {loop.variable} in range({loop.count})")
    lines += [f"    let {name} = {sequence}[{loop.variable}]" for name, sequence in loop.sliced]
    lines += ["  " + line for line in _call_lines(step)]
    lines += [f"    {output}[{loop.variable}] = {name}" for name, output in loop.stacked]
    lines += [f"    {name} = {next_name}" for name, next_name, _ in loop.carried]
    lines += [f"  {output} = {name}" for output, name in loop.final]
    return lines


def _call_lines(program: Forward) -> list[str]:
    """The intermediates and the kernel calls."""
    lines = []
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
    return lines
