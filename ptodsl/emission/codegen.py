"""Emits the PyPTO 0.2.0 module for a forward program (`ptodsl.ir.forward`): a cached kernel
factory per kernel, with shapes and scalars as closure constants, and a KernelBench-style
`ModelNew`. The module is built as a Python syntax tree and printed by `ptodsl.emission.pytree`;
each kernel body prints the program `materialise` made (every view, temporary, offset and
accumulation is decided there), expressions through `ptodsl.emission.pyexpr`, and `forward` the
program's calls in order (the intermediates partition chose, each kernel's launches as the
`launches` pass planned them). Nothing here decides a plan."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence

from ptodsl import __version__
from ptodsl.emission import pytree
from ptodsl.emission.pyexpr import PythonEmitter, ambiguous_names_noqa, spec_filename, uses_math
from ptodsl.emission.pytree import Blank, Comment, Verbatim, assign, call, method, name, value
from ptodsl.ir import forward, ops
from ptodsl.ir import nodes as ir
from ptodsl.ir.forward import Forward
from ptodsl.ir.modules import creation_statements

_HELPERS = '''
def _expect(name, tensor, shape, dtype):
    """forward's contract: rank, shape and dtype exactly as the spec declares them (raised,
    not asserted: `python -O` drops asserts)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_meta:
        raise ValueError(f"{name}: a meta tensor holds no values to compute on")
    if tensor.dim() != len(shape):
        raise ValueError(f"{name}: expected rank {len(shape)}, got {tensor.dim()}")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(tensor.shape)}")
    if tensor.dtype != dtype:
        raise TypeError(f"{name}: expected {dtype}, got {tensor.dtype}")


def _run_mode():
    """AIKG_PYPTO_RUN_MODE picks the run mode (0 = NPU, 1 = SIM); unset: NPU if present."""
    mode = os.environ.get("AIKG_PYPTO_RUN_MODE")
    if mode is None:
        has_npu = importlib.util.find_spec("torch_npu") is not None
        return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
    if mode not in ("0", "1"):
        raise ValueError(f"AIKG_PYPTO_RUN_MODE={mode!r}: 0 runs on an NPU, 1 in pypto's simulator")
    return pypto.RunMode.NPU if mode == "0" else pypto.RunMode.SIM


def _launch(make_kernel, arguments, outputs, *tensors):
    """Runs make_kernel(*arguments) on tensors: its inputs, then the `outputs` it writes.
    pypto's simulator models cost only and writes no outputs: there, or with
    PTODSL_INTERPRET=1, ptodsl's interpreter computes them in a worker process."""
    run_mode = _run_mode()
    interpreted = run_mode == pypto.RunMode.SIM or os.environ.get("PTODSL_INTERPRET") == "1"
    if not interpreted or os.environ.get("PTODSL_SIM") == "direct":
        if run_mode == pypto.RunMode.NPU and importlib.util.find_spec("torch_npu") is None:
            raise RuntimeError(
                "AIKG_PYPTO_RUN_MODE=0 runs on an NPU, and torch_npu is not installed: set it "
                "to 1 for pypto's simulator"
            )
        make_kernel(*arguments)(*tensors)
        return
    try:
        from ptodsl.runtime import interpret
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
    interpret = sys.modules.get("ptodsl.runtime.interpret")
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

DROPOUT_MASK = '''
def _dropout_mask(shape, p, dtype, device):
    """Training mode's dropout mask, drawn as torch's own dropout draws it
    (`empty_like(x).bernoulli_(1 - p).div_(1 - p)`; p = 0 and p = 1 draw nothing): on CPU,
    under one seed, the mask torch.nn.functional.dropout would apply."""
    if p == 0 or p == 1:
        return torch.full(shape, float(p == 0), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device).bernoulli_(1 - p).div_(1 - p)
'''


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


def _index(index: ir.Index) -> ast.expr:
    """A view's offset: a constant, a loop variable, or `variable * scale + shift + c`."""
    if isinstance(index, int):
        return value(index)
    if isinstance(index, str):
        return name(index)
    node = name(index.variable)
    if index.scale != 1:
        node = ast.BinOp(node, ast.Mult(), value(index.scale))
    if index.shift is not None:
        node = ast.BinOp(node, ast.Add(), name(index.shift))
    if index.constant:
        node = ast.BinOp(node, ast.Add(), value(index.constant))
    return node


