"""Emits the PyPTO 0.2.0 module for a lowered kernel: a cached kernel factory per kernel,
with shapes and scalars as closure constants, and a KernelBench-style `ModelNew`."""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from ptodsl import __version__, ir, ops
from ptodsl.passes.chain_reductions import chain_axes
from ptodsl.pyexpr import (
    SCALAR_SPELLING,
    PythonEmitter,
    docstring_filename,
    emit_assignment,
    uses_math,
)

PYPTO_SPELLING = ops.spellings("pypto")

_HELPERS = '''
def _expect(name, tensor, shape, dtype):
    """forward's contract: rank, shape and dtype exactly as the spec declares them."""
    assert tensor.dim() == len(shape), f"{name}: expected rank {len(shape)}, got {tensor.dim()}"
    assert tuple(tensor.shape) == shape, f"{name}: expected shape {shape}, got {tensor.shape}"
    assert tensor.dtype == dtype, f"{name}: expected {dtype}, got {tensor.dtype}"


def _run_mode():
    """AIKG_PYPTO_RUN_MODE picks the run mode (0 = NPU, 1 = SIM); unset: NPU if present."""
    mode = os.environ.get("AIKG_PYPTO_RUN_MODE")
    if mode is not None:
        return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM
    has_npu = importlib.util.find_spec("torch_npu") is not None
    return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
'''

_EXPECT_ARGUMENT = '''

def _expect_argument(name, given, built_for):
    """A construction argument must be the value this kernel is built for."""
    assert given == built_for, f"{name}: this kernel is built for {built_for!r}, not {given!r}"
'''


def _shape_text(factors: tuple[tuple[ir.DimFactor, ...], ...]) -> str:
    axes = [" * ".join(str(f) for f in axis) or "1" for axis in factors]
    return "(" + ", ".join(axes) + ("," if len(axes) == 1 else "") + ")"


