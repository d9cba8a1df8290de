"""Name resolution, shape and dtype checking: `syntax.Spec` to a typed `ir.Kernel`."""

from __future__ import annotations

import builtins
import difflib
import keyword
import math
from collections.abc import Iterable, Mapping

import attrs

from ptodsl.frontend import recurrence
from ptodsl.frontend import syntax as s
from ptodsl.frontend.diagnostics import Span, SpecError
from ptodsl.ir import modules, ops
from ptodsl.ir import nodes as ir

# What a spec may call, by name, from the op registry.
_ELEMENTWISE = ops.of_kind(ops.Kind.ELEMENTWISE)
UNARY_FUNCTIONS = {op.spec for op in _ELEMENTWISE if op.arity == 1}
BINARY_FUNCTIONS = {op.spec: op.name for op in _ELEMENTWISE if op.arity == 2}
# `max(x, axis=1)` and `max(x)` reduce; `max(a, b)` is elementwise.
_REDUCING = {op.spec: op.name for op in ops.of_kind(ops.Kind.REDUCTION) if op.spec != "batchmean"}
EXTREMA = {spec: name for spec, name in _REDUCING.items() if spec in BINARY_FUNCTIONS}
REDUCTIONS = {spec: name for spec, name in _REDUCING.items() if spec not in EXTREMA}
# softmax(x, axis=a) and cumsum(x, axis=a, reverse=..., exclusive=...) work along one axis.
AXIS_FUNCTIONS = tuple(op.spec for op in ops.of_kind(ops.Kind.AXIS, ops.Kind.SCAN))
SCANS = tuple(op.spec for op in ops.of_kind(ops.Kind.SCAN))
MASKS = tuple(op.spec for op in ops.of_kind(ops.Kind.MASK))  # triu(x, diagonal=k)
INDEX = next(op for op in ops.of_kind(ops.Kind.INDEX))  # index(x, axis=a): positions
FLIP = next(op for op in ops.of_kind(ops.Kind.REVERSE))  # flip(x, axis=a), axis=[a, b]
# argmax(x, axis=a): the first position of the extremum along one axis, as i64.
ARG_REDUCTIONS = tuple(op.spec for op in ops.of_kind(ops.Kind.ARG_REDUCTION))
WINDOWS = tuple(op.spec for op in ops.of_kind(ops.Kind.WINDOW))  # window_max(x, axis=...)
WINDOW_KEYWORDS = ("axis", "size", "stride", "padding", "dilation", "ceil_mode")
CONVS = tuple(op.spec for op in ops.of_kind(ops.Kind.CONV))  # conv(x, w, stride=...)
CONV_KEYWORDS = ("stride", "padding", "dilation", "groups")
CONCAT = next(op for op in ops.of_kind(ops.Kind.CONCAT))  # cat([a, b], axis=k)
RESHAPES = ("reshape", "view")  # torch's names; a value is always contiguous here
AXIS_ORDERS = ("transpose", "permute", "contiguous")
# torch functions with no builtin of their own, as a spec writes them.
SPELLED_OUT = {
    "gelu": "0.5 * x * (1.0 + erf(x * 0.7071067811865476))",
    "silu": "x * sigmoid(x)",
    "softplus": "max(x, 0.0) + log1p(exp(-abs(x)))",
    "elu": "max(x, 0.0) + (exp(min(x, 0.0)) - 1.0) * alpha",
    "hardtanh": "clamp(x, -1.0, 1.0)",
    "leaky_relu": "where(x > 0.0, x, x * negative_slope)",
    "hardsigmoid": "clamp(x / 6.0 + 0.5, 0.0, 1.0)",
    "softsign": "x / (1.0 + abs(x))",
    "mish": "x * tanh(max(x, 0.0) + log1p(exp(-abs(x))))",
    "hardswish": "x * clamp(x / 6.0 + 0.5, 0.0, 1.0)",
    "relu6": "clamp(x, 0.0, 6.0)",
    "logsigmoid": "min(x, 0.0) - log1p(exp(-abs(x)))",
    "selu": "1.0507009873554805 * (max(x, 0.0) + 1.6732632423543772 * (exp(min(x, 0.0)) - 1.0))",
}
# torch functions whose result depends on the module's training mode, which a spec writes
# otherwise: what it writes instead.
MODE_DEPENDENT = {
    "batch_norm": "declare the module, `weight bn: batch_norm2d(C)`, and apply it, `bn(x)`: "
    "batch statistics in training mode, its running statistics in eval mode",
}
# torch functions a spec writes as a module, or by a builtin of another name.
WRITTEN_OTHERWISE = {
    "group_norm": "declare the module, `weight gn: group_norm(G, C)`, and apply it, `gn(x)`",
    "instance_norm": "declare the module, `weight inorm: instance_norm2d(C)`, and apply it, "
    "`inorm(x)`",
    "layer_norm": "declare the module, `weight ln: layer_norm([W])`, and apply it, `ln(x)`",
    "rms_norm": "write it out, e.g. `x * rsqrt(mean(x * x, axis=1, keepdim=true) + eps)`",
    "max_pool2d": "a window reduction: `window_max(x, axis=[2, 3], size=2)`",
    "avg_pool2d": "a window reduction: `window_mean(x, axis=[2, 3], size=2)`",
    "mse_loss": "write it out, e.g. `mean((a - b) * (a - b))`",
    "cross_entropy": "write it out with `log_softmax`",
    "kl_div": "write it out, e.g. `batchmean(t * (log(t) - log_p))`",
}
# Where the cookbook (docs/cookbook.md) shows how to write each function above.
COOKBOOK = "docs/cookbook.md"
COOKBOOK_SECTION = {
    **dict.fromkeys(SPELLED_OUT, "activations"),
    **dict.fromkeys(MODE_DEPENDENT, "norms"),
    **dict.fromkeys(("group_norm", "instance_norm", "layer_norm", "rms_norm"), "norms"),
    **dict.fromkeys(("max_pool2d", "avg_pool2d"), "pooling-and-convolution-output-sizes"),
    **dict.fromkeys(("mse_loss", "cross_entropy", "kl_div"), "losses"),
}


def cookbook_note(name: str) -> str:
    """`; the cookbook shows how: docs/cookbook.md#norms`, for a function it covers."""
    section = COOKBOOK_SECTION.get(name)
    return "" if section is None else f"; the cookbook shows how: {COOKBOOK}#{section}"


DOMAINS = {
    "real": "any real number (the default)",
    "positive": "strictly positive numbers",
    "unit": "numbers in (0, 1)",
    "sign": "-1 or +1",
    "softmax": "rows of the last axis are probability distributions (positive, sum 1)",
    "range": "integers 0 .. C-1 (`in range(C)`), for an integer input (class indices)",
}
# `param dim: int = 1`: a construction argument the kernel is fixed for, never a kernel input.
FIXED_PARAM_TYPE = "int"
FIXED_FLAG_TYPE = "bool"  # `param return_indices: bool = false`: a fixed flag
# `= ones`, `= zeros` (or any number) fill; `= randn`, `= rand` (times a number) draw.
WEIGHT_FILLS = {"ones": 1.0, "zeros": 0.0}
WEIGHT_DRAWS = ("randn", "rand")
PARAM_FILL_NOTE = "`= ones * init` starts every element at the constructor's `init`, a float param"
# What `cast` widens to f32 exactly.
HALF_PRECISION = frozenset({ir.DType.F16, ir.DType.BF16})
# Keyword names torch or numpy use where a spec has its own: a did-you-mean, not a typo.
KEYWORD_ALIASES = {"dim": "axis", "keepdims": "keepdim", "kernel_size": "size"}
# Python's spellings of the spec's words.
NAME_ALIASES = {"True": "true", "False": "false"}
# Names every spec can read unless it declares them itself.
CONSTANTS = {"pi": math.pi, "inf": math.inf}
# Integers reach the kernel's f32 arithmetic exactly up to 2^24.
MAX_EXACT_INTEGER = 1 << 24
# PyPTO's tensors have at most 4 axes; a declared tensor may have more (3-D pooling's
# [N, C, D, H, W]) and split entries (`G * CG`) add logical axes, as long as axis merging
# brings the kernel back to 4 (merge_axes says where it cannot).
MAX_DECLARED_RANK = 8

# Names the generated module defines or imports; a spec name equal to one would shadow it.
# (Loop variables are not among them: materialise names them around the spec's names.)
GENERATED_NAMES = frozenset(
    "pypto torch os math functools importlib self super kernel ModelNew".split()
)
# PyPTO's shape size (elements of one tensor) must not exceed INT32_MAX.
MAX_ELEMENTS = 2**31 - 1
# Generated Python spells one level of a spec expression with up to three parentheses, and
# Python's parser stops at 200; a left-associative chain (`a + b + c`) is printed flat.
MAX_NESTING = 50
MAX_TERMS = 1000  # nodes in one statement's expression
# The kernel's name names files (`<name>.py`, temporaries around it): well below the 255
# bytes a file name may have.
MAX_KERNEL_NAME = 100


def _check_identifier(name: str, span: Span, kernel: bool = False) -> None:
    """Spec names become Python names in generated code: keep them from shadowing anything.
    Names ptodsl makes up start with `_` (`ir.generated_name`), so no spec name may."""
    problem = None
    if keyword.iskeyword(name) or keyword.issoftkeyword(name):
        problem = "is a Python keyword"
    elif name in dir(builtins):
        problem = "is a Python builtin"
    elif name in GENERATED_NAMES:
        problem = "is a name the generated module uses"
    elif name.startswith("_"):
        problem = "starts with `_`, which is kept for the names ptodsl generates"
    elif kernel and len(name) > MAX_KERNEL_NAME:
        raise SpecError(
            f"the kernel's name has {len(name)} characters, more than {MAX_KERNEL_NAME}",
            span,
            note="it names the generated module's file and functions: shorten it",
        )
    if problem:
        raise SpecError(f"`{name}` cannot be used as a name: it {problem}", span)


def _is_minus_one(node: s.Expr) -> bool:
    return (
        isinstance(node, s.Unary)
        and isinstance(node.operand, s.Number)
        and node.operand.text == "1"
    )


def _has_number(node: s.Expr) -> bool:
    """Whether a product of sizes has an integer among its factors."""
    if isinstance(node, s.Binary):
        return _has_number(node.lhs) or _has_number(node.rhs)
    return isinstance(node, s.Number)


def _check_elements(shape: tuple[int, ...], span: Span) -> None:
    if math.prod(shape) > MAX_ELEMENTS:
        raise SpecError(
            f"a tensor of shape {list(shape)} has more than PyPTO's {MAX_ELEMENTS} elements", span
        )


def refuse_oversized_values(kernel: ir.Kernel) -> None:
    """PyPTO's limit on the values a spec computes. A limit of the target, not a type
    rule: checked after the front end, so that the front end alone (what `check --against`
    reads a spec's declarations from) takes a spec at a full shape PyPTO cannot hold, to
    be checked smaller (level 3 #31's attention scores at 16384 positions)."""
    for stmt in kernel.body:
        for node in ir.walk(stmt.value):
            if isinstance(node.type, ir.TensorType):
                _check_elements(node.type.shape, node.span)


def _check_size(value: s.Expr) -> None:
    """Rejects a statement of more than MAX_TERMS nodes: the passes walk expressions
    recursively and some of them in quadratic time (3000 terms took a minute)."""
    pending, count = [value], 0
    while pending:
        node = pending.pop()
        count += 1
        if isinstance(node, s.Binary | s.Compare):
            pending += (node.lhs, node.rhs)
        elif isinstance(node, s.Unary):
            pending.append(node.operand)
        elif isinstance(node, s.Attribute | s.Subscript):
            pending.append(node.value)
        elif isinstance(node, s.ListExpr):
            pending += node.items
        elif isinstance(node, s.Call):
            pending += (*node.args, *(k.value for k in node.keywords))
    if count > MAX_TERMS:
        raise SpecError(
            f"this expression has {count} terms and operators, more than {MAX_TERMS}",
            value.span,
            note="bind parts of it with `let`",
        )


def _check_nesting(node: s.Expr, depth: int = 0) -> None:
    """Rejects expressions nested more than MAX_NESTING deep (the left operand of an infix
    operator is at its operator's level: it prints without parentheses)."""
    if depth > MAX_NESTING:
        raise SpecError(
            f"expression nested more than {MAX_NESTING} levels deep",
            node.span,
            note="bind inner parts with `let`",
        )
    if isinstance(node, s.Binary | s.Compare):
        _check_nesting(node.lhs, depth)
        _check_nesting(node.rhs, depth + 1)
    elif isinstance(node, s.Unary):
        _check_nesting(node.operand, depth + 1)
    elif isinstance(node, s.Attribute | s.Subscript):
        _check_nesting(node.value, depth + 1)
    elif isinstance(node, s.Call | s.ListExpr):
        children = node.items if isinstance(node, s.ListExpr) else node.args
        keywords = () if isinstance(node, s.ListExpr) else node.keywords
        for child in (*children, *(k.value for k in keywords)):
            _check_nesting(child, depth + 1)