def _indexes(offsets: tuple[ir.Index, ...]) -> ast.expr:
    return ast.List([_index(offset) for offset in offsets], ast.Load())


def _output_slots(output: str) -> ast.expr:
    """`output[:]`: a kernel writes its outputs in place."""
    return pytree.subscript(output, pytree.whole())


class _Printer:
    """Materialised instructions as PyPTO statements; expressions through the emitter."""

    def __init__(self) -> None:
        self.emitter = PythonEmitter("pypto")

    def block(self, instructions: tuple[ir.Instruction, ...]) -> list[ast.stmt]:
        return [stmt for instruction in instructions for stmt in self.one(instruction)]

    def one(self, instruction: ir.Instruction) -> list[ast.stmt]:
        match instruction:
            case ir.BlockLoop():
                return self.loop(instruction)
            case ir.View(view, source, tensor, offsets):
                viewed = call("pypto.view", name(source), list(tensor.shape), _indexes(offsets))
                return [assign(view, viewed)]
            case ir.Assemble(part, into, offsets):
                assembled = call("pypto.assemble", name(part), _indexes(offsets), name(into))
                return [pytree.statement(assembled)]
            case ir.Assign(target, computed):
                return [assign(target, self.value(computed))]
            case ir.StoreOutput(output, computed):
                return [assign(_output_slots(output), self.value(computed))]
            case ir.Accumulate():
                return _accumulate(instruction)
            case ir.SetVecTiles(tile, purpose):
                return [pytree.statement(call("pypto.set_vec_tile_shapes", *tile), purpose)]
            case ir.SetCubeTiles(m, k, n):
                tiles = call("pypto.set_cube_tile_shapes", list(m), list(k), list(n))
                return [pytree.statement(tiles)]
            case ir.Allocate(allocated, tensor):
                dtype = name(f"pypto.{tensor.dtype.pypto_name}")
                return [assign(allocated, call("pypto.Tensor", list(tensor.shape), dtype))]
            case ir.Comment(text):
                return [Comment(text)]
        raise TypeError(f"codegen cannot print {instruction!r}")

    def value(self, computed: ir.Expr) -> ast.expr:
        if isinstance(computed, ir.Op) and computed.op == "matmul":
            return _matmul(computed)
        return self.emitter.expr(computed)

    def loop(self, loop: ir.BlockLoop) -> list[ast.stmt]:
        """The constant-size tail block, then `for i in pypto.loop(...)` over the others."""
        statements: list[ast.stmt] = []
        if loop.tail_size:
            statements.append(
                Comment(
                    f"The tail first: the last {loop.tail_size} of the loop axis "
                    "(after the loop, pypto drops it)."
                )
            )
            statements += self.block(loop.tail)
        blocks = call("pypto.loop", 0, loop.count, 1, name=loop.name, idx_name=loop.index)
        offset = ast.BinOp(name(loop.index), ast.Mult(), value(loop.chunk))
        body = [assign(loop.offset, offset), *self.block(loop.body)]
        return [*statements, ast.For(pytree.store(loop.index), blocks, body, [])]


def _matmul(matmul: ir.Op) -> ast.expr:
    """The cube's `pypto.matmul`, reshaped to the kernel's frame where that differs (the
    frame has axes the product lacks, of size 1: the same elements)."""
    product = call(
        "pypto.matmul",
        *map(_cube_operand, matmul.operands),
        name(f"pypto.{matmul.type.dtype.pypto_name}"),
        a_trans=matmul.attrs.a_trans,
        b_trans=matmul.attrs.b_trans,
    )
    if ir.product_shape(matmul) == matmul.type.shape:
        return product
    return call("pypto.reshape", product, list(matmul.type.shape))


def _cube_operand(operand: ir.Expr) -> ast.expr:
    """A declared tensor by name, or a computed one seen as its matrix (align_axes)."""
    if ir.is_cube_matrix(operand):
        (seen,) = operand.operands
        assert isinstance(seen, ir.Ref), "a computed matmul operand is a let"
        return call("pypto.reshape", name(seen.name), list(operand.type.shape))
    assert isinstance(operand, ir.Ref), "a matmul's operands are named"
    return name(operand.name)


