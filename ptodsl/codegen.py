"""Emits the PyPTO 0.2.0 module for a lowered kernel: a cached kernel factory per kernel,
with shapes and scalars as closure constants, and a KernelBench-style `ModelNew`. The
kernel body prints the program `materialise` made (every view, temporary, offset and
accumulation is decided there); expressions print through `ptodsl.pyexpr`."""

from __future__ import annotations

import re

import attrs

from ptodsl import __version__, ir, ops
from ptodsl.modules import creation_lines
from ptodsl.pyexpr import (
    CODE_WIDTH,
    SCALAR_SPELLING,
    PythonEmitter,
    docstring_filename,
    emit_assignment,
    emit_call,
    emit_def,
    paragraph,
    uses_math,
)

PYPTO_SPELLING = ops.spellings("pypto")

_HELPERS = '''
def _expect(name, tensor, shape, dtype):
    """forward's contract: rank, shape and dtype exactly as the spec declares them (raised,
    not asserted: `python -O` drops asserts)."""
    if tensor.dim() != len(shape):
        raise ValueError(f"{name}: expected rank {len(shape)}, got {tensor.dim()}")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(tensor.shape)}")
    if tensor.dtype != dtype:
        raise TypeError(f"{name}: expected {dtype}, got {tensor.dtype}")


def _run_mode():
    """AIKG_PYPTO_RUN_MODE picks the run mode (0 = NPU, 1 = SIM); unset: NPU if present."""
    mode = os.environ.get("AIKG_PYPTO_RUN_MODE")
    if mode is not None:
        return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM
    has_npu = importlib.util.find_spec("torch_npu") is not None
    return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM


def _launch(make_kernel, arguments, outputs, *tensors):
    """Runs make_kernel(*arguments) on tensors: its inputs, then the `outputs` it writes.
    pypto's simulator models cost only and writes no outputs: there, or with
    PTODSL_INTERPRET=1, ptodsl's interpreter computes them in a worker process."""
    interpreted = _run_mode() == pypto.RunMode.SIM or os.environ.get("PTODSL_INTERPRET") == "1"
    if not interpreted or os.environ.get("PTODSL_SIM") == "direct":
        make_kernel(*arguments)(*tensors)
        return
    try:
        from ptodsl import interpret
    except ImportError:
        raise RuntimeError(
            "pypto's simulator writes no outputs; ptodsl's interpreter computes them: "
            "install ptodsl, or run on an NPU"
        ) from None
    module_file = _launch.__code__.co_filename
    interpret.launch(module_file, make_kernel.__name__, arguments, tensors, outputs)
'''

_SETTLED = '''

def _settled(tensor):
    """`tensor` once the launches that write it have ended: ptodsl's interpreter may run
    launches side by side (on an NPU, the stream orders them)."""
    interpret = sys.modules.get("ptodsl.interpret")
    if interpret is not None:
        interpret.settle(tensor)
    return tensor
'''

_EXPECT_ARGUMENT = '''

def _expect_argument(name, given, built_for):
    """A construction argument must be the value this kernel is built for."""
    if given != built_for:
        raise ValueError(f"{name}: this kernel is built for {built_for!r}, not {given!r}")
'''


def _shape_text(factors: tuple[tuple[ir.DimFactor, ...], ...]) -> str:
    axes = [" * ".join(str(f) for f in axis) or "1" for axis in factors]
    return "(" + ", ".join(axes) + ("," if len(axes) == 1 else "") + ")"


def _tuple_text(values: tuple[int | str, ...] | list[str]) -> str:
    return "(" + ", ".join(map(str, values)) + ("," if len(values) == 1 else "") + ")"