def _tuple_text(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


def _arguments_text(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def factory_name(kernel: ir.Kernel) -> str:
    return f"make_{kernel.name}_kernel"


def factory_arguments(kernel: ir.Kernel) -> list[str]:
    """The kernel's scalars. Dims are not arguments: tiles, views and loops are planned for
    their sizes, so the factory fixes them rather than invite a call with other sizes."""
    return [p.name for p in kernel.kernel_params]


class _Block:
    """The statements of one phase as straight-line code: the whole phase, one loop
    iteration (`rows` indices of the loop axis at `offset`), or the tail after the loop.

    Inside a loop, tensors from outside the phase that span the rows are read through
    views; lets that later phases read are assembled into full-size temporaries; a
    reduction over the rows accumulates into its output."""

    def __init__(self, kernel: ir.Kernel, phase: ir.Phase, later_reads: set[str], suffix: str,
                 rows: int | None, offset: str, block_index: str):  # fmt: skip
        self.kernel = kernel
        self.phase = phase
        self.later_reads = later_reads
        self.suffix = suffix
        self.rows = rows
        self.axis = phase.loop.axis if phase.loop else 0
        self.offset = offset
        self.block_index = block_index  # "i" inside the loop, the tail's index after it
        self.full = {t.name: t.kernel_shape for t in (*kernel.inputs, *kernel.outputs)}
        self.local: dict[str, str] = {}  # let name -> its name inside this block

    def spans_rows(self, shape: tuple[int, ...]) -> bool:
        """Whether a tensor of this shape is split by the loop (spans the loop axis)."""
        return self.rows is not None and shape[self.axis] != 1

    def sized(self, shape: tuple[int, ...]) -> list[int]:
        """The shape with the loop axis cut to this block's extent."""
        return [self.rows if axis == self.axis else size for axis, size in enumerate(shape)]

    def name(self, ref: ir.Ref) -> str:
        if ref.name in self.local:
            return self.local[ref.name]
        if isinstance(ref.type, ir.TensorType) and self.spans_rows(ref.type.shape):
            return f"{ref.name}_{self.suffix}"
        return ref.name

    def block_sized(self, node: ir.Expr) -> ir.Expr:
        """An explicit expansion spanning the loop axis covers this block, not the axis."""
        if self.rows is None or not (isinstance(node, ir.Op) and node.op == "expand"):
            return node
        shape = node.attrs.shape
        if not self.spans_rows(shape):
            return node
        return attrs.evolve(node, attrs=ir.Expand(tuple(self.sized(shape))))

    def offsets(self, rank: int) -> str:
        offsets = [self.offset if axis == self.axis else "0" for axis in range(rank)]
        return "[" + ", ".join(offsets) + "]"

    def views(self, statements: list[ir.Stmt], indent: str) -> list[str]:
        """Views of the rows this block reads from tensors made outside the phase."""
        made_here = {s.name for s in statements if isinstance(s, ir.Let)}
        seen: dict[str, tuple[int, ...]] = {}
        for stmt in statements:
            for node in ir.walk(stmt.value):
                if isinstance(node, ir.Ref) and node.name not in made_here:
                    if isinstance(node.type, ir.TensorType) and self.spans_rows(node.type.shape):
                        seen.setdefault(node.name, node.type.shape)
        lines = []
        for name, shape in seen.items():
            lines.append(
                f"{indent}{name}_{self.suffix} = pypto.view({name}, {self.sized(shape)}, "
                f"{self.offsets(len(shape))})"
            )
        return lines

    def lines(self, indent: str) -> list[str]:
        statements = [self.kernel.body[i] for i in self.phase.statements]
        emitter = PythonEmitter(PYPTO_SPELLING, SCALAR_SPELLING, self.name)
        lines = self.views(statements, indent)
        for stmt in statements:
            value = ir.map_expr(stmt.value, self.block_sized)
            if isinstance(stmt, ir.Let):
                lines += self.let(stmt, value, emitter, indent)
            else:
                lines += self.store(stmt, value, emitter, indent)
        return lines

    def reduces_loop_axis(self, stmt: ir.Stmt) -> bool:
        return self.rows is not None and self.axis in chain_axes(stmt.value)

    def let(self, stmt: ir.Let, value: ir.Expr, emitter: PythonEmitter, indent: str) -> list[str]:
        if self.reduces_loop_axis(stmt):
            # One partial result per block, reduced once after the loop (`_phase_lines`);
            # accumulating into a temporary instead computes zeros on pypto 0.2.0.
            local = f"{stmt.name}_{self.suffix}"
            lines = emit_assignment(emitter, local, value, indent)
            rank = stmt.value.type.rank
            offsets = [self.block_index if a == self.axis else "0" for a in range(rank)]
            parts = f"{stmt.name}_parts"
            return lines + [f"{indent}pypto.assemble({local}, [{', '.join(offsets)}], {parts})"]
        if not (self.spans_rows(stmt.value.type.shape) and stmt.name in self.later_reads):
            self.local[stmt.name] = stmt.name
            return emit_assignment(emitter, stmt.name, value, indent)
        # Read by a later phase: this block's rows go into the full-size temporary.
        local = f"{stmt.name}_{self.suffix}"
        lines = emit_assignment(emitter, local, value, indent)
        self.local[stmt.name] = local
        offsets = self.offsets(stmt.value.type.rank)
        return lines + [f"{indent}pypto.assemble({local}, {offsets}, {stmt.name})"]

    def store(
        self, stmt: ir.Store, value: ir.Expr, emitter: PythonEmitter, indent: str
    ) -> list[str]:
        if stmt.clone:
            value = ir.Op("clone", (value,), value.type, value.span)
        output = stmt.output
        if self.rows is None:
            return emit_assignment(emitter, f"{output}[:]", value, indent)
        part = f"{output}_{self.suffix}"
        lines = emit_assignment(emitter, part, value, indent)
        if self.spans_rows(stmt.value.type.shape):
            offsets = self.offsets(len(self.full[output]))
            return lines + [f"{indent}pypto.assemble({part}, {offsets}, {output})"]
        # A reduction over the rows: each block adds its part to the output.
        return lines + _accumulate(output, part, stmt.value.op, self.block_index, indent)


def _accumulate(output: str, part: str, op: str, block_index: str, indent: str) -> list[str]:
    """Adds a block's part to an output: the loop's first iteration writes it, the others
    and the tail combine (accumulating into a temporary instead gives zeros on 0.2.0)."""
    combined = ops.lookup(op).combine.format(output, part)
    if block_index != "i":
        return [f"{indent}{output}[:] = {combined}"]
    return [
        f"{indent}if i == 0:",
        f"{indent}    {output}[:] = {part}",
        f"{indent}else:",
        f"{indent}    {output}[:] = {combined}",
    ]


Block = Callable[[str, int, str, str, str], list[str]]  # suffix, size, offset, index, indent


def _loop(name: str, loop: ir.Loop, indent: str, block: Block, before_tail=()) -> list[str]:
    """`for i in pypto.loop(...)` over the chunks, then the constant-size tail block."""
    lines = [
        f'{indent}for i in pypto.loop(0, {loop.count}, 1, name="{name}", idx_name="i"):',
        f"{indent}    offset = i * {loop.chunk}",
        *block("chunk", loop.chunk, "offset", "i", indent + "    "),
    ]
    if loop.tail:
        lines.append(f"{indent}# The last {loop.tail} of the loop axis: a constant-size tail.")
        lines += before_tail
        tail_offset = str(loop.count * loop.chunk)
        lines += block("tail", loop.tail, tail_offset, str(loop.count), indent)
    return lines


def _later_reads(kernel: ir.Kernel, phase_index: int) -> set[str]:
    assert kernel.schedule is not None
    later = [i for p in kernel.schedule.phases[phase_index + 1 :] for i in p.statements]
    return {
        node.name
        for index in later
        for node in ir.walk(kernel.body[index].value)
        if isinstance(node, ir.Ref)
    }


def _cube_lines(kernel: ir.Kernel, phase: ir.Phase, index: int, indent: str) -> list[str]:
    """A matmul phase: cube tiles, then one `pypto.matmul`, or one per chunk of M rows
    assembled into the result (a tail block after the loop when the chunks do not divide)."""
    (stmt,) = (kernel.body[i] for i in phase.statements)
    matmul = stmt.value
    a, b = matmul.operands
    dtype = f"pypto.{matmul.type.dtype.pypto_name}"
    flags = f"a_trans={matmul.attrs.a_trans}, b_trans={matmul.attrs.b_trans}"
    tiles = ", ".join(str(list(pair)) for pair in phase.cube)
    lines = [f"{indent}pypto.set_cube_tile_shapes({tiles})"]
    result = stmt.name if isinstance(stmt, ir.Let) else stmt.output
    if phase.k_loop is not None:
        return lines + _k_split_lines(kernel, phase, index, indent, f"{dtype}, {flags}")
    loop = phase.loop
    if loop is None:
        target = result if isinstance(stmt, ir.Let) else f"{result}[:]"
        return lines + [f"{indent}{target} = pypto.matmul({a.name}, {b.name}, {dtype}, {flags})"]
    if isinstance(stmt, ir.Let):
        lines.append(f"{indent}{result} = pypto.Tensor({list(matmul.type.shape)}, {dtype})")
    k_size = a.type.shape[0] if matmul.attrs.a_trans else a.type.shape[1]

    def block(suffix: str, rows: int, offset: str, _: str, block_indent: str) -> list[str]:
        # M is axis 0 of A, or axis 1 when A is stored transposed.
        if matmul.attrs.a_trans:
            view, at = [k_size, rows], f"[0, {offset}]"
        else:
            view, at = [rows, k_size], f"[{offset}, 0]"
        part = f"{result}_{suffix}"
        return [
            f"{block_indent}{a.name}_{suffix} = pypto.view({a.name}, {view}, {at})",
            f"{block_indent}{part} = pypto.matmul({a.name}_{suffix}, {b.name}, {dtype}, {flags})",
            f"{block_indent}pypto.assemble({part}, [{offset}, 0], {result})",
        ]

    return lines + _loop(f"{kernel.name}_phase{index}", loop, indent, block)


def _k_split_lines(
    kernel: ir.Kernel, phase: ir.Phase, index: int, indent: str, arguments: str
) -> list[str]:
    """K chunks of a long contraction; each partial product accumulates into the output."""
    (stmt,) = (kernel.body[i] for i in phase.statements)
    a, b = stmt.value.operands
    out = stmt.output
    m, n = stmt.value.type.shape
    loop = phase.k_loop
    assert loop is not None

    def view(operand: ir.Ref, rows: int, size: int, k_first: bool, offset: str) -> str:
        """A K-slice of an operand stored as [rows, K], or as [K, rows] when `k_first`."""
        if k_first:
            return f"pypto.view({operand.name}, {[size, rows]}, [{offset}, 0])"
        return f"pypto.view({operand.name}, {[rows, size]}, [0, {offset}])"

    def block(
        suffix: str, size: int, offset: str, block_index: str, block_indent: str
    ) -> list[str]:
        a_view = view(a, m, size, stmt.value.attrs.a_trans, offset)
        b_view = view(b, n, size, not stmt.value.attrs.b_trans, offset)
        part = f"{out}_{suffix}"
        call = f"pypto.matmul({a.name}_{suffix}, {b.name}_{suffix}, {arguments})"
        return [
            f"{block_indent}{a.name}_{suffix} = {a_view}",
            f"{block_indent}{b.name}_{suffix} = {b_view}",
            f"{block_indent}{part} = {call}",
            *_accumulate(out, part, "sum", block_index, block_indent),
        ]

    assert phase.accumulate_tile is not None, "the loops pass tiles a K loop's accumulation"
    tile = _arguments_text(phase.accumulate_tile)
    lines = [f"{indent}pypto.set_vec_tile_shapes{tile}  # for the accumulation"]
    return lines + _loop(f"{kernel.name}_phase{index}", loop, indent, block)


def _phase_lines(kernel: ir.Kernel, index: int, indent: str) -> list[str]:
    assert kernel.schedule is not None
    phase = kernel.schedule.phases[index]
    if phase.cube is not None:
        return _cube_lines(kernel, phase, index, indent)
    later_reads = _later_reads(kernel, index)
    lines = [f"{indent}pypto.set_vec_tile_shapes{_arguments_text(phase.tile)}"]
    loop = phase.loop
    if loop is None:
        return lines + _Block(kernel, phase, later_reads, "", None, "0", "0").lines(indent)
    blocks = loop.count + (1 if loop.tail else 0)
    partials = {partial.statement: partial for partial in phase.partials}
    for i in phase.statements:
        stmt, value = kernel.body[i], kernel.body[i].value
        if not isinstance(stmt, ir.Let):
            continue
        dtype = f"pypto.{value.type.dtype.pypto_name}"
        if i in partials:
            shape = list(partials[i].shape)
            lines.append(f"{indent}{stmt.name}_parts = pypto.Tensor({shape}, {dtype})")
        elif stmt.name in later_reads and value.type.shape[loop.axis] != 1:
            lines.append(f"{indent}{stmt.name} = pypto.Tensor({list(value.type.shape)}, {dtype})")

    def block(
        suffix: str, rows: int, offset: str, block_index: str, block_indent: str
    ) -> list[str]:
        return _Block(kernel, phase, later_reads, suffix, rows, offset, block_index).lines(
            block_indent
        )

    retile = []
    if phase.tail_tile is not None and phase.tail_tile != phase.tile:
        retile = [f"{indent}pypto.set_vec_tile_shapes{_arguments_text(phase.tail_tile)}"]
    lines += _loop(f"{kernel.name}_phase{index}", loop, indent, block, retile)
    for partial in phase.partials:
        stmt = kernel.body[partial.statement]
        lines.append(
            f"{indent}# {stmt.name}: the partial results of the {blocks} blocks, combined."
        )
        lines.append(f"{indent}pypto.set_vec_tile_shapes{_arguments_text(partial.tile)}")
        combine = PYPTO_SPELLING[stmt.value.op].format(f"{stmt.name}_parts", axis=loop.axis)
        lines.append(f"{indent}{stmt.name} = {combine}")
    return lines


def _kernel_lines(kernel: ir.Kernel) -> list[str]:
    assert kernel.schedule is not None
    lines = []
    for index in range(len(kernel.schedule.phases)):
        lines += _phase_lines(kernel, index, " " * 8)
    return lines


def _factory(kernel: ir.Kernel) -> list[str]:
    emitter = PythonEmitter({}, SCALAR_SPELLING, lambda ref: ref.name)
    arguments = ", ".join(factory_arguments(kernel))
    lines = [
        "@functools.cache",
        f"def {factory_name(kernel)}({arguments}):",
        f'    """Builds the `{kernel.name}` kernel. Its tiles, views and loops are planned for',
        '    these sizes: compile the spec with other dims for others."""',
    ]
    body = []
    for stmt in kernel.body:
        if isinstance(stmt, ir.Let) and ir.is_scalar(stmt.value):
            body.append(f"    {stmt.name} = {emitter.emit(stmt.value)}")
    body.append("")
    body.append('    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})')
    body.append(f"    def {kernel.name}_kernel(")
    for tensor in (*kernel.inputs, *kernel.outputs):
        shape = _shape_text(tensor.kernel_dims or tuple((d,) for d in tensor.dims))
        body.append(
            f"        {tensor.name}: pypto.Tensor({shape}, pypto.{tensor.type.dtype.pypto_name}),"
        )
    body.append("    ):")
    body += _kernel_lines(kernel)
    body.append("")
    body.append(f"    return {kernel.name}_kernel")
    # The dims the body names (a size-1 or merged-away dim may appear nowhere).
    text = "\n".join(body)
    used = [d for d in kernel.dims if re.search(rf"\b{d.name}\b", text)]
    if used:
        names = ", ".join(d.name for d in used)
        sizes = ", ".join(str(d.size) for d in used)
        lines.append(f"    {names} = {sizes}")
    return lines + body


def _init_argument(param: ir.Param) -> str:
    annotation = "tuple" if isinstance(param.default, tuple) else "int" if param.fixed else "float"
    if param.default is None:
        return f"{param.name}: {annotation}"
    return f"{param.name}: {annotation} = {ir.format_value(param.default)}"


def _init_lines(kernel: ir.Kernel) -> list[str]:
    lines = []
    for param in kernel.init_params:
        if not param.fixed:
            lines.append(f"        self.{param.name} = float({param.name})")
            continue
        value = ir.format_value(param.default)
        given = f"tuple({param.name})" if isinstance(param.default, tuple) else param.name
        lines.append(f'        _expect_argument("{param.name}", {given}, {value})')
    for weight in kernel.weights:
        shape, dtype = _tuple_text(weight.declared_shape), weight.type.dtype.torch_name
        lines.append(
            f"        self.{weight.name} = torch.nn.Parameter("
            f"torch.{weight.init}({shape}, dtype=torch.{dtype}))"
        )
    return lines


def _model(kernel: ir.Kernel) -> list[str]:
    init_signature = ", ".join(["self", *map(_init_argument, kernel.init_params)])
    arguments = kernel.tensor_arguments
    forward_names = [t.name for t in arguments] + [p.name for p in kernel.forward_params]
    returns = ", ".join(o.name for o in kernel.outputs)
    summary = f"`{kernel.name}` as a drop-in module: forward({', '.join(forward_names)}) "
    summary += f"returns {returns}."
    if len(summary) > 90:  # a long signature goes on a line of its own
        summary = summary.replace(": forward", ".\n\n    forward", 1) + "\n    "
    lines = [
        "class ModelNew(torch.nn.Module):",
        f'    """{summary}"""',
        "",
        f"    def __init__({init_signature}):",
        "        super().__init__()",
        *_init_lines(kernel),
        "",
        f"    def forward(self, {', '.join(forward_names)}):",
    ]
    for tensor in arguments:
        shape = _tuple_text(tensor.declared_shape)
        dtype = f"torch.{tensor.type.dtype.torch_name}"
        lines.append(f'        _expect("{tensor.name}", {tensor.name}, {shape}, {dtype})')
    factory_args = [
        f"float({p.name})" if p.forward else f"self.{p.name}" for p in kernel.kernel_params
    ]
    lines.append(f"        kernel = {factory_name(kernel)}({', '.join(factory_args)})")
    device = arguments[0].name + ".device" if arguments else '"cpu"'
    call = []
    for tensor in kernel.inputs:
        # Weights are nn.Parameters: the kernel reads their values, never their gradients.
        value = tensor.name if tensor.init is None else f"self.{tensor.name}.detach()"
        name, shape = f"{tensor.name}_kernel", _arguments_text(tensor.kernel_shape)
        lines.append(f"        {name} = {value}.contiguous().reshape{shape}")
        call.append(name)
    for tensor in kernel.outputs:
        lines.append(
            f"        {tensor.name} = torch.empty({_tuple_text(tensor.kernel_shape)}, "
            f"dtype=torch.{tensor.type.dtype.torch_name}, device={device})"
        )
        call.append(tensor.name)
    lines.append(f"        kernel({', '.join(call)})")
    results = [f"{o.name}.reshape({_tuple_text(o.declared_shape)})" for o in kernel.outputs]
    lines.append(f"        return {', '.join(results)}")
    return lines


def emit_pypto(kernel: ir.Kernel, filename: str) -> str:
    header = [
        f'"""PyPTO kernel `{kernel.name}`, generated by ptodsl {__version__} from',
        f"{docstring_filename(filename)}. Edits are lost when the spec is compiled again.",
        '"""',
        "",
        "import functools",
        "import importlib.util",
        *(["import math"] if uses_math(kernel) else []),
        "import os",
        "",
        "import pypto",
        "import torch",
    ]
    helpers = _HELPERS + (_EXPECT_ARGUMENT if any(p.fixed for p in kernel.params) else "")
    parts = [helpers.strip("\n").splitlines(), _factory(kernel), _model(kernel)]
    lines = header
    for part in parts:
        lines += ["", "", *part]
    return "\n".join(lines).rstrip("\n") + "\n"


_KERNELBENCH_LOADER = '''
def _load_kernel_module():
    """Runs the module above under its own file name, registered with linecache: PyPTO reads
    kernel source with `inspect`, which fails for code a harness exec()s from a string.
    dont_inherit: a harness's `from __future__ import annotations` would turn the kernel's
    tensor annotations into strings, which PyPTO does not read."""
    filename = f"<ptodsl {KERNEL_NAME}>"
    linecache.cache[filename] = (len(_MODULE), None, _MODULE.splitlines(True), filename)
    namespace = {"__name__": f"ptodsl_{KERNEL_NAME}"}
    exec(compile(_MODULE, filename, "exec", dont_inherit=True), namespace)
    return namespace


_kernel_module = _load_kernel_module()
ModelNew = _kernel_module["ModelNew"]
'''


def emit_kernelbench(kernel: ir.Kernel, filename: str) -> str:
    """A KernelBench / AKG answer file: the PyPTO module, embedded so that it also works when
    a harness exec()s the answer's text instead of importing a file."""
    module = emit_pypto(kernel, filename)
    # Generated code quotes with ", and file names are escaped: nothing can end the string.
    assert "'''" not in module, "the module cannot be embedded in a raw ''' string"
    header = [
        f'"""KernelBench answer for `{kernel.name}`, generated by ptodsl {__version__} from',
        f"{docstring_filename(filename)}: `ModelNew` takes the problem's constructor and forward",
        "arguments. Set AIKG_PYPTO_RUN_MODE=1 for pypto's simulator, 0 for an NPU.",
        '"""',
        "",
        "import linecache",
        "",
        f'KERNEL_NAME = "{kernel.name}"',
        "_MODULE = r'''" + module + "'''",
    ]
    return "\n".join(header) + "\n" + _KERNELBENCH_LOADER