def _accumulate(accumulate: ir.Accumulate) -> list[ast.stmt]:
    output, part = _output_slots(accumulate.output), name(accumulate.part)
    combine = ops.lookup(accumulate.reduction).combine
    combined = pytree.fill(combine, [name(accumulate.output), part], {})
    if accumulate.overwrites:
        return [assign(output, part)]
    if accumulate.first_iteration is None:
        return [assign(output, combined)]
    first = ast.Compare(name(accumulate.first_iteration), [ast.Eq()], [value(0)])
    return [
        ast.If(first, [assign(output, part)], [assign(_output_slots(accumulate.output), combined)])
    ]


def _factory(kernel: ir.Kernel) -> ast.FunctionDef:
    emitter = PythonEmitter("scalar")
    scalars = [
        assign(stmt.name, emitter.expr(stmt.value))
        for stmt in kernel.body
        if isinstance(stmt, ir.Let) and ir.is_scalar(stmt.value)
    ]
    staging = kernel.program.staging if kernel.program else ()
    tensors = [
        *map(_declared_parameter, kernel.inputs),
        *(_buffer_parameter(s) for s in staging),
        *map(_declared_parameter, kernel.outputs),
    ]
    docstring = "\n".join(
        [
            f"Builds the `{kernel.name}` kernel. Its tiles, views and loops are planned for",
            "these sizes: compile the spec with other dims for others.",
        ]
    )
    body = []
    for code in kernel.program.phases:
        body += _Printer().block(code.instructions)
    kernel_function = (kernel_function_name(kernel), tensors, body)
    return _jit_factory(
        kernel, factory_name(kernel), factory_arguments(kernel), docstring, scalars, kernel_function
    )


def _staging_factory(kernel: ir.Kernel, staging: ir.Staging) -> ast.FunctionDef:
    docstring = "\n".join(
        [
            f"Builds the launch that writes `{staging.source}` spaced and padded with zeros",
            f"into the buffer the `{kernel.name}` kernel's convolution views (phase "
            f"{staging.phase}).",
        ]
    )
    tensors = [_declared_parameter(kernel.input(staging.source)), _buffer_parameter(staging)]
    body = _Printer().block(staging.instructions)
    staging_function = (staging_function_name(kernel, staging), tensors, body)
    factory = staging_factory_name(kernel, staging)
    return _jit_factory(kernel, factory, [], docstring, [], staging_function)


def staging_factory_name(kernel: ir.Kernel, staging: ir.Staging) -> str:
    return f"_make_{kernel.name}{staging.buffer}_kernel"


def staging_function_name(kernel: ir.Kernel, staging: ir.Staging) -> str:
    return f"_{kernel.name}{staging.buffer}_kernel"


def _tensor_annotation(shape: list[ast.expr], dtype: ir.DType) -> ast.expr:
    return call("pypto.Tensor", ast.Tuple(shape, ast.Load()), name(f"pypto.{dtype.pypto_name}"))


def _declared_parameter(tensor: ir.Tensor) -> ast.arg:
    """A kernel tensor's parameter, its shape written with the spec's dim names."""
    factors = tensor.kernel_dims or tuple((d,) for d in tensor.dims)
    shape = [_dim_product(axis) for axis in factors]
    return ast.arg(tensor.name, _tensor_annotation(shape, tensor.type.dtype))


def _dim_product(factors: tuple[ir.DimFactor, ...]) -> ast.expr:
    """`G * CG`: one kernel axis as the product of its dims (names or sizes)."""
    terms = [name(str(f)) if not str(f).isdigit() else value(int(str(f))) for f in factors]
    if not terms:
        return value(1)
    product = terms[0]
    for term in terms[1:]:
        product = ast.BinOp(product, ast.Mult(), term)
    return product


def _buffer_parameter(staging: ir.Staging) -> ast.arg:
    shape = [value(size) for size in staging.type.shape]
    return ast.arg(staging.buffer, _tensor_annotation(shape, staging.type.dtype))