def _arguments_text(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def factory_name(kernel: ir.Kernel) -> str:
    return f"_make_{kernel.name}_kernel"


def kernel_function_name(kernel: ir.Kernel) -> str:
    return f"_{kernel.name}_kernel"


def factory_arguments(kernel: ir.Kernel) -> list[str]:
    """The kernel's scalars. Dims are not arguments: tiles, views and loops are planned for
    their sizes, so the factory fixes them rather than invite a call with other sizes. A row
    launch's first row is one (each launch's kernel views the input from there)."""
    rows = kernel.launches.rows if kernel.launches else None
    return [p.name for p in kernel.kernel_params] + ([rows.variable] if rows else [])


def _kernel_lines(kernel: ir.Kernel) -> list[str]:
    assert kernel.program is not None, "the materialise pass runs first"
    printer = _Printer()
    lines = []
    for code in kernel.program.phases:
        lines += printer.lines(code.instructions, " " * 8)
    return lines


class _Printer:
    """Prints materialised instructions as PyPTO calls; expressions through the emitter."""

    def __init__(self) -> None:
        self.emitter = PythonEmitter(PYPTO_SPELLING, SCALAR_SPELLING, lambda ref: ref.name)

    def lines(self, instructions: tuple[ir.Instruction, ...], indent: str) -> list[str]:
        return [line for instruction in instructions for line in self.one(instruction, indent)]

    def one(self, instruction: ir.Instruction, indent: str) -> list[str]:
        match instruction:
            case ir.BlockLoop():
                return self.loop(instruction, indent)
            case ir.View(name, source, tensor, offsets):
                arguments = [source, str(list(tensor.shape)), ir.format_indexes(offsets)]
                return emit_call(f"{name} = pypto.view", arguments, indent, width=100)
            case ir.Assemble(part, into, offsets):
                arguments = [part, ir.format_indexes(offsets), into]
                return emit_call("pypto.assemble", arguments, indent, width=100)
            case ir.Assign(name, value):
                return self.assignment(name, value, indent)
            case ir.StoreOutput(output, value):
                return self.assignment(f"{output}[:]", value, indent)
            case ir.Accumulate():
                return _accumulate(instruction, indent)
        return [indent + _statement(instruction)]

    def assignment(self, target: str, value: ir.Expr, indent: str) -> list[str]:
        if isinstance(value, ir.Op) and value.op == "matmul":
            arguments, frame = _matmul(value)
            if frame is None:  # one line up to ruff's 100 columns, as before
                return emit_call(f"{target} = pypto.matmul", arguments, indent, width=100)
            # the kernel's frame has axes the product lacks (of size 1): the same elements
            product = emit_call("pypto.matmul", arguments, indent + "    ")
            if len(product) == 1:
                return emit_call(
                    f"{target} = pypto.reshape", [product[0].strip(), str(list(frame))], indent
                )
            return [
                f"{indent}{target} = pypto.reshape(",
                *product[:-1],
                product[-1] + ",",
                f"{indent}    {list(frame)},",
                f"{indent})",
            ]
        return emit_assignment(self.emitter, target, value, indent)

    def loop(self, loop: ir.BlockLoop, indent: str) -> list[str]:
        """The constant-size tail block, then `for i in pypto.loop(...)` over the others."""
        i = loop.index
        blocks = ["0", str(loop.count), "1", f'name="{loop.name}"', f'idx_name="{i}"']
        lines = []
        if loop.tail_size:
            lines.append(
                f"{indent}# The tail first: the last {loop.tail_size} of the loop axis "
                "(after the loop, pypto drops it)."
            )
            lines += self.lines(loop.tail, indent)
        head = emit_call(f"for {i} in pypto.loop", blocks, indent, width=98)
        head[-1] += ":"
        return [
            *lines,
            *head,
            f"{indent}    {loop.offset} = {i} * {loop.chunk}",
            *self.lines(loop.body, indent + "    "),
        ]


def _statement(instruction: ir.Instruction) -> str:
    """The one line of an instruction that takes no expression."""
    match instruction:
        case ir.SetVecTiles(tile, purpose):
            comment = f"  # {purpose}" if purpose else ""
            return f"pypto.set_vec_tile_shapes{_arguments_text(tile)}{comment}"
        case ir.SetCubeTiles(m, k, n):
            return f"pypto.set_cube_tile_shapes({list(m)}, {list(k)}, {list(n)})"
        case ir.Allocate(name, tensor):
            return f"{name} = pypto.Tensor({list(tensor.shape)}, pypto.{tensor.dtype.pypto_name})"
        case ir.Comment(text):
            return f"# {text}"
    raise TypeError(f"codegen cannot print {instruction!r}")


def _matmul(matmul: ir.Op) -> tuple[list[str], tuple[int, ...] | None]:
    """The arguments of the cube's `pypto.matmul`, and the frame shape to reshape the
    product to where that differs."""
    arguments = [
        *map(_cube_operand, matmul.operands),
        f"pypto.{matmul.type.dtype.pypto_name}",
        f"a_trans={matmul.attrs.a_trans}",
        f"b_trans={matmul.attrs.b_trans}",
    ]
    if ir.product_shape(matmul) == matmul.type.shape:
        return arguments, None
    return arguments, matmul.type.shape


def _cube_operand(operand: ir.Expr) -> str:
    """A declared tensor by name, or a computed one seen as its matrix (align_axes)."""
    if ir.is_cube_matrix(operand):
        (value,) = operand.operands
        assert isinstance(value, ir.Ref), "a computed matmul operand is a let"
        return f"pypto.reshape({value.name}, {list(operand.type.shape)})"
    assert isinstance(operand, ir.Ref), "a matmul's operands are named"
    return operand.name


def _accumulate(accumulate: ir.Accumulate, indent: str) -> list[str]:
    output, part = accumulate.output, accumulate.part
    combined = ops.lookup(accumulate.reduction).combine.format(output, part)
    if accumulate.overwrites:
        return [f"{indent}{output}[:] = {part}"]
    if accumulate.first_iteration is None:
        return [f"{indent}{output}[:] = {combined}"]
    return [
        f"{indent}if {accumulate.first_iteration} == 0:",
        f"{indent}    {output}[:] = {part}",
        f"{indent}else:",
        f"{indent}    {output}[:] = {combined}",
    ]


def _factory(kernel: ir.Kernel) -> list[str]:
    emitter = PythonEmitter({}, SCALAR_SPELLING, lambda ref: ref.name)
    scalars = [
        f"    {stmt.name} = {emitter.emit(stmt.value)}"
        for stmt in kernel.body
        if isinstance(stmt, ir.Let) and ir.is_scalar(stmt.value)
    ]
    staging = kernel.program.staging if kernel.program else ()
    tensors = [
        *map(_declared_parameter, kernel.inputs),
        *(_buffer_parameter(s) for s in staging),
        *map(_declared_parameter, kernel.outputs),
    ]
    summary = [
        f'"""Builds the `{kernel.name}` kernel. Its tiles, views and loops are planned for',
        'these sizes: compile the spec with other dims for others."""',
    ]
    function = (kernel_function_name(kernel), tensors, _kernel_lines(kernel))
    return _jit_factory(
        kernel, factory_name(kernel), factory_arguments(kernel), summary, scalars, function
    )


def _staging_factory(kernel: ir.Kernel, staging: ir.Staging) -> list[str]:
    summary = [
        f'"""Builds the launch that writes `{staging.source}` spaced and padded with zeros',
        f"into the buffer the `{kernel.name}` kernel's convolution views (phase "
        f'{staging.phase})."""',
    ]
    tensors = [_declared_parameter(kernel.input(staging.source)), _buffer_parameter(staging)]
    lines = _Printer().lines(staging.instructions, " " * 8)
    function = (staging_function_name(kernel, staging), tensors, lines)
    return _jit_factory(kernel, staging_factory_name(kernel, staging), [], summary, [], function)


def staging_factory_name(kernel: ir.Kernel, staging: ir.Staging) -> str:
    return f"_make_{kernel.name}{staging.buffer}_kernel"


def staging_function_name(kernel: ir.Kernel, staging: ir.Staging) -> str:
    return f"_{kernel.name}{staging.buffer}_kernel"


def _declared_parameter(tensor: ir.Tensor) -> str:
    shape = _shape_text(tensor.kernel_dims or tuple((d,) for d in tensor.dims))
    return f"{tensor.name}: pypto.Tensor({shape}, pypto.{tensor.type.dtype.pypto_name}),"


def _buffer_parameter(staging: ir.Staging) -> str:
    shape = _tuple_text(staging.type.shape)
    return f"{staging.buffer}: pypto.Tensor({shape}, pypto.{staging.type.dtype.pypto_name}),"


def _jit_factory(
    kernel: ir.Kernel,
    name: str,
    arguments: list[str],
    summary: list[str],
    scalars: list[str],
    function: tuple[str, list[str], list[str]],
) -> list[str]:
    """A cached factory `name(*arguments)` of one jit function: `function` is its name, its
    tensor parameters and its body's lines; `scalars` are computed before it."""
    function_name, tensors, body_lines = function
    lines = [
        "@functools.cache",
        f"def {name}({', '.join(arguments)}):",
        *paragraph(summary, "    "),
    ]
    body = [
        *scalars,
        "",
        '    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})',
        f"    def {function_name}(",
        *(f"        {tensor}" for tensor in tensors),
        "    ):",
        *body_lines,
        "",
        f"    return {function_name}",
    ]
    # The dims the body names (a size-1 or merged-away dim may appear nowhere).
    text = "\n".join(body)
    used = [d for d in kernel.dims if re.search(rf"\b{d.name}\b", text)]
    if used:
        names = ", ".join(d.name for d in used)
        sizes = ", ".join(str(d.size) for d in used)
        lines.append(f"    {names} = {sizes}")
    return lines + body


def _init_argument(param: ir.Param) -> str:
    if isinstance(param.default, tuple | bool):
        annotation = type(param.default).__name__
    else:
        annotation = "int" if param.fixed else "float"
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
    return lines + creation_lines(kernel, "        ")


def _model(kernel: ir.Kernel) -> list[str]:
    init_parameters = ["self", *map(_init_argument, kernel.init_params)]
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
        *emit_def("__init__", init_parameters, "    "),
        "        super().__init__()",
        *_init_lines(kernel),
        "",
        *emit_def("forward", ["self", *forward_names], "    "),
    ]
    for tensor in arguments:
        shape = _tuple_text(kernel.forward_shape(tensor))
        dtype = f"torch.{tensor.type.dtype.torch_name}"
        lines.append(f'        _expect("{tensor.name}", {tensor.name}, {shape}, {dtype})')
    factory_args = [
        f"float({p.name})" if p.forward else f"self.{p.name}" for p in kernel.kernel_params
    ]
    if _row_launches(kernel):
        factory_args.append(ir.ROW_VARIABLE)
    factory = [factory_name(kernel), _tuple_text(factory_args), str(len(kernel.outputs))]
    device = arguments[0].name + ".device" if arguments else '"cpu"'
    call = []
    for tensor in kernel.inputs:
        # Weights are nn.Parameters: the kernel reads their values, never their gradients.
        read = tensor if tensor.twin_of is None else kernel.input(tensor.twin_of)
        value = read.name if read.init is None else f"self.{read.state_name}.detach()"
        name = ir.generated_name("kernel", tensor.name)
        # A cut tensor is reshaped per launch, after its launch's chunk is cut.
        reshape = f".reshape{_arguments_text(tensor.kernel_shape)}"
        if kernel.launch_cuts(tensor):
            reshape = ""
        lines.append(f"        {name} = {value}.contiguous(){reshape}")
        call.append((tensor, name))
    staging = kernel.program.staging
    for buffer in staging:  # one launch's, written by its staging launch before the kernel
        lines.append(
            f"        {buffer.buffer} = torch.empty({_tuple_text(buffer.type.shape)}, "
            f"dtype=torch.{buffer.type.dtype.torch_name}, device={device})"
        )
        call.append((None, buffer.buffer))
    row_launches = _row_launches(kernel)
    for tensor in kernel.outputs:
        shape = kernel.forward_shape(tensor) if kernel.launches else tensor.kernel_shape
        lines.append(
            f"        {tensor.name} = torch.empty({_tuple_text(shape)}, "
            f"dtype=torch.{tensor.type.dtype.torch_name}, device={device})"
        )
        if row_launches:  # every row launch's rows of one sample, each launch's contiguous
            rows = ir.generated_name("rows", tensor.name)
            shape = (kernel.launches.rows.count, *tensor.declared_shape)
            lines.append(
                f"        {rows} = torch.empty({_tuple_text(shape)}, "
                f"dtype=torch.{tensor.type.dtype.torch_name}, device={device})"
            )
            call.append((None, rows))
        else:
            call.append((tensor, tensor.name))
    if kernel.launches is None:
        arguments = _LaunchArguments(dict(_launch_arguments(kernel, call)))
        for buffer in staging:
            lines += _staging_launch(kernel, buffer, arguments, "        ")
        named, texts = arguments.use(list(arguments.parts), "        ")
        lines += named + emit_call("_launch", [*factory, *texts], "        ")
    else:
        lines += _launch_loops(kernel, factory, call)
    results = [f"{o.name}.reshape({_tuple_text(kernel.forward_shape(o))})" for o in kernel.outputs]
    lines.append(f"        return {', '.join(results)}")
    return lines