def builtin_functions() -> list[str]:
    """The functions a spec can call (beside its modules), sorted: what the language
    reference lists."""
    return sorted(
        UNARY_FUNCTIONS
        | set(BINARY_FUNCTIONS)
        | set(REDUCTIONS)
        | set(AXIS_FUNCTIONS)
        | set(MASKS)
        | set(ARG_REDUCTIONS)
        | set(WINDOWS)
        | {"where", "clamp", "cast", "batchmean", "dropout", INDEX.spec, FLIP.spec}
        | {"masked_fill", "split", *AXIS_ORDERS}
        | {CONCAT.spec}
        | set(CONVS)
        | set(RESHAPES)
    )


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean `flip`? ` when a known name is close to `name` (a typo), else ''. The
    cutoff is strict: `gelu` is not a typo of `relu`."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.8)
    return f"did you mean `{close[0]}`? " if close else ""


def _keyword_note(name: str, allowed: tuple[str, ...]) -> str:
    """What to write instead of keyword `name`: the spec's name for torch's, a close one, or
    the ones the function takes."""
    alias = KEYWORD_ALIASES.get(name)
    if alias in allowed:
        return f"did you mean `{alias}=`? (`{name}` is torch's or numpy's name for it)"
    close = did_you_mean(name, allowed).strip()
    if close:
        return close
    if not allowed:
        return "it takes no keywords"
    return "it takes " + ", ".join(f"`{keyword}=`" for keyword in allowed)


def _dtype(name: str, span: Span) -> ir.DType:
    try:
        return ir.DType(name)
    except ValueError:
        known = ", ".join(d.value for d in ir.DType)
        raise SpecError(f"unknown dtype `{name}`", span, note=f"known dtypes: {known}") from None


class _TypeChecker:
    def __init__(self, spec: s.Spec, dim_sizes: Mapping[str, int], mode: ir.Mode):
        self.spec = spec
        self.dim_sizes = dim_sizes
        self.mode = mode
        # where each module with running statistics is applied: its result depends on the
        # mode, and a second application would move the statistics twice
        self.applied: dict[str, Span] = {}
        # a module call's expansion, by the call (a call of several results is read once
        # per result)
        self.expansions: dict[tuple[s.Call, int | None], s.Expr | tuple[s.Expr, ...]] = {}
        self.step: int | None = None  # the time loop's step being written out
        self.dropouts = 0  # the dropout masks drawn so far: whether the mode matters
        self.dims: dict[str, ir.Dim] = {}
        self.params: dict[str, ir.Param] = {}
        self.inputs: dict[str, ir.Input] = {}
        self.outputs: dict[str, ir.Output] = {}
        self.shaped_by_value: set[str] = set()  # outputs declared without a shape
        self.lets: dict[str, ir.Type] = {}
        self.modules: dict[str, ir.Module] = {}
        self.containers: list[ir.Container] = []
        self.created: list[str] = []  # ModelNew's state in creation order (ir.Kernel.created)
        self.current: dict[str, str] = {}  # an assigned state -> the let holding its new value
        self.recurrence: ir.Recurrence | None = None  # the spec's time loop
        self.carried_names: set[str] = set()  # the lets the time loop carries
        # per module, its present parameters' attribute -> the weight they are held as
        self.module_parameters: dict[str, dict[str, str]] = {}
        self.split_params: dict[str, s.Binary] = {}
        self.list_params: dict[str, s.ListExpr] = {}  # `int[3] = [C, H, W]`, as written
        self.declared: dict[str, Span] = {}
        self.body: list[ir.Stmt] = []
        self.stored: dict[str, Span] = {}

    # ---- declarations --------------------------------------------------------------------

    def declare(self, name: str, span: Span, weight: bool = False) -> None:
        _check_identifier(name, span)
        param = self.params.get(name)
        if weight and param is not None and not param.forward:
            # A construction argument and a parameter of one name (#48 of level 2 takes
            # `scaling_factor` and creates `self.scaling_factor = nn.Parameter(...)`; #68
            # `nn.Parameter(torch.tensor(constant))`): expressions read the weight; an int
            # argument is only checked and gives sizes, a float one only starts a weight.
            if not param.fixed:
                self.params[name] = attrs.evolve(param, shadowed=True)
            self.declared[name] = span
            return
        if name in self.declared:
            first = self.declared[name]
            raise SpecError(
                f"`{name}` is already defined",
                span,
                note=f"first defined at line {first.line}, column {first.column}",
            )
        self.declared[name] = span

    def check(self) -> ir.Kernel:
        # The kernel's name makes `make_<name>_kernel`, `<name>_kernel` and the module's file
        # name: it follows the rules of every other name.
        _check_identifier(self.spec.name, self.spec.name_span, kernel=True)
        for item in self.spec.items:
            handler = getattr(self, "item_" + type(item).__name__)
            handler(item)
        for output in self.outputs.values():
            if output.name not in self.stored:
                raise SpecError(f"output `{output.name}` is never assigned", output.span)
        if not self.outputs:
            raise SpecError(f"kernel `{self.spec.name}` has no output", self.spec.name_span)
        mode_dependent = bool(self.applied or self.dropouts)
        eval_mode = mode_dependent and self.mode is ir.Mode.EVAL
        return ir.Kernel(
            # eval mode's kernels are named apart: one module holds both modes' kernels
            name=self.spec.name + ("_eval" if eval_mode else ""),
            dims=tuple(self.dims.values()),
            params=tuple(self.params.values()),
            inputs=tuple(self.inputs.values()),
            outputs=tuple(self.outputs.values()),
            body=tuple(self.body),
            modules=tuple(self.modules.values()),
            containers=tuple(self.containers),
            created=tuple(self.created),
            mode=self.mode if mode_dependent else None,
            recurrence=self.recurrence,
        )

    def item_DimDecl(self, item: s.DimDecl) -> None:  # noqa: N802 - dispatched by type name
        self.declare(item.name, item.span)
        size = self.dim_sizes.get(item.name, item.size)
        if item.computed is not None:
            if item.name in self.dim_sizes:
                raise SpecError(
                    f"dim `{item.name}` is computed from other dims; it cannot be resized",
                    item.span,
                    note="resize the dims it is computed from",
                )
            sizes = {name: dim.size for name, dim in self.dims.items()}
            size = s.computed_size(item, sizes, s.size_params(self.spec.items))
        if size < 1:
            raise SpecError(f"dim `{item.name}` must be at least 1, not {size}", item.span)
        if size > MAX_ELEMENTS:
            limit = f"PyPTO's limit of {MAX_ELEMENTS}"
            raise SpecError(f"dim `{item.name}` is above {limit}", item.span)
        self.dims[item.name] = ir.Dim(item.name, size, item.span)

    def item_ParamDecl(self, item: s.ParamDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span)
        if item.type.dtype == FIXED_PARAM_TYPE:
            value = self.fixed_value(item)
            self.params[item.name] = ir.Param(item.name, value, item.span, fixed=True)
            if isinstance(item.default, s.Binary):  # `G * CG`: a size that splits (modules)
                self.split_params[item.name] = item.default
            if isinstance(item.default, s.ListExpr):  # a module's shape names its dims
                self.list_params[item.name] = item.default
            return
        if item.type.dtype == FIXED_FLAG_TYPE and item.type.dims is None:
            if not isinstance(item.default, s.Bool):
                raise SpecError(
                    f"`bool` param `{item.name}` needs the value the kernel is built for",
                    item.span if item.default is None else item.default.span,
                    note=f"for example `param {item.name}: bool = false`",
                )
            self.params[item.name] = ir.Param(item.name, item.default.value, item.span, fixed=True)
            return
        dtype = _dtype(item.type.dtype, item.type.dtype_span)
        if item.type.dims is not None:
            raise SpecError(
                "a float param is a scalar",
                item.type.span,
                note="only `int` params take a length: `param shape: int[3] = [C, H, W]`",
            )
        default = item.default
        if default is not None and not isinstance(default, s.Number):
            raise SpecError("a float param's value is a number", default.span)
        if default is not None and not dtype.holds(default.value):
            raise SpecError(
                f"`{default.text}` is beyond {dtype.value}'s range: it rounds to infinity",
                default.span,
                note=f"the largest {dtype.value} is {dtype.largest:.8g}",
            )
        value = None if default is None else default.value
        self.params[item.name] = ir.Param(item.name, value, item.span)

    def fixed_value(self, item: s.ParamDecl) -> int | tuple[int, ...]:
        """An `int` param's value: an integer or a dim; `int[k]`: a list of k of those."""
        example = f"`param {item.name}: int = 1`"
        if item.default is None:
            raise SpecError(
                f"`int` param `{item.name}` needs the value the kernel is built for",
                item.span,
                note=f"for example {example}",
            )
        if item.type.dims is None:
            return self.fixed_int(item.default)
        if len(item.type.dims) != 1 or len(item.type.dims[0]) != 1:
            raise SpecError("an `int` param is `int` or `int[k]`", item.type.span)
        length = self.dim_size(item.type.dims[0][0])
        if not isinstance(item.default, s.ListExpr) or len(item.default.items) != length:
            raise SpecError(f"`int[{length}]` takes a list of {length} values", item.default.span)
        return tuple(self.fixed_int(value) for value in item.default.items)

    def fixed_int(
        self, node: s.Expr, expected: str = "an `int` param's value is an integer or a dim"
    ) -> int:
        """An integer, a dim, an `int` param, or a sum, difference, product or exact quotient
        of those (`D - 2`, `G * CG`, `C / G`)."""
        if isinstance(node, s.Binary) and node.op in ("add", "sub", "mul", "div"):
            lhs, rhs = self.fixed_int(node.lhs, expected), self.fixed_int(node.rhs, expected)
            if node.op in ("add", "sub", "mul"):
                return {"add": lhs + rhs, "sub": lhs - rhs, "mul": lhs * rhs}[node.op]
            if rhs == 0 or lhs % rhs:
                raise SpecError(f"{lhs} / {rhs} is not a whole number", node.span)
            return lhs // rhs
        if isinstance(node, s.Name):
            param = self.params.get(node.id)
            if param is not None and param.fixed and isinstance(param.default, int):
                return param.default
            if node.id not in self.dims:
                raise SpecError(f"unknown dim `{node.id}`", node.span, note=self.dims_note(node.id))
            return self.dims[node.id].size
        if not (isinstance(node, s.Number) and node.value.is_integer() and "." not in node.text):
            raise SpecError(expected, node.span)
        return int(node.value)

    def item_InputDecl(self, item: s.InputDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span)
        if item.type.dims is None:
            # A shapeless input is a scalar passed to `forward`.
            _dtype(item.type.dtype, item.type.dtype_span)
            if item.domain is not None:
                raise SpecError("a scalar input takes no domain", item.domain_span)
            value = None if item.value is None else item.value.value
            self.params[item.name] = ir.Param(item.name, value, item.span, forward=True)
            return
        if item.value is not None:
            raise SpecError(
                "only a scalar input takes a value",
                item.value.span,
                note="a tensor input's values come from the caller",
            )
        domain = item.domain or "real"
        if domain not in DOMAINS:
            known = "; ".join(f"`{name}`: {meaning}" for name, meaning in DOMAINS.items())
            raise SpecError(f"unknown domain `{domain}`", item.domain_span, note=known)
        extent = self.domain_extent(item, domain)
        self.inputs[item.name] = self.declared_tensor(ir.Input, item, domain=domain, extent=extent)

    def domain_extent(self, item: s.InputDecl, domain: str) -> int | None:
        """An integer input's values are `in range(C)`; a bool input's are both truth values;
        a float input's come from a float domain."""
        dtype = _dtype(item.type.dtype, item.type.dtype_span)
        if (domain == "range") != (item.domain_extent is not None):
            raise SpecError(
                "`range` takes the count of values, e.g. `in range(C)`"
                if domain == "range"
                else f"domain `{domain}` takes no argument",
                item.domain_span,
            )
        if dtype is ir.DType.BOOL and item.domain is not None:
            raise SpecError(
                "a bool input takes no domain", item.domain_span, note="checks draw both values"
            )
        if dtype in (ir.DType.I32, ir.DType.I64) and domain != "range":
            raise SpecError(
                f"integer input `{item.name}` needs the range of its values",
                item.domain_span or item.type.dtype_span,
                note=f"e.g. `input {item.name}: {dtype.value}[...] in range(C)` for class "
                "indices 0 .. C-1",
            )
        if dtype.is_float and domain == "range":
            raise SpecError(
                "`range` is a domain of integer inputs",
                item.domain_span,
                note=f"declare `{item.name}` as i64 or i32, or drop the domain",
            )
        if item.domain_extent is None:
            return None
        extent = self.dim_size(item.domain_extent)
        if extent > MAX_EXACT_INTEGER:
            raise SpecError(
                f"range({extent}) has integers a float cannot hold exactly",
                item.domain_extent.span,
                note=f"kernels compute in f32: keep integer inputs below {MAX_EXACT_INTEGER}",
            )
        return extent

    def item_WeightDecl(self, item: s.WeightDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span, weight=True)
        init = self.weight_init(item.init)
        if item.type.dims is None:  # `weight s: f32 = 2.0`: a 0-d parameter
            item = attrs.evolve(item, type=attrs.evolve(item.type, dims=()))
        weight = self.declared_tensor(ir.Input, item, init=init, path=item.path)
        self.check_weight_dtype(weight, item.type.dtype_span)
        self.inputs[item.name] = weight
        self.created.append(weight.state_name)

    def item_StateDecl(self, item: s.StateDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span)
        tensor = self.declared_tensor(ir.Input, item, init=ir.Carried(self.weight_init(item.init)))
        self.check_weight_dtype(tensor, item.type.dtype_span)
        self.inputs[item.name] = tensor
        self.created.append(item.name)

    def item_BufferDecl(self, item: s.BufferDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span)
        init = item.init
        if isinstance(init, s.Triangle):
            if init.function not in ("tril", "triu") or init.fill.id not in WEIGHT_FILLS:
                raise SpecError(
                    f"a buffer starts as `tril(ones)` or `triu(ones)`, not "
                    f"`{init.function}({init.fill.id})`",
                    init.span,
                    note="`tril(ones, diagonal=k)` keeps the ones on and below diagonal k",
                )
            registered = ir.Registered(WEIGHT_FILLS[init.fill.id], init.function, init.diagonal)
        else:
            start = self.weight_init(init)
            if not isinstance(start, ir.Filled):
                raise SpecError(
                    f"a buffer is a constant: `{item.name}` cannot start {start}",
                    init.span,
                    note="`ones`, `zeros`, a number, `tril(ones)` or `triu(ones)`; a drawn "
                    "tensor carried between calls is a `state`",
                )
            registered = ir.Registered(start.value)
        if item.type.dims is None:
            item = attrs.evolve(item, type=attrs.evolve(item.type, dims=()))
        tensor = self.declared_tensor(ir.Input, item, init=registered, path=item.path)
        if isinstance(init, s.Triangle) and tensor.type.rank < 2:
            raise SpecError("a triangle needs two axes", item.type.span)
        self.inputs[item.name] = tensor
        self.created.append(tensor.state_name)

    def refuse_second_assignment(self, item: s.Assign, kind: str, advice: str = "") -> None:
        if item.target in self.stored:
            first = self.stored[item.target]
            raise SpecError(
                f"{kind} `{item.target}` is assigned twice",
                item.span,
                note=f"first assigned at line {first.line}{advice}",
            )

    def assign_state(self, item: s.Assign) -> None:
        """`hidden = tanh(...)`: the state's new value, which forward keeps for the next
        call (an output updating it) and which the statements after this one read."""
        state = self.inputs[item.target]
        self.refuse_second_assignment(item, "state", "; bind steps with `let`")
        _check_size(item.value)
        _check_nesting(item.value)
        value = self.expr(item.value)
        if value.type != state.type:
            raise SpecError(
                f"state `{item.target}` is {state.type}, but this value is {value.type}",
                item.value.span,
                note="a state keeps its shape and dtype from call to call",
            )
        self.stored[item.target] = item.span
        new = ir.generated_name("new", item.target)
        self.lets[new] = value.type
        self.body.append(ir.Let(new, value, item.span))
        update = ir.generated_name("update", item.target)
        self.outputs[update] = ir.Output(
            update,
            value.type,
            item.span,
            state.dims,
            declared=state.declared_shape,
            splits=state.splits,
            updates=item.target,
        )
        self.stored[update] = item.span
        self.body.append(ir.Store(update, ir.Ref(new, value.type, item.span), item.span))
        self.current[item.target] = new

    def item_ContainerDecl(self, item: s.ContainerDecl) -> None:  # noqa: N802
        self.containers.append(ir.Container(item.path, item.torch, item.span))
        self.created.append(item.path)

    def check_weight_dtype(self, weight: ir.Input, span: Span) -> None:
        if not weight.type.dtype.is_float:
            raise SpecError(
                f"weight `{weight.name}` is {weight.type.dtype.value}: weights are learned, "
                "so float",
                span,
                note="declare it f32 (or f16, bf16)",
            )

    def weight_init(self, node: s.Name | s.Binary | s.Number) -> ir.WeightInit:
        if isinstance(node, s.Number):
            return ir.Filled(node.value)
        name = node.lhs if isinstance(node, s.Binary) else node
        assert isinstance(name, s.Name)
        if isinstance(node, s.Name) and name.id in WEIGHT_FILLS:
            return ir.Filled(WEIGHT_FILLS[name.id])
        if isinstance(node, s.Name) and self.float_param(name) is not None:
            return ir.ParamFilled(name.id)  # `= constant`: nn.Parameter(torch.tensor(constant))
        if isinstance(node, s.Binary) and isinstance(node.rhs, s.Name):
            # `= ones * init`: nn.Parameter(torch.ones(shape) * init)
            if self.float_param(node.rhs) is None:
                raise SpecError(
                    f"`{node.rhs.id}` is not a param of the constructor",
                    node.rhs.span,
                    note=PARAM_FILL_NOTE,
                )
            if name.id != "ones":
                raise SpecError(
                    "only `ones` is scaled by a param",
                    node.span,
                    note=PARAM_FILL_NOTE + "; a draw is scaled by a number (`= randn * 0.02`)",
                )
            return ir.ParamFilled(node.rhs.id)
        if isinstance(node, s.Binary) and name.id in WEIGHT_FILLS:
            value = WEIGHT_FILLS[name.id] * node.rhs.value
            raise SpecError(
                f"`{name.id}` is not scaled: only a draw is",
                node.span,
                note=f"write the value: `= {ir.format_number(value)}`",
            )
        if name.id not in WEIGHT_DRAWS:
            known = [*WEIGHT_FILLS, *WEIGHT_DRAWS]
            raise SpecError(
                f"unknown initial value `{name.id}`",
                name.span,
                note=did_you_mean(name.id, known) + s.WEIGHT_INIT_NOTE,
            )
        scale = node.rhs.value if isinstance(node, s.Binary) else 1.0
        return ir.Drawn(name.id, scale)

    def float_param(self, name: s.Name) -> ir.Param | None:
        """The constructor's float param `name` (a weight can start at its value), or None;
        an int or forward param is an error."""
        param = self.params.get(name.id)
        if param is None:
            return None
        if param.fixed or param.forward:
            raise SpecError(
                f"a weight starts at a float param of the constructor; `{name.id}` is "
                + ("a forward param" if param.forward else "an int param"),
                name.span,
                note=f"declare `param {name.id}: f32 = ...` (a constructor argument)",
            )
        return param

    def item_ModuleDecl(self, item: s.ModuleDecl) -> None:  # noqa: N802
        call = item.module
        definition = modules.MODULES.get(call.func)
        if definition is None:
            known = list(modules.MODULES)
            renamed = modules.RENAMED_MODULES.get(call.func)
            raise SpecError(
                f"unknown module `{call.func}`",
                call.func_span,
                note=f"write {renamed}"
                if renamed
                else did_you_mean(call.func, known) + "known: " + ", ".join(known),
            )
        self.declare(item.name, item.span)
        given = self.module_arguments(definition, call)
        arguments = {
            argument.name: self.module_argument(argument, given.get(argument.name))
            for argument in definition.arguments
        }
        unsupported = definition.unsupported(arguments) if definition.unsupported else None
        if unsupported is not None:
            raise SpecError(
                f"{unsupported}: ptodsl does not build {definition.torch} so yet",
                call.span,
                note="leave the argument at its default",
            )
        problem = definition.invalid(arguments) if definition.invalid else None
        if problem is not None:
            raise SpecError(
                f"{problem}", call.span, note=f"torch's {definition.torch} refuses these arguments"
            )
        path = item.path or item.name
        module = ir.Module(path, definition.name, tuple(arguments.items()), item.span)
        self.modules[item.name] = module
        self.created.append(path)
        held = self.module_parameters[item.name] = {}
        for parameter in definition.present_parameters(arguments):
            # `attn_out_proj_weight` for a submodule's (`attn.out_proj.weight`)
            name = f"{item.name}_{parameter.attribute.replace('.', '_')}"
            held[parameter.attribute] = name
            if name in self.declared:
                first = self.declared[name]
                raise SpecError(
                    f"`{item.name}.{parameter.attribute}` is held as `{name}`, which is "
                    "already defined",
                    item.span,
                    note=f"`{name}` is defined at line {first.line}, column {first.column}: "
                    "rename one of them",
                )
            self.declared[name] = item.span
            if callable(parameter.shape):  # computed from the arguments: literal sizes
                declared = parameter.shape(arguments)
                grouped = [(size,) for size in declared]
            else:
                declared, grouped = (), []
                for axis in parameter.shape:  # a SHAPE argument gives several axes
                    value, node = arguments[axis], given.get(axis)
                    if not isinstance(value, tuple):
                        declared += (value,)
                        grouped.append(self.size_factors(node, value))
                        continue
                    if isinstance(node, s.Name) and node.id in self.list_params:
                        node = self.list_params[node.id]
                    items = node.items if isinstance(node, s.ListExpr) else (None,) * len(value)
                    declared += value
                    grouped += [
                        self.size_factors(item, size)
                        for item, size in zip(items, value, strict=True)
                    ]
            dims = tuple(factor for factors in grouped for factor in factors)
            _check_elements(declared, call.span)
            weight = ir.Input(
                name,
                ir.TensorType(tuple(map(self.factor_size, dims)), ir.DType.F32),
                item.span,
                dims,
                declared=declared,
                splits=tuple(map(len, grouped)),
                init=ir.ModuleParameter(path, parameter.attribute),
            )
            self.inputs[name] = weight

    def module_arguments(self, definition: modules.ModuleDef, call: s.Call) -> dict[str, s.Expr]:
        """Positional and keyword arguments bound to the module's argument names."""
        names = [a.name for a in definition.arguments]
        if len(call.args) > len(names):
            raise SpecError(
                f"`{call.func}` takes at most {len(names)} arguments, not {len(call.args)}",
                call.args[len(names)].span,
                note=f"`{call.func}({', '.join(names)})`",
            )
        given: dict[str, s.Expr] = dict(zip(names, call.args, strict=False))
        for keyword_argument in call.keywords:
            if keyword_argument.name not in names:
                raise SpecError(
                    f"`{call.func}` takes no argument `{keyword_argument.name}`",
                    keyword_argument.span,
                    note=did_you_mean(keyword_argument.name, names)
                    + f"`{call.func}({', '.join(names)})`",
                )
            if keyword_argument.name in given:
                raise SpecError(
                    f"argument `{keyword_argument.name}` is given twice", keyword_argument.span
                )
            given[keyword_argument.name] = keyword_argument.value
        for argument in definition.arguments:
            if argument.default is None and argument.name not in given:
                raise SpecError(
                    f"`{call.func}` needs `{argument.name}`",
                    call.span,
                    note=f"`{call.func}({', '.join(names)})`",
                )
        return given

    def module_argument(self, argument: modules.Argument, node: s.Expr | None) -> ir.ParamValue:
        if node is None:
            assert argument.default is not None
            return argument.default
        kind = modules.ArgumentKind
        if argument.kind is kind.SIZE:
            return self.fixed_int(node)
        if argument.kind in (kind.SIZES, kind.SHAPE):
            if isinstance(node, s.ListExpr):
                return tuple(self.fixed_int(item) for item in node.items)
            if isinstance(node, s.Name) and isinstance(
                getattr(self.params.get(node.id), "default", None), tuple
            ):
                return self.params[node.id].default
            return self.fixed_int(node)
        if argument.kind is kind.FLAG and isinstance(node, s.Bool):
            return node.value
        if argument.kind is kind.NUMBER and isinstance(node, s.Number):
            return node.value
        if argument.kind is kind.NUMBER and isinstance(node, s.Name):
            # `eps=eps`: a param of ModelNew's constructor, its value when the kernel is built
            param = self.params.get(node.id)
            if param is not None and not param.forward and type(param.default) in (int, float):
                return float(param.default)
        raise SpecError(
            f"`{argument.name}` is {argument.kind.value}",
            node.span,
            note="a number, or a param of the constructor (`eps=eps`)"
            if argument.kind is kind.NUMBER
            else None,
        )

    def size_factors(self, node: s.Expr | None, size: ir.ParamValue) -> tuple[ir.DimFactor, ...]:
        """How a module parameter's axis is spelled: dims' names where the argument names
        them, and a product of named sizes (`G * CG`, or an `int` param declared as one)
        splits the axis into its factors, as in a shape. A product with a number in it
        (`4 * n_embd`, `16 * 5 * 5`) is one axis: a layer's width, not groups."""
        if isinstance(node, s.Binary) and node.op == "mul" and not _has_number(node):
            return (*self.size_factors(node.lhs, None), *self.size_factors(node.rhs, None))
        if isinstance(node, s.Name) and node.id in self.dims:
            return (node.id,)
        if isinstance(node, s.Name) and node.id in self.split_params:
            return self.size_factors(self.split_params[node.id], None)
        return (self.fixed_int(node) if size is None else size,)

    def factor_size(self, factor: ir.DimFactor) -> int:
        return self.dims[factor].size if isinstance(factor, str) else factor

    def item_OutputDecl(self, item: s.OutputDecl) -> None:  # noqa: N802
        self.declare(item.name, item.span)
        if item.type.dims is None:
            # `output y: f32`: the shape of the value assigned to it (item_Assign)
            dtype = _dtype(item.type.dtype, item.type.dtype_span)
            output = ir.Output(item.name, ir.TensorType((), dtype), item.span, ())
            self.shaped_by_value.add(item.name)
        else:
            output = self.declared_tensor(ir.Output, item)
        if output.type.dtype in (ir.DType.I32, ir.DType.BOOL):
            raise SpecError(
                f"output `{item.name}` is {output.type.dtype.value}: outputs are float or i64",
                item.type.dtype_span,
                note="i64 outputs hold positions (`argmax`, `argmin`), as torch returns them",
            )
        self.outputs[item.name] = output

    def declared_tensor(
        self,
        kind: type[ir.Tensor],
        item: s.InputDecl | s.WeightDecl | s.OutputDecl,
        **fields: str | int | None,
    ) -> ir.Tensor:
        assert item.type.dims is not None
        return kind(
            item.name,
            self.tensor_type(item.type),
            item.span,
            self.dim_factors(item.type),
            declared=self.declared_shape(item.type),
            splits=tuple(len(entry) for entry in item.type.dims),
            **fields,
        )

    def dim_factors(self, type_expr: s.TensorTypeExpr) -> tuple[ir.DimFactor, ...]:
        """Dim names, and literal sizes (an offset dim such as `N + 1` is its size)."""
        assert type_expr.dims is not None
        return tuple(
            d.name if d.name is not None and not d.offset else self.dim_size(d)
            for entry in type_expr.dims
            for d in entry
        )

    def declared_shape(self, type_expr: s.TensorTypeExpr) -> tuple[int, ...]:
        """The shape `forward` sees: one size per declared entry (`G * CG` multiplied)."""
        assert type_expr.dims is not None
        return tuple(math.prod(self.dim_size(d) for d in entry) for entry in type_expr.dims)

    def tensor_type(self, type_expr: s.TensorTypeExpr) -> ir.TensorType:
        """The logical type: split entries count as separate axes."""
        dtype = _dtype(type_expr.dtype, type_expr.dtype_span)
        assert type_expr.dims is not None
        if len(type_expr.dims) > MAX_DECLARED_RANK:
            raise SpecError(
                f"rank {len(type_expr.dims)} is above ptodsl's limit of {MAX_DECLARED_RANK}",
                type_expr.span,
            )
        sizes = tuple(self.dim_size(d) for entry in type_expr.dims for d in entry)
        _check_elements(sizes, type_expr.span)
        return ir.TensorType(sizes, dtype)

    def size_value(self, node: s.Expr) -> int:
        """A size expression of integers, dims and `int` params (`2 * D - 1`, `7 + C_out`)."""
        sizes = {name: dim.size for name, dim in self.dims.items()}
        return s.size_value(node, sizes, s.size_params(self.spec.items))

    def sized_slice(self, cut: s.Slice) -> s.Slice:
        """A slice with its bounds and step as ints (`x[:, 7 + C_out:]`)."""

        def sized(bound: int | s.Expr | None) -> int | None:
            return bound if bound is None or isinstance(bound, int) else self.size_value(bound)

        return attrs.evolve(cut, start=sized(cut.start), stop=sized(cut.stop), step=sized(cut.step))

    def dim_size(self, dim: s.DimRef) -> int:
        if dim.expr is not None:
            size = self.size_value(dim.expr)
            if size < 1:
                raise SpecError(f"this axis is {size} long: a dimension is at least 1", dim.span)
            return size
        if dim.size is not None:
            if dim.size < 1:
                raise SpecError(f"a dimension must be at least 1, not {dim.size}", dim.span)
            return dim.size
        if dim.name not in self.dims:
            raise SpecError(f"unknown dim `{dim.name}`", dim.span, note=self.dims_note(dim.name))
        size = self.dims[dim.name].size + dim.offset
        if size < 1:
            raise SpecError(
                f"`{dim.name} {'+' if dim.offset > 0 else '-'} {abs(dim.offset)}` is {size}: "
                "a dimension must be at least 1",
                dim.span,
            )
        return size

    def dims_note(self, name: str) -> str:
        if not self.dims:
            return "declare it first, e.g. `dims N = 1024`"
        return did_you_mean(name, self.dims) + "declared dims: " + ", ".join(self.dims)

    # ---- statements ----------------------------------------------------------------------

    def item_Let(self, item: s.Let) -> None:  # noqa: N802
        if self.recurrence is not None:
            self.refuse_after_loop(item)
        _check_size(item.value)
        _check_nesting(item.value)
        value = self.expr(item.value)
        if item.hidden:  # the parser's name, kept from the spec's own
            self.declared[item.name] = item.span
        else:
            self.declare(item.name, item.span)
        self.lets[item.name] = value.type
        self.body.append(ir.Let(item.name, value, item.span))

    def item_For(self, item: s.For) -> None:  # noqa: N802
        """`for t in range(T)` ... `end`, a loop over time steps. Its steps are written out
        into the body, one after another (what the spec computes: the reference and the
        check read them), and one step is a spec of its own (`recurrence.step_spec`),
        checked as any spec: its kernel is what is lowered, and `forward` runs it T times,
        each step's output written into its slice of the output."""
        if self.recurrence is not None:
            raise SpecError("a spec has one time loop", item.span)
        count = item.count if isinstance(item.count, int) else self.size_value(item.count)
        if count < 1:
            raise SpecError(f"a time loop of {count} steps: it runs at least one", item.span)
        _check_identifier(item.variable, item.span)
        if item.variable in self.declared or item.variable in self.dims:
            raise SpecError(f"the step `{item.variable}` shadows a name of the spec", item.span)
        starts = self.carried_starts(item)
        stacked = self.stacked_outputs(item, count)
        sliced = recurrence.sequences(item)
        for name, span in sliced.items():
            tensor = self.inputs.get(name)
            if tensor is None or tensor.is_weight or tensor.type.rank < 2:
                raise SpecError(
                    f"`{name}[{item.variable}]` reads a step of `{name}`, which is not an input "
                    "of two or more axes",
                    span,
                    note="a step reads a sequence the spec takes (`input x: f32[T, B, I]`); "
                    "weights and lets are read whole",
                )
            if tensor.type.shape[0] < count or tensor.splits[:1] not in ((), (1,)):
                raise SpecError(
                    f"`{name}` has {tensor.type.shape[0]} steps along its first axis, the loop "
                    f"{count}",
                    span,
                    note="a loop reads at most the steps its sequences have",
                )
        read = {
            node.id
            for stmt in item.body
            for node in s.walk_syntax(stmt.value)
            if isinstance(node, s.Name) and node.id in self.inputs
        }
        names = recurrence.step_names(item, sliced, starts, stacked, set(self.declared))
        step_spec = recurrence.step_spec(self.spec, item, names, starts, read - set(starts))
        step = typecheck(step_spec, self.dim_sizes, self.mode)
        if step.mode is not None:
            raise SpecError(
                "this time loop's steps depend on the module mode (a dropout or a norm's "
                "running statistics): not supported yet",
                item.span,
                note="a loop runs one step program in every mode: keep dropout and running "
                "statistics out of it",
            )
        self.carried_names = set(starts)
        per_step: dict[str, list[str]] = {name: [] for name in stacked}
        for number in range(count):
            self.step = number
            for position, stmt in enumerate(item.body):
                target = stmt.name if isinstance(stmt, s.Let) else stmt.target
                # a carried value assigned twice in a step: its second value named apart
                again = any(
                    (other.name if isinstance(other, s.Let) else other.target) == target
                    for other in item.body[:position]
                )
                base = f"{target}_{position}" if again else target
                let = ir.generated_name(f"step{number}", base)
                value = recurrence.at_step(stmt.value, item.variable, number)
                self.item_Let(s.Let(let, value, stmt.span, hidden=True))
                if isinstance(stmt, s.StepAssign):
                    per_step[target].append(let)
                else:  # what follows reads the new value
                    self.current[target] = let
        self.step = None
        for stmt in item.body:  # the steps' own lets are the loop's only
            if isinstance(stmt, s.Let):
                self.current.pop(stmt.name, None)
        for output, lets in per_step.items():
            self.store_stacked(output, lets, item.span)
        carried = [(name, names.next[name], start.name) for name, start in starts.items()]
        self.recurrence = ir.Recurrence(
            item.variable,
            count,
            step,
            tuple((names.sliced[x], x) for x in sliced),
            tuple((name, next_name, start) for name, next_name, start in carried),
            tuple((names.stacked[y], y) for y in stacked),
            (),
        )

    def store_stacked(self, name: str, lets: list[str], span: Span) -> None:
        """Output `name` as the steps' values stacked along a new first axis (torch's
        `stack`): built as IR, as a spec's expression would be too long for a long loop."""
        output = self.outputs[name]
        parts = []
        for let in lets:
            step = self.lets[let]
            assert isinstance(step, ir.TensorType)
            parts.append(ir.op_reshape(ir.Ref(let, step, span), (1, *step.shape)))
        while len(parts) > 1:  # joined pairwise, a tree log2(T) deep: printable Python
            pairs = [parts[i : i + 2] for i in range(0, len(parts), 2)]
            parts = [
                ir.op(CONCAT.name, *pair, span=span, attributes=ir.Along(0))
                if len(pair) == 2
                else pair[0]
                for pair in pairs
            ]
        (value,) = parts
        if value.type != output.type:
            raise SpecError(
                f"output `{name}` is declared {output.type}, but its steps stack to {value.type}",
                span,
            )
        self.stored[name] = span
        self.body.append(ir.Store(name, value, span))

    def carried_starts(self, loop: s.For) -> dict[str, s.InputDecl]:
        """The lets the loop assigns, each with the input it starts as (`let h = h0`, the
        only statements before the loop), by name."""
        inputs = {i.name: i for i in self.spec.items if isinstance(i, s.InputDecl)}
        lets = {stmt.name: stmt.value for stmt in self.body if isinstance(stmt, ir.Let)}
        for stmt in self.body:
            value = stmt.value
            if not (
                isinstance(stmt, ir.Let) and isinstance(value, ir.Ref) and value.name in inputs
            ):
                raise SpecError(
                    "a time loop comes first in the spec's statements",
                    stmt.span,
                    note="before it, only `let h = h0` starts a value the loop carries "
                    "(computing before the loop is not supported yet)",
                )
        starts: dict[str, s.InputDecl] = {}
        for stmt in loop.body:
            if isinstance(stmt, s.Assign):
                value = lets.get(stmt.target)
                if not isinstance(value, ir.Ref):
                    raise SpecError(
                        f"`{stmt.target}` is assigned in the loop but not a `let` before it",
                        stmt.span,
                        note=f"carry a value from step to step: `let {stmt.target} = h0` "
                        "before the loop, for an input `h0`; write an output per step as "
                        f"`{stmt.target}[{loop.variable}] = ...`",
                    )
                starts[stmt.target] = inputs[value.name]
        return starts

    def stacked_outputs(self, loop: s.For, count: int) -> list[str]:
        """The outputs the loop writes per step (`y[t] = ...`), each once."""
        written: list[str] = []
        for stmt in loop.body:
            if not isinstance(stmt, s.StepAssign):
                continue
            output = self.outputs.get(stmt.target)
            if output is None:
                raise SpecError(f"`{stmt.target}` is not a declared output", stmt.span)
            if stmt.index != loop.variable:
                raise SpecError(
                    f"a step writes its own slice: `{stmt.target}[{loop.variable}]`", stmt.span
                )
            if stmt.target in written:
                raise SpecError(
                    f"`{stmt.target}[{loop.variable}]` is written twice",
                    stmt.span,
                    note="a step writes each output's slice once",
                )
            if not output.type.shape or output.type.shape[0] != count or output.splits[:1] != (1,):
                raise SpecError(
                    f"output `{stmt.target}` is {output.type}: its first axis is not the "
                    f"loop's {count} steps",
                    stmt.span,
                    note=f"declare it with the steps first (`output {stmt.target}: "
                    "f32[T, ...]`), as torch.stack(..., dim=0) returns it",
                )
            written.append(stmt.target)
        return written

    def refuse_after_loop(self, item: s.Let | s.Assign) -> None:
        """After a time loop, only outputs of a carried value's last value (`h_n = h`)."""
        carried = isinstance(item.value, s.Name) and item.value.id in self.carried_names
        if isinstance(item, s.Assign) and carried and item.target in self.outputs:
            assert self.recurrence is not None
            final = (*self.recurrence.final, (item.target, item.value.id))
            self.recurrence = attrs.evolve(self.recurrence, final=final)
            return
        raise SpecError(
            "after a time loop, a spec only outputs a value the loop carried",
            item.span,
            note="write `h_n = h` for a carried `h`; computing after the loop is not supported yet",
        )

    def item_Assign(self, item: s.Assign) -> None:  # noqa: N802
        if self.recurrence is not None:
            self.refuse_after_loop(item)
        if item.target in self.inputs and self.inputs[item.target].is_carried:
            return self.assign_state(item)
        if item.target not in self.outputs:
            if item.target in self.declared:
                raise SpecError(f"cannot assign to `{item.target}`: it is not an output", item.span)
            raise SpecError(
                f"`{item.target}` is not a declared output",
                item.span,
                note=f"declare it (`output {item.target}: f32[...]`) or bind it with `let`",
            )
        self.refuse_second_assignment(item, "output")
        output = self.outputs[item.target]
        _check_size(item.value)
        _check_nesting(item.value)
        value = self.expr(item.value)
        if isinstance(value.type, ir.ScalarType):
            raise SpecError(
                f"output `{item.target}` is a tensor, but this value is a scalar",
                item.value.span,
            )
        if item.target in self.shaped_by_value:  # declared without a shape: the value's
            shape = value.type.shape
            output = attrs.evolve(
                output, type=attrs.evolve(output.type, shape=shape), dims=shape, declared=shape
            )
            self.outputs[item.target] = output
        declared = attrs.evolve(output.type, shape=output.declared_shape)
        if value.type != output.type and value.type == declared:
            # `output z: f32[N, 3 * B]` takes a [N, 3B] value: its axis splits, as a reshape's
            value = ir.op_reshape(value, output.type.shape)
        if value.type != output.type:
            note = None
            if value.type.dtype != output.type.dtype and not output.type.dtype.is_float:
                note = f"{output.type.dtype.value} values come from `argmax` and `argmin`"
            elif value.type.dtype != output.type.dtype and not value.type.dtype.is_float:
                note = f"declare `{item.target}` {value.type.dtype.value}, as torch returns it"
            raise SpecError(
                f"output `{item.target}` is declared {output.type}, but this value is {value.type}",
                item.value.span,
                note=note,
            )
        self.stored[item.target] = item.span
        self.body.append(ir.Store(item.target, value, item.span))

    # ---- expressions ---------------------------------------------------------------------

    def expr(self, node: s.Expr) -> ir.Expr:
        return getattr(self, "expr_" + type(node).__name__)(node)

    def expr_Number(self, node: s.Number) -> ir.Expr:  # noqa: N802
        return ir.Const(node.value, node.span)

    def expr_Name(self, node: s.Name) -> ir.Expr:  # noqa: N802
        name = node.id
        if name in self.current:  # a state after its assignment: its new value
            return ir.Ref(self.current[name], self.lets[self.current[name]], node.span)
        if name in self.inputs:
            return ir.Ref(name, self.inputs[name].type, node.span)
        if name in self.params:
            param = self.params[name]
            if not param.fixed:
                return ir.Ref(name, ir.SCALAR, node.span)
            if isinstance(param.default, tuple):
                raise SpecError(f"`{name}` is a list of ints, not a number", node.span)
            return ir.Const(float(param.default), node.span)
        if name in self.lets:
            return ir.Ref(name, self.lets[name], node.span)
        if name in self.dims:
            return ir.Const(float(self.dims[name].size), node.span)
        if name in self.outputs:
            raise SpecError(
                f"output `{name}` cannot be read",
                node.span,
                note="bind the value with `let` and use that name instead",
            )
        if name in CONSTANTS:
            return ir.Const(CONSTANTS[name], node.span)
        readable = [*self.inputs, *self.params, *self.lets, *self.dims, *CONSTANTS]
        note = did_you_mean(name, readable).strip() or None
        if name in NAME_ALIASES:
            note = f"did you mean `{NAME_ALIASES[name]}`? (the spec's spelling)"
        raise SpecError(f"unknown name `{name}`", node.span, note=note)

    def expr_Bool(self, node: s.Bool) -> ir.Expr:  # noqa: N802
        raise SpecError("`true`/`false` only go to keyword arguments such as keepdim", node.span)

    def expr_ListExpr(self, node: s.ListExpr) -> ir.Expr:  # noqa: N802
        raise SpecError("a list only goes to a keyword argument such as `axis=[1, 2]`", node.span)

    def expr_Subscript(self, node: s.Subscript) -> ir.Expr:  # noqa: N802
        """`x[a:b, c:]`: a static crop, bounds as in Python (negative from the end, clamped);
        axes past the last slice are kept whole. A step (`x[:, 1::2]`) keeps every step-th
        element of the crop: a window of one element with that stride (`window_max`, size
        1), which the window lowering already handles on any value."""
        value = self.expr(node.value)
        if not isinstance(value.type, ir.TensorType):
            raise SpecError("only a tensor can be sliced", node.value.span)
        shape = value.type.shape
        slices, dropped = [], []
        for axis, cut in enumerate(self.expand_all_axes(node.slices, len(shape))):
            if isinstance(cut, s.Index) and axis < len(shape):  # one position, axis dropped
                position = self.index_position(cut, shape[axis])
                dropped.append(axis)
                cut = s.Slice(position, position + 1, cut.span)
            slices.append(cut if isinstance(cut, s.Index) else self.sized_slice(cut))
        if len(slices) > len(shape):
            raise SpecError(
                f"{len(slices)} slices for a rank-{len(shape)} tensor", node.slices[-1].span
            )
        starts, stops, steps = [], [], {}
        for axis, size in enumerate(shape):
            if axis >= len(slices):
                starts.append(0)
                stops.append(None)
                continue
            cut = slices[axis]
            if cut.step is not None and cut.step != 1:
                steps[axis] = self.slice_step(cut, value.type)
            start, stop, _ = slice(cut.start, cut.stop).indices(size)
            if stop <= start:
                raise SpecError(
                    f"this slice of an axis of {size} is empty",
                    cut.span,
                    note="a slice keeps at least one element",
                )
            starts.append(start)
            stops.append(None if (start, stop) == (0, size) else stop)
        cropped = tuple(
            size if stop is None else stop - start
            for size, start, stop in zip(shape, starts, stops, strict=True)
        )
        if cropped != shape:
            crop = ir.Slice(tuple(starts), tuple(stops))
            value = ir.op("slice", value, span=node.span, attributes=crop)
        if steps:
            axes = tuple(sorted(steps))
            ones = (1,) * len(axes)
            strides = tuple(steps[a] for a in axes)
            every = ir.Window(axes, ones, strides, (0,) * len(axes), ones, False)
            value = ir.op("window_max", value, span=node.span, attributes=every)
        if not dropped:
            return value
        kept = tuple(size for axis, size in enumerate(cropped) if axis not in dropped)
        return ir.op("reshape", value, span=node.span, attributes=ir.Reshape(kept))

    def index_position(self, index: s.Index, extent: int) -> int:
        """`x[i]`'s position along an axis of `extent` (negative from the end)."""
        position = index.index
        if not isinstance(position, int):
            position = self.size_value(position)
        if not -extent <= position < extent:
            raise SpecError(
                f"index {position} is out of range for an axis of {extent}",
                index.span,
                note=f"an index counts from 0 to {extent - 1}, or from -1 back to -{extent}",
            )
        return position % extent

    @staticmethod
    def slice_step(cut: s.Slice, tensor: ir.TensorType) -> int:
        assert cut.step is not None
        if cut.step == 0:
            raise SpecError(
                "a slice step cannot be zero", cut.span, note="a step of 1 keeps every element"
            )
        if cut.step < 0:
            raise SpecError(
                f"a slice step of {cut.step}: steps go forward only",
                cut.span,
                note="a negative step reverses the axis, which PyPTO has no view for",
            )
        if not tensor.dtype.is_float:
            raise SpecError(
                f"a stepped slice of {tensor.dtype.value} values is not supported",
                cut.span,
                note="steps are taken on floating-point tensors (f32, f16, bf16)",
            )
        return cut.step

    @staticmethod
    def expand_all_axes(
        items: tuple[s.Slice | s.AllAxes | s.Index, ...], rank: int
    ) -> list[s.Slice | s.Index]:
        """The slices with `...` replaced by whole slices of the axes the others leave out."""
        marks = [item for item in items if isinstance(item, s.AllAxes)]
        if len(marks) > 1:
            raise SpecError("a subscript takes one `...`", marks[1].span)
        if not marks:
            return list(items)
        at = items.index(marks[0])
        whole = [s.Slice(None, None, marks[0].span)] * max(0, rank - (len(items) - 1))
        return [*items[:at], *whole, *items[at + 1 :]]

    def window(self, node: s.Call) -> ir.Expr:
        """window_max(x, axis=[2, 3], size=2, stride=2, padding=1, dilation=3): torch's
        pooling over any axes. A single value applies to every axis; a list gives one per
        axis, in increasing axis order. stride defaults to size, as in torch."""
        keywords = self.keywords(node, WINDOW_KEYWORDS)
        operand = self.tensor_operand(node)
        if "axis" not in keywords:
            raise SpecError(
                f"`{node.func}` needs `axis=`: the axes its windows slide along",
                node.span,
                note="e.g. `axis=[2, 3]` for the spatial axes of an [N, C, H, W] tensor",
            )
        axis_argument = keywords["axis"]
        axes = self.axes(axis_argument, operand.type.rank, node.func)
        if "size" not in keywords:
            raise SpecError(f"`{node.func}` needs `size=`: the window's length", node.span)
        size = self.per_axis(keywords["size"], axes, None, minimum=1)
        stride = self.per_axis(keywords.get("stride"), axes, size, minimum=1)
        padding = self.per_axis(keywords.get("padding"), axes, (0,) * len(axes), minimum=0)
        dilation = self.per_axis(keywords.get("dilation"), axes, (1,) * len(axes), minimum=1)
        ceil_mode = self.flag(keywords.get("ceil_mode"))
        averages = node.func == "window_mean"
        for k, p, d in zip(size, padding, dilation, strict=True):
            effective = k if averages else d * (k - 1) + 1
            if p > effective // 2:
                raise SpecError(
                    f"padding {p} is more than half the window ({effective} elements)",
                    keywords["padding"].value.span,
                    note="torch's pooling allows padding up to half the (dilated) window",
                )
        if averages and ceil_mode:
            raise SpecError(
                "`window_mean` with `ceil_mode=true` is not supported",
                keywords["ceil_mode"].value.span,
                note="its last windows would average fewer elements; ptodsl averages whole "
                "windows (torch's count_include_pad)",
            )
        attributes = ir.Window(axes, size, stride, padding, dilation, ceil_mode)
        shape = attributes.result_shape(operand.type.shape)
        for axis in axes:
            if shape[axis] < 1:
                raise SpecError(
                    f"no window fits along axis {axis} ({operand.type.shape[axis]} long)",
                    node.span,
                    note="a window longer than its padded axis leaves nothing to reduce",
                )
        return ir.op(node.func, operand, span=node.span, attributes=attributes)

    def conv(self, node: s.Call) -> ir.Expr:
        """conv(x, w, stride=1, padding=0, dilation=1, groups=1): torch's conv1d, conv2d or
        conv3d (by the rank of x: [N, C_in, *spatial]) with w as nn.Conv*d holds it,
        [C_out, C_in / groups, *kernel]. One value applies to every spatial axis; a list
        gives one per axis."""
        transposed = node.func == "conv_transpose"
        keywords = self.keywords(node, CONV_KEYWORDS + (("output_padding",) if transposed else ()))
        form = f"`{node.func}(x, w, stride=1, padding=0, "
        form += "output_padding=0, " if transposed else ""
        form += "dilation=1, groups=1)`"
        if len(node.args) != 2:
            raise SpecError(
                f"`{node.func}` takes an input and a weight, not {len(node.args)} "
                + ("argument" if len(node.args) == 1 else "arguments"),
                node.span,
                note=form,
            )
        x, w = (self.expr(argument) for argument in node.args)
        for value, argument in zip((x, w), node.args, strict=True):
            if not isinstance(value.type, ir.TensorType) or not 3 <= value.type.rank <= 5:
                raise SpecError(
                    f"`{node.func}` takes tensors of rank 3 to 5, not {value.type}",
                    argument.span,
                    note="[N, C, L], [N, C, H, W] or [N, C, D, H, W] and the weight of that rank",
                )
        x, w = as_float(x, ir.DType.F32), as_float(w, ir.DType.F32)
        if isinstance(x, ir.Op) and ops.lookup(x.op).kind is ops.Kind.CONV:
            # a convolution of a convolution (depthwise-separable): the inner one's result
            # is a value of its own, stored as it is computed
            name = ir.generated_name(
                f"convolved{sum(n.startswith('_convolved') for n in self.lets)}"
            )
            self.lets[name] = x.type
            self.body.append(ir.Let(name, x, node.args[0].span))
            x = ir.Ref(name, x.type, node.args[0].span)
        if w.type.rank != x.type.rank:
            raise SpecError(
                f"a weight of rank {w.type.rank} for an input of rank {x.type.rank}",
                node.args[1].span,
                note="nn.Conv*d holds its weight as [C_out, C_in / groups, *kernel]",
            )
        if x.type.dtype != w.type.dtype:
            raise SpecError(
                f"`{node.func}` of {x.type.dtype.value} by {w.type.dtype.value}",
                node.span,
                note="give the input and the weight one dtype",
            )
        spatial = tuple(range(x.type.rank - 2))
        stride = self.per_axis(keywords.get("stride"), spatial, (1,) * len(spatial), minimum=1)
        padding = self.per_axis(keywords.get("padding"), spatial, (0,) * len(spatial), minimum=0)
        dilation = self.per_axis(keywords.get("dilation"), spatial, (1,) * len(spatial), minimum=1)
        groups = self.per_axis(keywords.get("groups"), (0,), (1,), minimum=1)[0]
        channels = x.type.shape[1]
        # the weight: [C_out, C_in / groups, *kernel], transposed [C_in, C_out / groups, ...]
        per_group = w.type.shape[0] if transposed else w.type.shape[1]
        where = keywords["groups"].value.span if "groups" in keywords else node.span
        if channels % groups or (transposed and w.type.shape[0] != channels):
            raise SpecError(
                f"{groups} group{'s' if groups > 1 else ''} of an input with {channels} "
                f"channels, a weight of {list(w.type.shape)}",
                where if channels % groups else node.args[1].span,
                note="the weight is [C_in, C_out / groups, *kernel] (nn.ConvTranspose*d)"
                if transposed
                else "the weight is [C_out, C_in / groups, *kernel] (nn.Conv*d)",
            )
        if not transposed and (per_group * groups != channels or w.type.shape[0] % groups):
            raise SpecError(
                f"the weight convolves {per_group} channels per group into {w.type.shape[0]}, "
                f"the input has {channels} in {groups} group{'s' if groups > 1 else ''}",
                node.args[1].span,
                note=f"the weight is [C_out, C_in / groups = {channels // groups}, *kernel], "
                "C_out a multiple of groups",
            )
        if transposed:
            output_padding = self.per_axis(
                keywords.get("output_padding"), spatial, (0,) * len(spatial), minimum=0
            )
            for extra, s_, d in zip(output_padding, stride, dilation, strict=True):
                if extra >= max(s_, d):
                    raise SpecError(
                        f"output_padding {extra} is not smaller than the stride or the dilation",
                        keywords["output_padding"].value.span,
                        note="torch's rule: it only picks among outputs the stride leaves out",
                    )
            attributes = ir.ConvTranspose(stride, padding, dilation, groups, output_padding)
        else:
            attributes = ir.Conv(stride, padding, dilation, groups)
        shape = attributes.result_shape(x.type.shape, w.type.shape)
        for position, extent in enumerate(shape[2:]):
            if extent < 1:
                raise SpecError(
                    f"the kernel does not fit along spatial axis {position} "
                    f"({x.type.shape[2 + position]} long, padded by {padding[position]})",
                    node.span,
                    note="a dilated kernel longer than the padded axis leaves no output",
                )
        return ir.op(node.func, x, w, span=node.span, attributes=attributes)

    def per_axis(
        self,
        argument: s.Keyword | None,
        axes: tuple[int, ...],
        default: tuple[int, ...] | None,
        minimum: int,
    ) -> tuple[int, ...]:
        """A window keyword's value per axis: one integer for all, or a list of one each."""
        if argument is None:
            assert default is not None
            return default
        items = (
            argument.value.items if isinstance(argument.value, s.ListExpr) else (argument.value,)
        )
        if isinstance(argument.value, s.ListExpr) and len(items) != len(axes):
            raise SpecError(
                f"{argument.name} has {len(items)} values for {len(axes)} axes", argument.value.span
            )
        values = []
        for item in items:
            try:
                value = self.axis_value(item)
            except SpecError:
                raise SpecError(
                    f"{argument.name} is an integer literal or an `int` param", item.span
                ) from None
            if value < minimum:
                raise SpecError(
                    f"{argument.name} must be at least {minimum}, not {value}", item.span
                )
            values.append(value)
        return tuple(values) if len(values) == len(axes) else tuple(values) * len(axes)

    def concat(self, node: s.Call) -> ir.Expr:
        """cat([a, b, ...], axis=k): joined along k, equal elsewhere (no broadcasting, as in
        torch); more than two nest pairwise."""
        keywords = self.keywords(node, ("axis",))
        if len(node.args) != 1 or not isinstance(node.args[0], s.ListExpr):
            raise SpecError("`cat` takes a list of tensors, e.g. `cat([a, b], axis=1)`", node.span)
        items = node.args[0].items
        if len(items) < 2:
            raise SpecError("`cat` joins two or more tensors", node.args[0].span)
        values = [self.expr(item) for item in items]
        for value, item in zip(values, items, strict=True):
            if not isinstance(value.type, ir.TensorType):
                raise SpecError("`cat` joins tensors, not scalars", item.span)
        values = [as_float(v, working_float(values)) for v in values]
        first = values[0].type
        axis = self.one_axis(node, keywords, first.rank)

        def off_axis(shape: tuple[int, ...]) -> tuple[int, ...]:
            return shape[:axis] + shape[axis + 1 :]

        joined = values[0]
        for value, item in zip(values[1:], items[1:], strict=True):
            other = value.type
            if other.rank != first.rank or off_axis(other.shape) != off_axis(joined.type.shape):
                raise SpecError(
                    f"`cat` along axis {axis} joins {joined.type} and {other}: the other axes "
                    "differ",
                    item.span,
                    note="cat does not broadcast: every other axis must match",
                )
            if other.dtype != first.dtype:
                raise SpecError(
                    f"`cat` mixes dtypes {first.dtype.value} and {other.dtype.value}", item.span
                )
            joined = ir.op(CONCAT.name, joined, value, span=node.span, attributes=ir.Along(axis))
        return joined

    def expr_Attribute(self, node: s.Attribute) -> ir.Expr:  # noqa: N802
        if isinstance(node.value, s.Name) and node.value.id in self.modules:
            return self.expr_Name(s.Name(self.module_parameter(node), node.span))
        raise SpecError(
            f"`.{node.attr}` only goes on a matmul operand",
            node.span,
            note="write `a @ b.T` (PyPTO transposes inside its matmul, not on its own)",
        )

    def module_parameter(self, node: s.Attribute) -> str:
        """`fc.weight`: the name the module's parameter is held under."""
        assert isinstance(node.value, s.Name)
        module = self.modules[node.value.id]
        present = self.module_parameters[module.identifier]
        definition = modules.MODULES[module.kind]
        absent = next((p for p in definition.parameters if p.attribute == node.attr), None)
        if node.attr not in present and absent is not None:
            off = dict(module.arguments)
            flags = ", ".join(f"{f}=false" for f in dict.fromkeys(absent.present_if) if not off[f])
            raise SpecError(
                f"{module.kind} `{module.name}` has no `{node.attr}`: it is built with {flags}",
                node.span,
                note=f"drop the `{node.attr}` or build `{module.name}` with it",
            )
        if node.attr not in present:
            raise SpecError(
                f"{module.kind} `{module.name}` has no parameter `{node.attr}`",
                node.span,
                note=did_you_mean(node.attr, present)
                + "its parameters: "
                + (", ".join(f"`{module.name}.{p}`" for p in present) or "none"),
            )
        return present[node.attr]

    def module_call(self, node: s.Call) -> ir.Expr:
        """`fc(x)`: what the module computes, written out (`x @ fc.weight.T + fc.bias`);
        result i of a module returning several (`let out, _ = attn(x, x, x)`)."""
        module = self.modules[node.func]
        definition = modules.MODULES[module.kind]
        self.refuse_result_count(node, module, definition)
        # The call itself, not its place: a block called twice inlines one call of its
        # module twice, on other operands; a time loop's steps each make the same call.
        key = (attrs.evolve(node, result=None), self.step)
        if key not in self.expansions:  # the other results of one call are already written
            self.expansions[key] = self.expansion(node, module, definition)
        value = self.expansions[key]
        return self.expr(value if node.result is None else value[node.result[0]])

    def refuse_result_count(
        self, node: s.Call, module: ir.Module, definition: modules.ModuleDef
    ) -> None:
        """A module's call bound to as many names as it returns values."""
        results = definition.results
        wanted = ", ".join(results)
        if results and node.result is None:
            raise SpecError(
                f"`{module.name}` returns {len(results)} values ({wanted}): bind them with "
                "one `let`",
                node.span,
                note=f"write `let out, _ = {module.name}(...)`; `_` binds nothing",
            )
        if node.result is not None and not results:
            raise SpecError(
                f"`{module.name}` returns one value, not {node.result[1]}",
                node.span,
                note=f"bind it to one name: `let y = {module.name}(...)`",
            )
        if node.result is not None and node.result[1] != len(results):
            raise SpecError(
                f"`{module.name}` returns {len(results)} values ({wanted}), bound to "
                f"{node.result[1]} names",
                node.span,
                note="give one name per value; `_` binds nothing",
            )

    def expansion(
        self, node: s.Call, module: ir.Module, definition: modules.ModuleDef
    ) -> s.Expr | tuple[s.Expr, ...]:
        """What `node` computes as spec syntax (a value per result)."""
        running = bool(definition.present_buffers(dict(module.arguments)))
        takes = definition.operands
        if node.keywords or len(node.args) != len(takes):
            written = f"`{module.name}({', '.join('x' if t == 'input' else t for t in takes)})`"
            count = "one tensor" if len(takes) == 1 else f"{len(takes)} tensors"
            raise SpecError(f"`{module.name}` takes {count}: {written}", node.span)
        parameters = {
            attribute: s.Name(name, node.func_span)
            for attribute, name in self.module_parameters[module.identifier].items()
        }
        arguments = dict(module.arguments)
        operands, logicals = [], []
        for position, given in enumerate(node.args):
            statements = len(self.body)
            operand = self.expr(given)
            if not isinstance(operand.type, ir.TensorType):
                raise SpecError(f"`{module.name}` takes a tensor", given.span)
            logical = operand.type.shape
            shape = (
                modules.channel_view(definition, arguments, logical) if not position else logical
            )
            problem = definition.operand_problem(arguments, shape)
            if problem is not None:
                raise SpecError(
                    f"{module.kind} `{module.name}` cannot take a "
                    f"[{', '.join(map(str, logical))}] tensor: {problem}",
                    given.span,
                    note=f"torch's {definition.torch} refuses it too",
                )
            several = definition.reads_operand_again or len(takes) > 1
            if (several or len(self.body) > statements) and not isinstance(operand, ir.Ref):
                # A norm reads its operand three times (mean, variance, centring), and an
                # operand that bound lets of its own (a linear layer's computed matrix) would
                # bind them again: bound once, so that it is computed once, by one kernel when
                # the spec is cut there.
                given = s.Name(self.hidden_let("operand", operand, given.span), given.span)
            elif isinstance(operand, ir.Ref):
                given = s.Name(operand.name, given.span)
            operands.append(given)
            logicals.append((logical, shape))
        (logical, shape), *others = logicals
        application = modules.Application(
            operands[0],
            shape,
            parameters,
            arguments,
            node.span,
            others=tuple(operands[1:]),
            other_shapes=tuple(shape for _, shape in others),
            bind=lambda value: s.Name(
                self.hidden_let("attention", self.expr(value), node.span), node.span
            ),
        )
        if shape != logical:  # a split channel axis, merged for the module and split back
            merged = application.call("reshape", operands[0], *map(application.literal, shape))
            application = attrs.evolve(application, operand=merged)
        apply = definition.apply
        if running:
            application = self.running_statistics(module, definition, application, node)
            if self.mode is ir.Mode.EVAL:
                apply = definition.eval_apply
        value = apply(application)
        if shape == logical or definition.features is not None:  # its own shape, not split
            return value
        assert isinstance(value, s.Expr), "a module of several results takes no split axis"
        return application.call("reshape", value, *map(application.literal, logical))

    def hidden_let(self, stem: str, value: ir.Expr, span: Span) -> str:
        """`value` bound to a let of ptodsl's own name (`_operand0`, `_matrix1`): its name."""
        count = sum(n.startswith(f"_{stem}") for n in self.lets)
        name = ir.generated_name(f"{stem}{count}")
        self.lets[name] = value.type
        self.body.append(ir.Let(name, value, span))
        return name

    def running_statistics(
        self,
        module: ir.Module,
        definition: modules.ModuleDef,
        application: modules.Application,
        node: s.Call,
    ) -> modules.Application:
        """`bn(x)` of a module with running statistics: the kernel reads them (buffer
        inputs); in training mode it also writes their new values (outputs that update the
        buffers, which forward copies back)."""
        if module.name in self.applied:
            first = self.applied[module.name]
            raise SpecError(
                f"`{module.name}` is applied twice: in training mode each application moves "
                "its running statistics",
                node.span,
                note=f"first applied at line {first.line}; declare a module per application",
            )
        self.applied[module.name] = node.span
        count = modules.statistic_count(definition, application.shape)
        if self.mode is ir.Mode.TRAINING and count < 2:
            raise SpecError(
                f"`{module.name}(x)` in training mode computes each statistic of {count} value",
                node.span,
                note="torch refuses it too: a running variance needs more than one value per "
                "statistic (the unbiased variance divides by n - 1)",
            )
        channels = application.shape[1]
        buffers = {}
        for attribute in ("running_mean", "running_var"):
            # held as a module's parameters are (`bn_weight`), and as clear of spec names
            name = f"{module.identifier}_{attribute}"
            if name in self.declared:
                first = self.declared[name]
                raise SpecError(
                    f"`{module.name}.{attribute}` is held as `{name}`, which is already defined",
                    self.modules[module.identifier].span,
                    note=f"`{name}` is defined at line {first.line}, column {first.column}: "
                    "rename one of them",
                )
            self.declared[name] = node.span
            self.inputs[name] = ir.Input(
                name,
                ir.TensorType((channels,), ir.DType.F32),
                node.span,
                (channels,),
                # a variance is positive: a draw of it must be too
                domain="positive" if attribute == "running_var" else "real",
                init=ir.ModuleBuffer(module.name, attribute),
            )
            buffers[attribute] = s.Name(name, node.span)
        application = attrs.evolve(application, buffers=buffers)
        if self.mode is ir.Mode.EVAL:
            return application
        assert definition.updates is not None, "a module with running statistics updates them"
        for attribute, update in definition.updates(application).items():
            name = ir.generated_name("update", f"{module.identifier}_{attribute}")
            value = self.expr(update)  # [1, C, 1, 1]: the buffer's [C] split
            assert isinstance(value.type, ir.TensorType)
            self.outputs[name] = ir.Output(
                name,
                value.type,
                node.span,
                value.type.shape,
                declared=(channels,),
                splits=(value.type.rank,),
                updates=f"{module.name}.{attribute}",
            )
            self.stored[name] = node.span
            self.body.append(ir.Store(name, value, node.span))
        return application

    def computed_operand(self, operand: ir.Expr, node: s.Expr) -> ir.Ref:
        """A matmul operand computed in the spec (`fc(x * scale)`, attention's `q`), named by
        a `let` of its own unless it is one. A first operand of 2-D the kernel computes in a
        phase of its own; any other is cut into a kernel of its own (the partition), whose
        result the matmul's kernel reads as an input."""
        if not isinstance(operand.type, ir.TensorType) or operand.type.rank not in (2, 3, 4):
            raise SpecError(f"matmul takes 2-D to 4-D tensors, not {operand.type}", node.span)
        if not operand.type.dtype.is_float:
            raise SpecError(f"matmul takes float tensors, not {operand.type}", node.span)
        if isinstance(operand, ir.Ref) and operand.name in self.lets:
            return operand
        name = self.hidden_let("matrix", operand, node.span)
        return ir.Ref(name, operand.type, node.span)

    def split_groups(self, operand: ir.Expr) -> tuple[tuple[int, ...], ...]:
        """A matmul operand's logical sizes per declared axis (one each when not split)."""
        assert isinstance(operand, ir.Ref)
        if operand.name in self.lets:
            return tuple((size,) for size in operand.type.shape)
        return self.inputs[operand.name].declared_groups

    def matmul_operand(self, node: s.Expr) -> tuple[ir.Expr, bool]:
        """An operand, and whether it is transposed (`.T` of a matrix, or its last two axes
        exchanged, `k.transpose(-2, -1)`): PyPTO's matmul reads operands in their own layout
        and transposes on the fly (a_trans / b_trans). An input or weight is read as
        declared; a computed value as its kernel writes it."""
        transposed = isinstance(node, s.Attribute)
        if transposed and node.attr != "T":
            raise SpecError(f"unknown attribute `.{node.attr}`; only `.T` exists", node.span)
        if isinstance(node, s.Call) and node.func == "transpose" and node.args:
            # `k.transpose(-2, -1)`: read transposed; other axes: a transpose of its own
            operand = self.expr(node.args[0])
            transposed = self.exchanges_last_axes(node, operand)
            if not transposed:
                operand = self.reorder(operand, node)
        else:
            operand = self.expr(node.value if transposed else node)
        if not (isinstance(operand, ir.Ref) and operand.name in self.inputs):
            self.refuse_transposed_batches(node, operand, transposed)
            return self.computed_operand(operand, node), transposed
        groups = self.split_groups(operand)
        if any(len(group) != 1 for group in groups):
            # the cube reads the declared layout; the product's split axes follow (below)
            declared = ir.TensorType(tuple(map(math.prod, groups)), operand.type.dtype)
            if declared.rank != 2:
                raise SpecError("a split axis goes on a 2-D matmul operand only", node.span)
            operand = ir.op(
                "reshape", operand, span=node.span, attributes=ir.Reshape(declared.shape)
            )
        if operand.type.rank not in (2, 3, 4):
            raise SpecError(f"matmul takes 2-D to 4-D tensors, not {operand.type}", node.span)
        if not operand.type.dtype.is_float:
            raise SpecError(
                f"matmul takes float tensors, not {operand.type}",
                node.span,
                note="the cube multiplies f32, f16 or bf16 values",
            )
        self.refuse_transposed_batches(node, operand, transposed)
        return operand, transposed

    @staticmethod
    def refuse_transposed_batches(node: s.Expr, operand: ir.Expr, transposed: bool) -> None:
        if transposed and isinstance(node, s.Attribute) and operand.type.rank != 2:
            raise SpecError(
                "`.T` transposes 2-D tensors only",
                node.span,
                note="`x.transpose(-2, -1)` exchanges the last two axes of any rank",
            )

    def exchanges_last_axes(self, node: s.Call, operand: ir.Expr) -> bool:
        """Whether `operand.transpose(a, b)` exchanges its last two axes (as a matmul
        operand: read transposed)."""
        if node.keywords or len(node.args) != 3 or not isinstance(operand.type, ir.TensorType):
            return False
        rank = operand.type.rank
        axes = {self.signed_axis(axis, rank) for axis in node.args[1:]}
        return rank >= 2 and axes == {rank - 2, rank - 1}

    def matmul(self, node: s.Binary) -> ir.Expr:
        a, a_trans = self.matmul_operand(node.lhs)
        b, b_trans = self.matmul_operand(node.rhs)
        a_shape, b_shape = a.type.shape, b.type.shape
        if a_trans:
            a_shape = ir.swap_last(a_shape)
        if b_trans:
            b_shape = ir.swap_last(b_shape)
        # [..., M, K] @ [K, N] is one matmul of A's rows, its leading axes merged (merge_axes).
        by_matrix = len(b_shape) == 2 and not a_trans
        if not by_matrix and (len(a_shape) != len(b_shape) or a_shape[:-2] != b_shape[:-2]):
            raise SpecError(
                f"matmul batch shapes differ: {a.type} and {b.type}",
                node.span,
                note="a batched matmul takes [..., M, K] @ [..., K, N] of the same leading "
                "axes; a tensor of any rank up to 4 multiplies a [K, N] matrix",
            )
        if a_shape[-1] != b_shape[-2]:
            raise SpecError(
                f"matmul contracts {a_shape[-1]} with {b_shape[-2]}: {list(a_shape)} @ "
                f"{list(b_shape)}",
                node.span,
            )
        if a.type.dtype != b.type.dtype:
            raise SpecError(
                f"`matmul` mixes dtypes {a.type.dtype.value} and {b.type.dtype.value}", node.span
            )
        product = ir.op("matmul", a, b, span=node.span, attributes=ir.Transposes(a_trans, b_trans))
        if not any(isinstance(o, ir.Op) for o in (a, b)):
            return product
        # split axes of the operands split the product's rows or columns alike
        a_groups = self.split_groups(a.operands[0] if isinstance(a, ir.Op) else a)
        b_groups = self.split_groups(b.operands[0] if isinstance(b, ir.Op) else b)
        rows = a_groups[1 if a_trans else 0] if len(a_groups) == 2 else (a_shape[-2],)
        columns = b_groups[0 if b_trans else 1] if len(b_groups) == 2 else (b_shape[-1],)
        # a split contracted axis is contracted whole: the cube reads the declared layout
        logical = ir.TensorType((*a_shape[:-2], *rows, *columns), a.type.dtype)
        return ir.op("reshape", product, span=node.span, attributes=ir.Reshape(logical.shape))

    def expr_Unary(self, node: s.Unary) -> ir.Expr:  # noqa: N802
        operand = self.expr(node.operand)
        return ir.op("neg", operand, span=node.span)

    def expr_Binary(self, node: s.Binary) -> ir.Expr:  # noqa: N802
        if node.op == "matmul":
            return self.matmul(node)
        lhs, rhs = self.expr(node.lhs), self.expr(node.rhs)
        if node.op == "pow":
            return self.power(lhs, rhs, node.span, node.rhs.span)
        return self.elementwise(node.op, (lhs, rhs), node.span)

    def expr_Compare(self, node: s.Compare) -> ir.Expr:  # noqa: N802
        raise SpecError(
            "a comparison only goes as the first argument of `where(cond, a, b)`", node.span
        )

    def expr_Call(self, node: s.Call) -> ir.Expr:  # noqa: N802
        name = node.func
        module = name in self.modules and not node.builtin
        if module and node.method:
            raise SpecError(f"`{name}` is a module: call it as `{name}(x)`", node.func_span)
        if module:
            return self.module_call(node)
        if node.result is not None:
            raise SpecError(
                f"`{name}` returns one value, not {node.result[1]}",
                node.span,
                note="a `let` of several names takes a split or a module's call of several "
                "results (`let out, _ = attn(x, x, x)`)",
            )
        if name in RESHAPES:
            return self.reshape(node)
        if name in REDUCTIONS or (name in EXTREMA and self.is_reduction(node)):
            return self.reduction(node)
        if name in AXIS_FUNCTIONS:
            return self.axis_function(node)
        if name in MASKS:
            return self.triangle(node)
        if name in ARG_REDUCTIONS:
            return self.arg_reduction(node)
        if name == INDEX.spec:
            return self.index(node)
        if name == FLIP.spec:
            return self.flip(node)
        if name in WINDOWS:
            return self.window(node)
        if name == CONCAT.spec:
            return self.concat(node)
        if name in CONVS:
            return self.conv(node)
        if name == "batchmean":
            (operand,) = self.positional(node, 1)
            return self.batchmean(operand, node.span)
        if name == "where":
            return self.where(node)
        if name == "masked_fill":
            return self.masked_fill(node)
        if name == "split":
            return self.split_part(node)
        if name in AXIS_ORDERS:
            return self.axis_order(node)
        if name == "dropout":
            return self.dropout(node)
        if name == "clamp":
            return self.clamp(node)
        if name == "cast":
            return self.widen(node)
        if name in UNARY_FUNCTIONS:
            (operand,) = self.positional(node, 1)
            return self.elementwise(name, (operand,), node.span)
        if name in BINARY_FUNCTIONS:
            lhs, rhs = self.positional(node, 2)
            if name == "pow":
                return self.power(lhs, rhs, node.span, node.args[1].span)
            return self.elementwise(BINARY_FUNCTIONS[name], (lhs, rhs), node.span)
        known = builtin_functions()
        if name in SPELLED_OUT:
            raise SpecError(
                f"no builtin `{name}`",
                node.func_span,
                note=f"write it out, e.g. `{SPELLED_OUT[name]}`" + cookbook_note(name),
            )
        if name in MODE_DEPENDENT:
            raise SpecError(
                f"no builtin `{name}`: its result depends on train or eval mode",
                node.func_span,
                note=MODE_DEPENDENT[name] + cookbook_note(name),
            )
        if name in WRITTEN_OTHERWISE:
            raise SpecError(
                f"no builtin `{name}`",
                node.func_span,
                note=WRITTEN_OTHERWISE[name] + cookbook_note(name),
            )
        raise SpecError(
            f"unknown function `{name}`",
            node.func_span,
            note=did_you_mean(name, known) + "known: " + ", ".join(known),
        )

    def reshape(self, node: s.Call) -> ir.Expr:
        """`h.reshape(B, G, CG)`, `reshape(h, [B, G, C / G])`: the same elements in
        row-major order with axes split or merged (torch's reshape and view; one size may
        be -1). The passes split the axes of everything the value is computed from or
        feeds instead, so the kernel never moves data for it."""
        if node.keywords:
            raise SpecError(f"`{node.func}` takes no keyword `{node.keywords[0].name}`", node.span)
        if not node.args:
            raise SpecError(f"`{node.func}` needs a tensor and its new shape", node.span)
        operand = self.expr(node.args[0])
        if not isinstance(operand.type, ir.TensorType):
            raise SpecError(f"`{node.func}` takes a tensor, not a scalar", node.args[0].span)
        size_nodes = node.args[1:]
        if len(size_nodes) == 1 and isinstance(size_nodes[0], s.ListExpr):
            size_nodes = size_nodes[0].items
        if not size_nodes:
            raise SpecError(
                f"`{node.func}` needs the new shape",
                node.span,
                note=f"e.g. `h.{node.func}(B, G, C / G)`: sizes are dims, integers, products "
                "and quotients of those, and one -1",
            )
        expected = (
            "a size is an integer, a dim, an `int` param, a product or quotient of those, or -1"
        )
        sizes = [-1 if _is_minus_one(n) else self.fixed_int(n, expected) for n in size_nodes]
        elements = math.prod(operand.type.shape)
        if sizes.count(-1) > 1:
            second = [n for n in size_nodes if _is_minus_one(n)][1]
            raise SpecError(f"only one size of a `{node.func}` can be -1", second.span)
        known = math.prod(size for size in sizes if size != -1)
        if -1 in sizes and known and elements % known == 0:
            sizes[sizes.index(-1)] = elements // known
        shape = tuple(sizes)
        if -1 in shape or math.prod(shape) != elements:
            raise SpecError(
                f"cannot {node.func} {operand.type} ({elements} elements) to {list(shape)}",
                node.span,
            )
        for old, new in ir.regroup(operand.type.shape, shape):
            if len(old) > 1 and len(new) > 1:
                sizes_before = [operand.type.shape[axis] for axis in old]
                sizes_after = [shape[axis] for axis in new]
                raise SpecError(
                    f"`{node.func}` of {operand.type} to {list(shape)} regroups axes of sizes "
                    f"{sizes_before} into {sizes_after}",
                    node.span,
                    note="a reshape splits axes or merges adjacent ones, keeping the "
                    "elements' row-major order; one that reorders them is not supported",
                )
        return ir.op("reshape", operand, span=node.span, attributes=ir.Reshape(shape))

    def widen(self, node: s.Call) -> ir.Expr:
        """`cast(x, f32)`: a half-precision tensor's values as f32, exactly (f16 inputs, f32
        accumulation). Only widening: a narrowing cast rounds, which the check's error
        bounds would have to charge."""
        if len(node.args) != 2 or node.keywords:
            raise SpecError("`cast` takes a tensor and a dtype: `cast(x, f32)`", node.span)
        operand, target = node.args
        if not isinstance(target, s.Name):
            raise SpecError("`cast`'s second argument is a dtype, such as `f32`", target.span)
        dtype = _dtype(target.id, target.span)
        value = self.expr(operand)
        if not isinstance(value.type, ir.TensorType):
            raise SpecError("`cast` takes a tensor", operand.span)
        source = value.type.dtype
        if source == dtype:
            return value
        if not (source in HALF_PRECISION and dtype == ir.DType.F32):
            raise SpecError(
                f"cast from {source.value} to {dtype.value} is not supported",
                node.span,
                note="ptodsl casts f16 and bf16 up to f32 only (a narrowing cast rounds)",
            )
        return ir.cast(value, dtype)

    def keywords(self, node: s.Call, allowed: tuple[str, ...]) -> dict[str, s.Keyword]:
        found = {}
        for argument in node.keywords:
            name = argument.name
            if name in found:
                raise SpecError(f"keyword `{name}` given twice to `{node.func}`", argument.span)
            if name not in allowed:
                raise SpecError(
                    f"unexpected keyword `{name}` for `{node.func}`",
                    argument.span,
                    note=_keyword_note(name, allowed),
                )
            found[name] = argument
        return found

    def axes(self, argument: s.Keyword | None, rank: int, func: str) -> tuple[int, ...]:
        """`axis=1`, `axis=-1` or `axis=[0, 2]` as sorted non-negative axes; none: all."""
        if argument is None:
            return tuple(range(rank))
        items = (
            argument.value.items if isinstance(argument.value, s.ListExpr) else (argument.value,)
        )
        axes = []
        for item in items:
            value = item.operand if isinstance(item, s.Unary) else item
            axis = self.axis_value(value) * (-1 if isinstance(item, s.Unary) else 1)
            if not -rank <= axis < rank:
                raise SpecError(f"axis {axis} is out of range for a rank-{rank} tensor", item.span)
            if axis % rank in axes:
                note = (
                    f"axis {axis} is axis {axis % rank} of a rank-{rank} tensor"
                    if axis < 0
                    else None
                )
                raise SpecError(f"axis {axis} is repeated", item.span, note=note)
            axes.append(axis % rank)
        if not axes:
            raise SpecError(f"`{func}` needs at least one axis", argument.span)
        return tuple(sorted(axes))

    def axis_value(self, node: s.Expr) -> int:
        """An integer literal, or an `int` param (KernelBench's `dim` construction argument)."""
        if isinstance(node, s.Name) and node.id in self.params:
            param = self.params[node.id]
            if param.fixed and isinstance(param.default, int):
                return param.default
        if isinstance(node, s.Number) and node.value.is_integer() and "." not in node.text:
            return int(node.value)
        raise SpecError("an axis is an integer literal or an `int` param", node.span)

    def flag(self, argument: s.Keyword | None) -> bool:
        """A keyword that is `true` or `false` (keepdim, reverse, ...); absent: false."""
        if argument is None:
            return False
        if not isinstance(argument.value, s.Bool):
            value = argument.value
            spelled = NAME_ALIASES.get(value.id) if isinstance(value, s.Name) else None
            note = f"did you mean `{spelled}`? (the spec's spelling)" if spelled else None
            raise SpecError(f"{argument.name} is `true` or `false`", value.span, note=note)
        return argument.value.value

    def tensor_operand(self, node: s.Call) -> ir.Expr:
        if len(node.args) != 1:
            raise SpecError(
                f"`{node.func}` takes one tensor and keywords, not {len(node.args)} arguments",
                node.span,
            )
        operand = self.expr(node.args[0])
        if not isinstance(operand.type, ir.TensorType):
            raise SpecError(f"`{node.func}` takes a tensor, not a scalar", node.args[0].span)
        return as_float(operand, ir.DType.F32)

    def reduction(self, node: s.Call) -> ir.Expr:
        allowed = ("axis", "keepdim", "correction") if node.func == "var" else ("axis", "keepdim")
        keywords = self.keywords(node, allowed)
        operand = self.tensor_operand(node)
        tensor_type = operand.type
        axes = self.axes(keywords.get("axis"), tensor_type.rank, node.func)
        keepdim = self.flag(keywords.get("keepdim"))
        if node.func == "prod" and len(axes) != 1:
            raise SpecError(
                "`prod` takes one axis, e.g. `axis=1`",
                keywords["axis"].value.span if "axis" in keywords else node.span,
                note="as torch.prod with `dim`; nest prods for more axes",
            )
        attributes = ir.Reduce(axes, keepdim)
        if node.func == "var":
            correction = self.correction(keywords.get("correction"))
            if math.prod(tensor_type.shape[a] for a in axes) <= correction:
                raise SpecError(
                    "the unbiased `var` of one element divides by zero",
                    node.span,
                    note="reduce over more elements, or write `correction=0`",
                )
            attributes = ir.Variance(axes, keepdim, correction)
        op = REDUCTIONS.get(node.func) or EXTREMA[node.func]
        return ir.op(op, operand, span=node.span, attributes=attributes)

    def index(self, node: s.Call) -> ir.Expr:
        """index(x, axis=a): each position's index along x's axis a, as f32, shaped
        [1, .., n, .., 1] to broadcast against x (a one-hot compare: `index(p, axis=1) == t`)."""
        keywords = self.keywords(node, ("axis",))
        operand = self.tensor_operand(node)
        axis = self.position_axis(node, keywords, operand)
        return ir.op(INDEX.name, operand, span=node.span, attributes=ir.Along(axis))

    def flip(self, node: s.Call) -> ir.Expr:
        """flip(x, axis=a) or axis=[a, b]: the positions along each axis in reverse order, as
        torch.flip; several axes flip one after another."""
        keywords = self.keywords(node, ("axis",))
        operand = self.tensor_operand(node)
        if "axis" not in keywords:
            raise SpecError(
                "`flip` needs `axis=`",
                node.span,
                note="name the axes to reverse, as torch.flip's dims: `flip(x, axis=1)` or "
                "`flip(x, axis=[0, 1])`",
            )
        flipped = operand
        for axis in self.axes(keywords["axis"], operand.type.rank, node.func):
            flipped = ir.op(FLIP.name, flipped, span=node.span, attributes=ir.Along(axis))
        return flipped

    def arg_reduction(self, node: s.Call) -> ir.Expr:
        """argmax / argmin along one axis, as torch with `dim` given: int64 positions."""
        keywords = self.keywords(node, ("axis", "keepdim"))
        operand = self.tensor_operand(node)
        note = (
            "torch's argmax without dim indexes the flattened tensor; ptodsl takes the "
            "positions along one axis"
        )
        axis = self.position_axis(node, keywords, operand, note)
        keepdim = self.flag(keywords.get("keepdim"))
        attributes = ir.Reduce((axis,), keepdim)
        return ir.op(node.func, operand, span=node.span, attributes=attributes)

    def one_axis(
        self, node: s.Call, keywords: dict[str, s.Keyword], rank: int, note: str | None = None
    ) -> int:
        """The single axis `axis=` names, which the function requires."""
        if "axis" not in keywords:
            raise SpecError(f"`{node.func}` needs `axis=`", node.span, note=note)
        axes = self.axes(keywords["axis"], rank, node.func)
        if len(axes) != 1:
            raise SpecError(f"`{node.func}` takes one axis", keywords["axis"].value.span)
        return axes[0]

    def position_axis(
        self,
        node: s.Call,
        keywords: dict[str, s.Keyword],
        operand: ir.Expr,
        note: str | None = None,
    ) -> int:
        """The one axis positions are counted along, short enough to count exactly in f32."""
        axis = self.one_axis(node, keywords, operand.type.rank, note)
        if operand.type.shape[axis] > MAX_EXACT_INTEGER:
            raise SpecError(
                f"`{node.func}` over {operand.type.shape[axis]} positions",
                node.span,
                note=f"positions are counted in f32: at most {MAX_EXACT_INTEGER}",
            )
        return axis

    def correction(self, argument: s.Keyword | None) -> int:
        """Bessel's correction of `var`: 1 (unbiased) unless given, as in torch.var."""
        if argument is None:
            return 1
        value = argument.value
        if not (
            isinstance(value, s.Number) and value.value in (0.0, 1.0) and "." not in value.text
        ):
            raise SpecError("correction is 0 (biased) or 1 (unbiased)", value.span)
        return int(value.value)

    def axis_function(self, node: s.Call) -> ir.Expr:
        allowed = ("axis",)
        if node.func == "logsumexp":
            allowed = ("axis", "keepdim")
        elif node.func in SCANS:
            allowed = ("axis", "reverse", "exclusive")
        keywords = self.keywords(node, allowed)
        operand = self.tensor_operand(node)
        axis = self.one_axis(node, keywords, operand.type.rank)
        attributes = ir.Along(axis)
        if node.func == "logsumexp":
            attributes = ir.AlongKeep(axis, self.flag(keywords.get("keepdim")))
        elif node.func in SCANS:
            reverse, exclusive = (self.flag(keywords.get(k)) for k in ("reverse", "exclusive"))
            attributes = ir.Scan(axis, reverse, exclusive)
        return ir.op(node.func, operand, span=node.span, attributes=attributes)

    def triangle(self, node: s.Call) -> ir.Expr:
        """triu(x, diagonal=k) / tril(x, diagonal=k) over the last two axes, as in torch."""
        keywords = self.keywords(node, ("diagonal",))
        operand = self.tensor_operand(node)
        if operand.type.rank < 2:
            raise SpecError(
                f"`{node.func}` keeps part of a matrix: it needs 2 or more axes, not "
                f"{operand.type}",
                node.args[0].span,
            )
        diagonal = 0
        if "diagonal" in keywords:
            value = keywords["diagonal"].value
            literal = value.operand if isinstance(value, s.Unary) else value
            if not isinstance(literal, s.Number) or literal.value != int(literal.value):
                raise SpecError("diagonal is an integer literal, e.g. `diagonal=-1`", value.span)
            diagonal = int(literal.value) * (-1 if isinstance(value, s.Unary) else 1)
        return ir.op(node.func, operand, span=node.span, attributes=ir.Triangle(diagonal))

    def batchmean(self, operand: ir.Expr, span: Span) -> ir.Expr:
        """sum over every axis divided by the leading dim (torch's reduction="batchmean")."""
        if not isinstance(operand.type, ir.TensorType) or operand.type.rank == 0:
            raise SpecError("`batchmean` needs a tensor with a leading (batch) axis", span)
        tensor_type = operand.type
        attributes = ir.Reduce(tuple(range(tensor_type.rank)), keepdim=False)
        return ir.op("batchmean", operand, span=span, attributes=attributes)

    @staticmethod
    def is_reduction(node: s.Call) -> bool:
        return len(node.args) == 1 or any(k.name in ("axis", "keepdim") for k in node.keywords)

    def positional(self, node: s.Call, count: int) -> list[ir.Expr]:
        if node.keywords:
            keyword = node.keywords[0]
            raise SpecError(f"`{node.func}` takes no keyword `{keyword.name}`", keyword.span)
        if len(node.args) != count:
            plural = "s" if count != 1 else ""
            raise SpecError(
                f"`{node.func}` takes {count} argument{plural}, not {len(node.args)}", node.span
            )
        return [self.expr(arg) for arg in node.args]

    def power(self, base: ir.Expr, exponent: ir.Expr, span: Span, exponent_span: Span) -> ir.Expr:
        if not ir.is_scalar(exponent):
            raise SpecError(
                "the exponent must be a constant or a param, not a tensor", exponent_span
            )
        return self.elementwise("pow", (base, exponent), span)

    def dropout(self, node: s.Call) -> ir.Expr:
        """`dropout(x, p)` (torch's `F.dropout(x, p, training=self.training)`): the identity
        in eval mode; in training mode `x` times a mask forward draws from torch's
        generator (an input of the kernel). `p` is a number or a float param."""
        given = self.keywords(node, ("p",))
        arguments = [*node.args, *(k.value for k in given.values())]
        if len(arguments) != 2:
            raise SpecError("`dropout` takes a tensor and p: `dropout(x, 0.5)`", node.span)
        operand, rate = self.expr(arguments[0]), arguments[1]
        if not isinstance(operand.type, ir.TensorType) or not operand.type.dtype.is_float:
            raise SpecError("`dropout` takes a float tensor", arguments[0].span)
        if isinstance(rate, s.Number):
            p: float | str = rate.value
            if not 0.0 <= rate.value <= 1.0:
                raise SpecError(
                    f"dropout probability {rate.text} is not in [0, 1]",
                    rate.span,
                    note="torch refuses it too",
                )
            if rate.value == 0.0:  # torch returns x and draws nothing
                return operand
        elif isinstance(rate, s.Name) and self.float_param(rate) is not None:
            p = rate.id
        else:
            raise SpecError(
                "dropout's p is a number or a float param of the constructor",
                rate.span,
                note="declare `param p: f32 = 0.5` for a p the constructor takes",
            )
        if self.mode is ir.Mode.EVAL:
            self.dropouts += 1
            return operand
        name = ir.generated_name(f"mask{self.dropouts}")
        self.dropouts += 1
        shape = operand.type.shape
        self.inputs[name] = ir.Input(
            name,
            ir.TensorType(shape, operand.type.dtype),
            node.span,
            shape,
            init=ir.DropoutMask(p),
        )
        mask = ir.Ref(name, self.inputs[name].type, node.span)
        return self.elementwise("mul", (operand, mask), node.span)

    def clamp(self, node: s.Call) -> ir.Expr:
        if not node.args:
            raise SpecError("`clamp` needs the value to clamp", node.span)
        bounds: dict[str, ir.Expr] = {}
        for name, arg in zip(("min", "max"), node.args[1:3], strict=False):
            bounds[name] = self.expr(arg)
        if len(node.args) > 3:
            raise SpecError("`clamp` takes a value, min and max", node.args[3].span)
        for bound in node.keywords:
            if bound.name not in ("min", "max") or bound.name in bounds:
                raise SpecError(f"unexpected keyword `{bound.name}` for `clamp`", bound.span)
            bounds[bound.name] = self.expr(bound.value)
        if not bounds:
            raise SpecError("`clamp` needs `min`, `max` or both", node.span)
        value = self.expr(node.args[0])
        for bound in bounds.values():
            if not ir.is_scalar(bound):
                raise SpecError("clamp bounds must be constants or params", bound.span)
        if len(bounds) == 2:
            operands = (value, bounds["min"], bounds["max"])
            return self.elementwise("clamp", operands, node.span)
        if "min" in bounds:
            return self.elementwise("maximum", (value, bounds["min"]), node.span)
        return self.elementwise("minimum", (value, bounds["max"]), node.span)

    def masked_fill(self, node: s.Call) -> ir.Expr:
        """`x.masked_fill(mask, value)`: torch's, `where(mask, value, x)`."""
        if len(node.args) != 3 or node.keywords:
            raise SpecError(
                "`masked_fill` takes a tensor, a condition and a value: "
                "`att.masked_fill(mask == 0, -inf)`",
                node.span,
            )
        value, condition, fill = node.args
        return self.where(attrs.evolve(node, func="where", args=(condition, fill, value)))

    def split_part(self, node: s.Call) -> ir.Expr:
        """Chunk `part` of `parts` of a `let a, b = x.split(size, axis=k)` (the parser's
        call): torch's chunks of `size` along the axis, the last one shorter when the axis
        is not a multiple; there must be a name per chunk."""
        if not node.builtin:
            raise SpecError(
                "`split` gives several tensors: bind them with one `let`",
                node.span,
                note="write `let a, b = x.split(size, axis=k)`, a name per chunk",
            )
        keywords = self.keywords(node, ("axis", "part", "parts"))
        if len(node.args) != 2:
            raise SpecError("`split` takes the size of its chunks: `x.split(C, axis=2)`", node.span)
        value = self.expr(node.args[0])
        if not isinstance(value.type, ir.TensorType):
            raise SpecError("`split` takes a tensor, not a scalar", node.args[0].span)
        size = self.fixed_int(node.args[1], "a chunk's size is an integer, a dim or an `int` param")
        if size < 1:
            raise SpecError(f"chunks of {size} elements: a chunk holds at least one", node.span)
        rank = value.type.rank
        axis = self.signed_axis(keywords["axis"].value, rank) if "axis" in keywords else 0
        part = int(self.axis_value(keywords["part"].value))
        parts = int(self.axis_value(keywords["parts"].value))
        extent = value.type.shape[axis]
        chunks = -(-extent // size)
        if chunks != parts:
            raise SpecError(
                f"`split` of an axis of {extent} into chunks of {size} gives {chunks} "
                f"tensor{'s' if chunks != 1 else ''}, bound to {parts} names",
                node.span,
                note=self.split_declaration_note(value) or "give one name per chunk",
            )
        start, stop = part * size, min(extent, (part + 1) * size)
        starts = tuple(start if a == axis else 0 for a in range(rank))
        stops = tuple(stop if a == axis else None for a in range(rank))
        crop = ir.Slice(starts, stops)
        return ir.op("slice", value, span=node.span, attributes=crop)

    def split_declaration_note(self, value: ir.Expr) -> str | None:
        """Why a chunk count may surprise: the value reads (through lets) a tensor declared
        with a product axis, an LSTM's `f32[4 * H, I]`, which counts as several axes."""
        lets = {stmt.name: stmt.value for stmt in self.body if isinstance(stmt, ir.Let)}
        pending, seen = [value], set()
        while pending:
            for node in ir.walk(pending.pop()):
                if not isinstance(node, ir.Ref) or node.name in seen:
                    continue
                seen.add(node.name)
                if node.name in lets:
                    pending.append(lets[node.name])
                tensor = self.inputs.get(node.name)
                if tensor is None or max(tensor.splits or (1,)) < 2:
                    continue
                entry = tensor.splits.index(max(tensor.splits))
                first = sum(tensor.splits[:entry])
                factors = tensor.type.shape[first : first + tensor.splits[entry]]
                product = " * ".join(map(str, tensor.dims[first : first + len(factors)]))
                return (
                    f"`{node.name}`'s declared axis `{product}` is a product, so it counts as "
                    f"{len(factors)} axes ({', '.join(map(str, factors))}) and later axes count "
                    f"from there; declare `({product})` for one axis of {math.prod(factors)}"
                )
        return None

    def axis_order(self, node: s.Call) -> ir.Expr:
        """`x.transpose(1, 2)` (two axes exchanged), `x.permute(2, 0, 1)` (the axes in a new
        order), `x.contiguous()` (the value itself: every value is contiguous here). A
        permutation is a chain of exchanges; PyPTO moves the data (`pypto.transpose`), in a
        kernel of its own (the partition cuts around it)."""
        if not node.args:
            raise SpecError(f"`{node.func}` takes a tensor", node.span)
        return self.reorder(self.expr(node.args[0]), node)

    def reorder(self, value: ir.Expr, node: s.Call) -> ir.Expr:
        """`value` (node's first argument, checked) with its axes in node's order."""
        if node.keywords:
            keyword = node.keywords[0]
            raise SpecError(f"`{node.func}` takes no keyword `{keyword.name}`", keyword.span)
        if not isinstance(value.type, ir.TensorType):
            raise SpecError(f"`{node.func}` takes a tensor, not a scalar", node.args[0].span)
        rank = value.type.rank
        given = node.args[1:]
        if node.func == "contiguous":
            if given:
                raise SpecError("`contiguous` takes no axes", given[0].span)
            return value
        if node.func == "transpose" and len(given) != 2:
            raise SpecError(
                "`transpose` exchanges two axes: `x.transpose(1, 2)`",
                node.span,
                note="`x.permute(...)` puts every axis in a new order",
            )
        order = [self.signed_axis(axis, rank) for axis in given]
        if node.func == "transpose":
            first, second = order
            order = list(range(rank))
            order[first], order[second] = second, first
        if sorted(order) != list(range(rank)):
            raise SpecError(
                f"`permute` of a rank-{rank} tensor takes each of its {rank} axes once, "
                f"not {order}",
                node.span,
                note="name the axes in their new order, e.g. `x.permute(2, 0, 1)`",
            )
        # exchanges that bring each position its axis, first to last
        current = list(range(rank))
        for position, axis in enumerate(order):
            source = current.index(axis)
            if source == position:
                continue
            value = ir.op("swap", value, span=node.span, attributes=ir.Swap(position, source))
            current[position], current[source] = current[source], current[position]
        return value

    def signed_axis(self, node: s.Expr, rank: int) -> int:
        """An axis written as torch writes it: from 0, or negative from the end."""
        negative = isinstance(node, s.Unary)
        axis = self.axis_value(node.operand if negative else node) * (-1 if negative else 1)
        if not -rank <= axis < rank:
            raise SpecError(f"axis {axis} is out of range for a rank-{rank} tensor", node.span)
        return axis % rank

    def where(self, node: s.Call) -> ir.Expr:
        if len(node.args) != 3 or node.keywords:
            raise SpecError("`where` takes (condition, value_if_true, value_if_false)", node.span)
        condition = node.args[0]
        if isinstance(condition, s.Compare):
            lhs, rhs = self.expr(condition.lhs), self.expr(condition.rhs)
            compare = self.elementwise(condition.op, (lhs, rhs), condition.span)
            if ir.is_scalar(compare):
                raise SpecError("the condition of `where` must compare a tensor", condition.span)
            if_true, if_false = self.expr(node.args[1]), self.expr(node.args[2])
        else:
            mask = self.expr(condition)
            if not (isinstance(mask.type, ir.TensorType) and mask.type.dtype is ir.DType.BOOL):
                raise SpecError(
                    "the condition of `where` must be a comparison or a bool tensor",
                    condition.span,
                )
            if_true, if_false = self.expr(node.args[1]), self.expr(node.args[2])
            # the mask as 0/1 in the branches' float dtype, compared with 0
            mask = as_float(mask, working_float([if_true, if_false]))
            compare = self.elementwise("ne", (mask, ir.Const(0.0, condition.span)), mask.span)
        return self.elementwise("where", (compare, if_true, if_false), node.span)

    def elementwise(self, op: str, operands: tuple[ir.Expr, ...], span: Span) -> ir.Expr:
        if all(ir.is_scalar(o) for o in operands):
            return ir.op(op, *operands, span=span)
        promoted = working_float(operands)
        operands = tuple(as_float(o, promoted) for o in operands)
        tensors = [o for o in operands if isinstance(o.type, ir.TensorType)]
        dtypes = {t.type.dtype for t in tensors}
        if len(dtypes) > 1:
            names = " and ".join(sorted(d.value for d in dtypes))
            raise SpecError(f"`{op}` mixes dtypes {names}", span)
        shape = tensors[0].type.shape
        for tensor in tensors[1:]:
            merged = ir.broadcast_shapes(shape, tensor.type.shape)
            if merged is None:
                shapes = " and ".join(str(t.type) for t in tensors)
                raise SpecError(f"shapes {shapes} do not broadcast", span)
            shape = merged
        return ir.op(op, *operands, span=span)


def working_float(values: list[ir.Expr] | tuple[ir.Expr, ...]) -> ir.DType:
    """The float dtype integers and bools among `values` compute in: the first float
    tensor's (torch: a bool mask times an f16 tensor is f16), f32 when there is none."""
    floats = [
        v.type.dtype for v in values if isinstance(v.type, ir.TensorType) and v.type.dtype.is_float
    ]
    return floats[0] if floats else ir.DType.F32


def as_float(value: ir.Expr, dtype: ir.DType) -> ir.Expr:
    """An integer or bool tensor converted to `dtype` (exact: typecheck keeps integers below
    2^24); anything else as it is."""
    if not isinstance(value.type, ir.TensorType) or value.type.dtype.is_float:
        return value
    return ir.cast(value, dtype)


def typecheck(
    spec: s.Spec, dim_sizes: Mapping[str, int] | None = None, mode: ir.Mode = ir.Mode.TRAINING
) -> ir.Kernel:
    """Resolves names and checks shapes and dtypes; raises `SpecError` on the first problem.
    `dim_sizes` overrides declared dim sizes (a scaled-down copy of a large spec); `mode` is
    the module mode the spec means (the kernel's `mode` is None when that does not matter)."""
    dim_sizes = dict(dim_sizes or {})
    declared = {item.name for item in spec.items if isinstance(item, s.DimDecl)}
    unknown = sorted(set(dim_sizes) - declared)
    if unknown:
        raise SpecError(
            f"no dim named {', '.join(f'`{n}`' for n in unknown)} to resize",
            spec.name_span,
            note="declared dims: " + (", ".join(sorted(declared)) or "none"),
        )
    return _TypeChecker(spec, dim_sizes, mode).check()