def _jit_factory(
    kernel: ir.Kernel,
    factory: str,
    arguments: list[str],
    docstring: str,
    scalars: list[ast.stmt],
    jit_function: tuple[str, list[ast.arg], list[ast.stmt]],
) -> ast.FunctionDef:
    """A cached factory `factory(*arguments)` of one jit function (its name, its tensor
    parameters and its body); `scalars` are computed before it, from the dims it names."""
    function_name, tensors, body = jit_function
    run_mode = ast.Dict([value("run_mode")], [call("_run_mode")])
    jit = pytree.function(
        function_name,
        ast.arguments([], tensors, None, [], [], None, []),
        body,
        decorators=[call("pypto.frontend.jit", runtime_options=run_mode)],
        one_parameter_a_line=True,
    )
    inner = [*scalars, Blank(), jit, Blank(), pytree.returns(name(function_name))]
    # The dims the tensors' shapes and the scalars name (a size-1 or merged-away dim may
    # appear nowhere; the body's views and tiles are numbers).
    sizes = [tensor.annotation for tensor in tensors] + scalars
    named = {n.id for node in sizes for n in ast.walk(node) if isinstance(n, ast.Name)}
    used = [d for d in kernel.dims if d.name in named]
    if len(used) == 1:
        inner.insert(0, assign(used[0].name, used[0].size))
    elif used:
        targets = ast.Tuple([pytree.store(d.name) for d in used], ast.Store())
        inner.insert(0, ast.Assign([targets], value(tuple(d.size for d in used))))
    return pytree.function(
        factory,
        pytree.arguments(arguments),
        inner,
        decorators=[name("functools.cache")],
        docstring=docstring,
    )


def _init_parameters(kernel: ir.Kernel) -> ast.arguments:
    annotations, defaults = {}, {}
    for param in kernel.init_params:
        if isinstance(param.default, tuple | bool):
            annotations[param.name] = name(type(param.default).__name__)
        else:
            annotations[param.name] = name("int" if param.fixed else "float")
        if param.default is not None:
            defaults[param.name] = value(param.default)
    return pytree.arguments(["self", *(p.name for p in kernel.init_params)], annotations, defaults)


def _init_body(kernel: ir.Kernel) -> list[ast.stmt]:
    statements: list[ast.stmt] = [pytree.statement(method(call("super"), "__init__"))]
    for param in kernel.init_params:
        if param.shadowed:  # it only starts the weight of its name
            continue
        if not param.fixed:
            statements.append(assign(f"self.{param.name}", call("float", name(param.name))))
            continue
        given = name(param.name)
        if isinstance(param.default, tuple):
            given = call("tuple", given)
        check = call("_expect_argument", param.name, given, value(param.default))
        statements.append(pytree.statement(check))
    return statements + creation_statements(kernel)


def _model(program: Forward) -> ast.ClassDef:
    spec = program.spec
    arguments = spec.tensor_arguments
    forward_names = [t.name for t in arguments] + [p.name for p in spec.forward_params]
    returned = ", ".join(o.name for o in spec.returned_outputs)
    docstring = f"`{spec.name}` as a drop-in module: forward({', '.join(forward_names)}) "
    docstring += f"returns {returned}."
    if len(docstring) > 90:  # a long signature goes on a line of its own
        docstring = docstring.replace(": forward", ".\n\nforward", 1) + "\n"
    signature = pytree.arguments(["self", *forward_names])
    methods = [pytree.function("__init__", _init_parameters(spec), _init_body(spec))]
    if program.eval is None:
        methods.append(pytree.function("forward", signature, _forward_body(program)))
    else:  # a method per mode, as torch's `training` flag chooses
        given = [name(n) for n in forward_names]
        dispatch = [
            ast.If(
                name("self.training"),
                [pytree.returns(method(name("self"), "_training_forward", *given))],
                [],
            ),
            pytree.returns(method(name("self"), "_eval_forward", *given)),
        ]
        methods += [
            pytree.function("forward", signature, dispatch),
            pytree.function("_training_forward", signature, _forward_body(program)),
            pytree.function("_eval_forward", signature, _forward_body(program.eval)),
        ]
    return ast.ClassDef(
        "ModelNew", [name("torch.nn.Module")], [], [ast.Expr(ast.Constant(docstring)), *methods], []
    )