def _row_launches(kernel: ir.Kernel) -> bool:
    return kernel.launches is not None and kernel.launches.rows is not None


def _launch_loops(kernel: ir.Kernel, factory: list[str], call: list) -> list[str]:
    """`forward`'s loops over launches: each launch gets its chunk of every cut tensor (a
    contiguous view: a channel chunk is cut only within one sample)."""
    launches = kernel.launches
    assert launches is not None
    count, chunk = launches.count, launches.chunk
    lines = [
        f"        # {count} launches of {chunk} along axis 0: pypto's simulator",
        "        # could not verify the whole kernel in one launch.",
        f"        for start in range(0, {launches.extent}, {chunk}):",
    ]
    indent = "            "
    arguments = _LaunchArguments(dict(_launch_arguments(kernel, call)))

    def staging(indent: str) -> list[str]:
        return [
            line
            for buffer in kernel.program.staging
            for line in _staging_launch(kernel, buffer, arguments, indent)
        ]

    per_channel = kernel.stages_per_channel_launch  # a grouped input's part, per launch
    if not per_channel:  # once per sample chunk, before its channels
        lines += staging(indent)
    channels = launches.channels
    if channels is not None:
        lines += [
            f"{indent}# and {channels.count} launches of {channels.chunk} output channels each",
            f"{indent}for channel in range(0, {channels.extent}, {channels.chunk}):",
        ]
        indent += "    "
        group_input = channels.group_input_text
        if group_input is not None:
            lines.append(f"{indent}{ir.GROUP_INPUT_VARIABLE} = {group_input}  # its groups' inputs")
    if per_channel:
        lines += staging(indent)
    rows = launches.rows
    if rows is not None:
        variable = ir.ROW_VARIABLE
        lines += [
            f"{indent}# and {rows.count} launches of {rows.chunk} output rows each",
            f"{indent}for {variable} in range(0, {rows.extent}, {rows.chunk}):",
        ]
        indent += "    "
        for output in kernel.outputs:  # the launch's own rows
            launched = ir.generated_name("rows", output.name)
            reshape = f".reshape{_arguments_text(output.kernel_shape)}"
            arguments.parts[launched] = (f"{launched}[{variable} // {rows.chunk}]", reshape)
    named, texts = arguments.use(list(arguments.parts), indent)
    lines += named + emit_call("_launch", [*factory, *texts], indent)
    if rows is None:
        return lines
    indent = indent[:-4]
    lines.append(f"{indent}# the sample's rows, each launch's, into its output")
    for output in kernel.outputs:
        launched = ir.generated_name("rows", output.name)
        batch, row = kernel.launch_cuts(output)  # axes 0 and 2
        # [launches, N, C, rows, ...] -> [N, C, launches, rows, ...]
        order = (1, 2, 0, *range(3, len(output.declared_shape) + 1))
        whole = list(output.declared_shape)
        whole[2] = row.extent
        sample = ir.generated_name("sample", output.name)
        lines += [
            f"{indent}{sample} = _settled({launched}).permute{_arguments_text(order)}",
            f"{indent}{output.name}[{batch.index_text()}] = "
            f"{sample}.reshape{_arguments_text(tuple(whole))}",
        ]
    return lines