def _empty(shape: tuple[int, ...], dtype: ir.DType, device: ast.expr) -> ast.expr:
    return call("torch.empty", shape, dtype=name(f"torch.{dtype.torch_name}"), device=device)


def _forward_body(program: Forward) -> list[ast.stmt]:
    """forward's contract on its arguments, each kernel's launches in order, the outputs."""
    spec = program.spec
    statements: list[ast.stmt] = []
    for tensor in spec.tensor_arguments:
        dtype = name(f"torch.{tensor.type.dtype.torch_name}")
        reader = program.read(tensor.name)
        shape = tensor.declared_shape if reader is None else reader[0].forward_shape(reader[1])
        statements.append(
            pytree.statement(call("_expect", tensor.name, name(tensor.name), shape, dtype))
        )
    arguments = spec.tensor_arguments
    device = name(arguments[0].name + ".device") if arguments else value("cpu")
    for mask in spec.dropout_masks:  # in the spec's order, as torch's dropouts draw them
        assert isinstance(mask.init, ir.DropoutMask)
        p = mask.init.p
        rate = name(f"self.{p}") if isinstance(p, str) else value(p)
        dtype = name(f"torch.{mask.type.dtype.torch_name}")
        drawn = call("_dropout_mask", mask.declared_shape, rate, dtype, device)
        statements.append(assign(mask.name, drawn))
    if program.step is None:
        statements += _calls(program, device)
    else:
        statements += _time_loop(program, device)
    results = []
    for output in spec.outputs:
        if program.step is None:
            writer, written = program.written(output.name)
            result = method(name(output.name), "reshape", writer.forward_shape(written))
        else:  # the loop's, in the spec's shape
            result = name(_loop_result(program, output.name))
        if output.updates is None:
            results.append(result)
        else:  # training mode's new running statistic
            statements.append(
                pytree.statement(method(name(f"self.{output.updates}"), "copy_", result))
            )
    for module in program.counted:
        statements.append(
            pytree.statement(method(name(f"self.{module}.num_batches_tracked"), "add_", 1))
        )
    return [*statements, pytree.returns(*results)]


def _calls(program: Forward, device: ast.expr) -> list[ast.stmt]:
    """Each kernel's launches in order, a comment before each when there are several."""
    statements: list[ast.stmt] = []
    several = len(program.calls) > 1
    buffers = frozenset(buffer.name for buffer in program.buffers)
    for number, kernel_call in enumerate(program.calls, 1):
        if several:
            statements.append(_call_comment(kernel_call, number, len(program.calls)))
        statements += _call(kernel_call.kernel, device, buffers)
    return statements


def _time_loop(program: Forward, device: ast.expr) -> list[ast.stmt]:
    """The spec's time loop: the carried values start as their inputs; each step reads its
    step of each sequence, runs the step's kernels, writes its step of each output and
    carries the next values on."""
    loop, step = program.spec.recurrence, program.step
    assert loop is not None and step is not None
    outputs = {o.name: o for o in program.spec.outputs}
    variable = name(loop.variable)
    statements: list[ast.stmt] = [assign(n, name(start)) for n, _, start in loop.carried]
    for _, output in loop.stacked:
        tensor = outputs[output]
        statements.append(assign(output, _empty(tensor.declared_shape, tensor.type.dtype, device)))
    body: list[ast.stmt] = [
        assign(n, pytree.subscript(sequence, variable)) for n, sequence in loop.sliced
    ]
    body += _calls(step, device)

    def as_declared(written: str) -> ast.expr:
        writer, tensor = step.written(written)
        return method(name(written), "reshape", *writer.forward_shape(tensor))

    for written, output in loop.stacked:
        body.append(assign(pytree.subscript(output, variable), as_declared(written)))
    for carried, next_value, _ in loop.carried:
        body.append(assign(carried, as_declared(next_value)))
    return [*statements, _range_loop(loop.variable, loop.count, 1, body)]


def _loop_result(program: Forward, output: str) -> str:
    """What forward holds output `output` of a time loop as: itself (its steps written
    into it) or the carried value it is the last of."""
    loop = program.spec.recurrence
    assert loop is not None
    return dict(loop.final).get(output, output)


def _call_comment(kernel_call: forward.Call, number: int, count: int) -> Comment:
    writes = ", ".join(f"`{w}`" for w in kernel_call.writes)
    text = f"Kernel {number} of {count}: `{kernel_call.kernel.name}` writes {writes}"
    if kernel_call.cut_because is not None:
        text += f"; the spec is cut after it because {kernel_call.cut_because.message}"
    return Comment("\n".join(textwrap.wrap(text + ".", COMMENT_WIDTH)))


def _call(kernel: ir.Kernel, device: ast.expr, buffers: frozenset[str]) -> list[ast.stmt]:
    """One kernel's launches: its inputs as the kernel views them, its staging buffers and
    outputs allocated, the launches (in loops when the launches pass planned several).
    `buffers` are forward's intermediates, each in its writer's kernel shape."""
    statements: list[ast.stmt] = []
    factory_args = [
        call("float", name(p.name)) if p.forward else name(f"self.{p.name}")
        for p in kernel.kernel_params
    ]
    if _row_launches(kernel):
        factory_args.append(name(ir.ROW_VARIABLE))
    factory = [name(factory_name(kernel)), tuple(factory_args), len(kernel.outputs)]
    launched: list[tuple[ir.Tensor | None, str]] = []
    for tensor in kernel.inputs:
        # Weights are nn.Parameters: the kernel reads their values, never their gradients
        # (a module's buffers have none).
        read = tensor if tensor.twin_of is None else kernel.input(tensor.twin_of)
        source = name(read.name)
        if read.is_weight:
            source = method(name(f"self.{read.state_name}"), "detach")
        elif read.is_held:
            source = name(f"self.{read.state_name}")
        contiguous = method(source, "contiguous")
        # A cut tensor is cut in its declared shape, and reshaped per launch after its
        # launch's chunk is cut. An intermediate arrives in its writer's kernel shape
        # (level 3 #44's attention input, [B * T, C]): it takes the declared shape first.
        if not kernel.launch_cuts(tensor):
            contiguous = method(contiguous, "reshape", *tensor.kernel_shape)
        elif read.name in buffers:
            contiguous = method(contiguous, "reshape", *kernel.forward_shape(tensor))
        kernel_name = ir.generated_name("kernel", tensor.name)
        statements.append(assign(kernel_name, contiguous))
        launched.append((tensor, kernel_name))
    staging = kernel.program.staging
    for buffer in staging:  # one launch's, written by its staging launch before the kernel
        statements.append(
            assign(buffer.buffer, _empty(buffer.type.shape, buffer.type.dtype, device))
        )
        launched.append((None, buffer.buffer))
    row_launches = _row_launches(kernel)
    for tensor in kernel.outputs:
        shape = kernel.forward_shape(tensor) if kernel.launches else tensor.kernel_shape
        statements.append(assign(tensor.name, _empty(shape, tensor.type.dtype, device)))
        if row_launches:  # every row launch's rows of one sample, each launch's contiguous
            rows = ir.generated_name("rows", tensor.name)
            shape = (kernel.launches.rows.count, *tensor.declared_shape)
            statements.append(assign(rows, _empty(shape, tensor.type.dtype, device)))
            launched.append((None, rows))
        else:
            launched.append((tensor, tensor.name))
    parts = dict(_launch_arguments(kernel, launched))
    if kernel.launches is None:
        for buffer in staging:
            statements.append(_staging_launch(kernel, buffer, parts))
        statements.append(_launch(factory, parts.values()))
    else:
        statements += _launch_loops(kernel, factory, parts)
    return statements


def _launch(factory: list, tensors) -> ast.stmt:
    return pytree.statement(call("_launch", *factory, *tensors))


def _row_launches(kernel: ir.Kernel) -> bool:
    return kernel.launches is not None and kernel.launches.rows is not None


def _group_input(channels: ir.ChannelLaunches) -> ast.expr | None:
    """The first input channel of a launch's groups, from its first output channel
    `channel`, when some input is cut by groups."""
    ratio = channels.group_input_ratio
    if ratio is None:
        return None
    first = name("channel")
    if ratio.numerator != 1:
        first = ast.BinOp(first, ast.Mult(), value(ratio.numerator))
    return ast.BinOp(first, ast.FloorDiv(), value(ratio.denominator))