@attrs.define
class _LaunchArguments:
    """Each tensor's (view, reshape) in one launch; a part too long for its argument line
    is named on a line of its own first, once."""

    parts: dict[str, tuple[str, str]]
    named: set[str] = attrs.field(factory=set)

    def use(self, names: list[str], indent: str) -> tuple[list[str], list[str]]:
        """The lines that name parts, and the arguments, for a call at `indent`."""
        lines, texts = [], []
        for name in names:
            view, reshape = self.parts[name]
            if reshape and len(f"{indent}    {view}{reshape},") > CODE_WIDTH:
                part = ir.generated_name("part", name)
                if part not in self.named:
                    lines.append(f"{indent}{part} = {view}")
                    self.named.add(part)
                view = part
            texts.append(view + reshape)
        return lines, texts


def _launch_arguments(kernel: ir.Kernel, call: list) -> list[tuple[str, tuple[str, str]]]:
    """Each tensor's name and the argument one launch gets, as (view, reshape): its chunk,
    reshaped to the kernel's shape, when the launches cut it (a staging buffer is one
    launch's)."""
    arguments = []
    for tensor, name in call:
        cuts = kernel.launch_cuts(tensor) if tensor is not None else ()
        argument = (name, "")
        if cuts:
            slots = [":"] * (cuts[-1].axis + 1)  # the axes before a cut one whole
            for cut in cuts:
                slots[cut.axis] = cut.index_text()
            index = ", ".join(slots)
            argument = (f"{name}[{index}]", f".reshape{_arguments_text(tensor.kernel_shape)}")
        arguments.append((name if tensor is None else tensor.name, argument))
    return arguments