def _launch_loops(kernel: ir.Kernel, factory: list, parts: dict[str, ast.expr]) -> list[ast.stmt]:
    """`forward`'s loops over launches: each launch gets its chunk of every cut tensor (a
    contiguous view: a channel chunk is cut only within one sample)."""
    launches = kernel.launches
    assert launches is not None
    count, chunk = launches.count, launches.chunk
    comment = Comment(
        f"{count} launches of {chunk} along axis 0: pypto's simulator\n"
        "could not verify the whole kernel in one launch."
    )
    stagings = [_staging_launch(kernel, b, parts) for b in kernel.program.staging]
    per_channel = kernel.stages_per_channel_launch  # a grouped input's part, per launch
    innermost: list[ast.stmt] = [*(stagings if per_channel else [])]
    rows = launches.rows
    row_loop: list[ast.stmt] = []
    if rows is not None:
        variable = ir.ROW_VARIABLE
        for output in kernel.outputs:  # the launch's own rows
            launched = ir.generated_name("rows", output.name)
            slot = pytree.subscript(
                launched, ast.BinOp(name(variable), ast.FloorDiv(), value(rows.chunk))
            )
            parts[launched] = method(slot, "reshape", *output.kernel_shape)
        row_body = [_launch(factory, parts.values())]
        row_loop = [
            Comment(f"and {rows.count} launches of {rows.chunk} output rows each"),
            _range_loop(variable, rows.extent, rows.chunk, row_body),
            Comment("the sample's rows, each launch's, into its output"),
            *_join_rows(kernel),
        ]
        innermost += row_loop
    else:
        innermost.append(_launch(factory, parts.values()))
    sample_body: list[ast.stmt] = [*([] if per_channel else stagings)]
    channels = launches.channels
    if channels is not None:
        group_input = _group_input(channels)
        channel_body = innermost
        if group_input is not None:
            group = assign(ir.GROUP_INPUT_VARIABLE, group_input, "its groups' inputs")
            channel_body = [group, *innermost]
        sample_body += [
            Comment(f"and {channels.count} launches of {channels.chunk} output channels each"),
            _range_loop("channel", channels.extent, channels.chunk, channel_body),
        ]
    else:
        sample_body += innermost
    return [comment, _range_loop("start", launches.extent, chunk, sample_body)]


def _range_loop(variable: str, extent: int, step: int, body: list[ast.stmt]) -> ast.For:
    return ast.For(pytree.store(variable), call("range", 0, extent, step), body, [])


def _join_rows(kernel: ir.Kernel) -> list[ast.stmt]:
    """After a sample's row launches, each output's rows from their launches' buffer."""
    statements = []
    for output in kernel.outputs:
        launched = ir.generated_name("rows", output.name)
        batch, row = kernel.launch_cuts(output)  # axes 0 and 2
        # [launches, N, C, rows, ...] -> [N, C, launches, rows, ...]
        order = (1, 2, 0, *range(3, len(output.declared_shape) + 1))
        whole = list(output.declared_shape)
        whole[2] = row.extent
        sample = ir.generated_name("sample", output.name)
        settled = method(call("_settled", name(launched)), "permute", *order)
        statements += [
            assign(sample, settled),
            assign(
                pytree.subscript(output.name, pytree.span(batch.variable, batch.chunk)),
                method(name(sample), "reshape", *whole),
            ),
        ]
    return statements


def _launch_arguments(
    kernel: ir.Kernel, launched: list[tuple[ir.Tensor | None, str]]
) -> list[tuple[str, ast.expr]]:
    """Each tensor's name and the argument one launch gets: its chunk, reshaped to the
    kernel's shape, when the launches cut it (a staging buffer is one launch's)."""
    arguments = []
    for tensor, tensor_name in launched:
        cuts = kernel.launch_cuts(tensor) if tensor is not None else ()
        argument = name(tensor_name)
        if cuts:
            slots = [pytree.whole() for _ in range(cuts[-1].axis + 1)]  # the axes before a cut
            for cut in cuts:
                slots[cut.axis] = pytree.span(cut.variable, cut.chunk)
            chunk = pytree.subscript(tensor_name, *slots)
            argument = method(chunk, "reshape", *tensor.kernel_shape)
        arguments.append((tensor_name if tensor is None else tensor.name, argument))
    return arguments


def _staging_launch(kernel: ir.Kernel, staging: ir.Staging, parts: dict[str, ast.expr]) -> ast.stmt:
    """The staging launch: the kernel input it reads, the buffer it writes."""
    factory = [name(staging_factory_name(kernel, staging)), (), 1]
    return _launch(factory, [parts[staging.source], parts[staging.buffer]])


COMMENT_WIDTH = 88  # a comment's text, indented in forward's body within 99 columns


def _imports(names: list[str]) -> list[ast.stmt]:
    return [ast.Import([ast.alias(n)]) for n in names]


def emit_pypto(program: Forward, filename: str) -> str:
    spec, kernels = program.spec, program.every_kernel
    what = "kernel" if len(kernels) == 1 else f"{len(kernels)} kernels of"
    docstring = "\n\n".join(
        [
            "\n".join(
                [
                    f"PyPTO {what} `{spec.name}`, generated by ptodsl {__version__} from",
                    f"{spec_filename(filename)}. Edits are lost when the spec is compiled again.",
                ]
            ),
            *_tuned_stamp(kernels),
            "\n".join(RUN_MODES) + "\n",
        ]
    )
    row_launches = any(map(_row_launches, kernels))
    standard = ["functools", "importlib.util"]
    standard += ["math"] if any(map(uses_math, kernels)) else []
    standard += ["os"] + (["sys"] if row_launches else [])
    header: list[ast.stmt] = [ast.Expr(ast.Constant(docstring))]
    header += ambiguous_names_noqa(frozenset().union(*(k.spec_names for k in kernels)))
    header += [*_imports(standard), Blank(), *_imports(["pypto", "torch"])]
    helpers = [Verbatim(_HELPERS)]
    helpers += [Verbatim(_SETTLED)] if row_launches else []
    helpers += [Verbatim(_EXPECT_ARGUMENT)] if any(p.fixed for p in spec.params) else []
    helpers += [Verbatim(DROPOUT_MASK)] if spec.dropout_masks else []
    factories = []
    for kernel in kernels:
        factories.append(_factory(kernel))
        factories += [_staging_factory(kernel, st) for st in kernel.program.staging]
    return pytree.render([*header, *helpers, *factories, _model(program)])


def _tuned_stamp(kernels: Sequence[ir.Kernel]) -> list[str]:
    """The docstring's paragraph on a tuned plan: a reader should know the plan is not the
    default one, and how to get that."""
    tuned = {kernel.name: kernel.tuning for kernel in kernels if kernel.tuning is not None}
    if not tuned:
        return []
    choices = set(tuned.values())
    if len(choices) == 1 and len(tuned) == len({kernel.name for kernel in kernels}):
        described = choices.pop().describe()
    else:
        described = "; ".join(f"kernel {name}: {t.describe()}" for name, t in tuned.items())
    return [
        "\n".join(
            [
                f"Tuned: {described} (`ptodsl tune`'s plan choices; compile with",
                "--untuned for the default plan).",
            ]
        )
    ]


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


def emit_kernelbench(program: Forward, filename: str) -> str:
    """A KernelBench / AKG answer file: the PyPTO module, embedded so that it also works when
    a harness exec()s the answer's text instead of importing a file."""
    kernel = program.spec
    module = emit_pypto(program, filename)
    # Generated code quotes with ", and file names are escaped: nothing can end the string.
    assert "'''" not in module, "the module cannot be embedded in a raw ''' string"
    docstring = "\n".join(
        [
            f"KernelBench answer for `{kernel.name}`, generated by ptodsl {__version__} from",
            f"{spec_filename(filename)}: `ModelNew` takes the problem's constructor and forward",
            "arguments.",
        ]
    )
    docstring += "\n\n" + "\n".join(RUN_MODES) + "\n"
    return pytree.render(
        [
            ast.Expr(ast.Constant(docstring)),
            *_imports(["linecache"]),
            Blank(),
            assign("KERNEL_NAME", kernel.name),
            # a raw string, as printed: the module's own escapes stay as they are; from the
            # next line, so that its lines keep the columns they were laid out in
            Verbatim("_MODULE = r'''\n" + module + "'''"),
            Verbatim(_KERNELBENCH_LOADER),
        ]
    )