def _staging_launch(
    kernel: ir.Kernel, staging: ir.Staging, arguments: _LaunchArguments, indent: str
) -> list[str]:
    """The staging launch: the kernel input it reads, the buffer it writes."""
    factory = [staging_factory_name(kernel, staging), "()", "1"]
    named, tensors = arguments.use([staging.source, staging.buffer], indent)
    return named + emit_call("_launch", [*factory, *tensors], indent)


# Names pycodestyle's E741 finds ambiguous (they read as 1 and 0); a spec may use them.
AMBIGUOUS_NAMES = frozenset({"l", "O", "I"})


def emit_pypto(kernel: ir.Kernel, filename: str) -> str:
    header = [
        *paragraph(
            [
                f'"""PyPTO kernel `{kernel.name}`, generated by ptodsl {__version__} from',
                f"{docstring_filename(filename)}. Edits are lost when the spec is compiled again.",
            ]
        ),
        "",
        *_tuned_stamp(kernel),
        *RUN_MODES,
        '"""',
        "",
        "import functools",
        "import importlib.util",
        *(["import math"] if uses_math(kernel) else []),
        "import os",
        *(["import sys"] if _row_launches(kernel) else []),
        "",
        "import pypto",
        "import torch",
    ]
    ambiguous = sorted(kernel.spec_names & AMBIGUOUS_NAMES)
    if ambiguous:
        names = ", ".join(f"`{name}`" for name in ambiguous)
        after_docstring = header.index('"""') + 1
        header[after_docstring:after_docstring] = [
            f"# ruff: noqa: E741 (the spec's names {names} are kept as written)"
        ]
    helpers = _HELPERS + (_SETTLED if _row_launches(kernel) else "")
    helpers += _EXPECT_ARGUMENT if any(p.fixed for p in kernel.params) else ""
    staging = [_staging_factory(kernel, st) for st in kernel.program.staging]
    parts = [helpers.strip("\n").splitlines(), _factory(kernel), *staging, _model(kernel)]
    lines = header
    for part in parts:
        lines += ["", "", *part]
    return "\n".join(lines).rstrip("\n") + "\n"


def _tuned_stamp(kernel: ir.Kernel) -> list[str]:
    """The docstring's paragraph on a tuned plan: a reader should know the plan is not the
    default one, and how to get that."""
    if kernel.tuning is None:
        return []
    text = [
        f"Tuned: {kernel.tuning.describe()} (`ptodsl tune`'s plan choices; compile with",
        "--untuned for the default plan).",
    ]
    return [*paragraph(text), ""]


# What `forward` returns in each mode, in every generated module's docstring.
RUN_MODES = (
    "Run modes: on an NPU (AIKG_PYPTO_RUN_MODE=0, or torch_npu installed) forward runs the",
    "kernel there. In pypto's simulator (AIKG_PYPTO_RUN_MODE=1, or no NPU), which models",
    "cost and writes no outputs, ptodsl's interpreter computes them: pypto's calculator runs",
    "the kernel's graph on CPU in a worker process (PTODSL_INTERPRET=1 asks for it even with",
    "an NPU). PTODSL_SIM=cost runs the cost model alone, and forward raises instead of",
    "returning unwritten outputs; PTODSL_TRACE=DIR keeps each launch's trace in DIR.",
)


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
        *paragraph(
            [
                f'"""KernelBench answer for `{kernel.name}`, generated by ptodsl {__version__} '
                "from",
                f"{docstring_filename(filename)}: `ModelNew` takes the problem's constructor and "
                "forward",
                "arguments.",
            ]
        ),
        "",
        *RUN_MODES,
        '"""',
        "",
        "import linecache",
        "",
        f'KERNEL_NAME = "{kernel.name}"',
        "_MODULE = r'''" + module + "'''",
    ]
    return "\n".join(header) + "\n" + _KERNELBENCH_LOADER
