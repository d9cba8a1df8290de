"""The abstract syntax of a spec, as parsed: names are not yet resolved, shapes not checked."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

import attrs

from ptodsl.frontend.diagnostics import Span, SpecError

# What a weight's declaration may start it as (the parser's and the checker's note).
WEIGHT_INIT_NOTE = (
    "a weight starts as `ones`, `zeros`, a number (`= 2.0`), a float param of the "
    "constructor (`= constant`, `= ones * init`) or a draw from torch's RNG "
    "(`= randn`, `= rand`, `= randn * 0.02`); a torch module's parameters are one "
    "declaration: `weight fc: linear(K, N)`"
)

# ---- expressions -------------------------------------------------------------------------


@attrs.frozen
class Number:
    value: float
    text: str
    span: Span


@attrs.frozen
class Name:
    id: str
    span: Span


@attrs.frozen
class Bool:
    value: bool
    span: Span


@attrs.frozen
class Unary:
    op: str  # "neg"
    operand: Expr
    span: Span


@attrs.frozen
class Binary:
    op: str  # "add" | "sub" | "mul" | "div" | "matmul" | "pow"; "floordiv" in dims
    lhs: Expr
    rhs: Expr
    span: Span


@attrs.frozen
class Compare:
    op: str  # "lt" | "le" | "gt" | "ge" | "eq" | "ne"
    lhs: Expr
    rhs: Expr
    span: Span


@attrs.frozen
class Keyword:
    name: str
    value: Expr
    span: Span


@attrs.frozen
class Call:
    func: str
    func_span: Span
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span
    method: bool = False  # written `args[0].func(...)`
    builtin: bool = False  # made by ptodsl for a module (`conv(x)`): the function, never a module
    # made by the parser for `let out, _ = attn(q, k, v)`: this call's value is result
    # `index` of a module's `count` results
    result: tuple[int, int] | None = None


@attrs.frozen
class Attribute:
    value: Expr
    attr: str
    span: Span


@attrs.frozen
class ListExpr:
    items: tuple[Expr, ...]
    span: Span


@attrs.frozen
class Slice:
    """`start:stop:step` along one axis; None where the spec leaves a bound out."""

    # an int, or a size expression of dims and `int` params (`7 + C_out`) until checked
    start: int | Expr | None
    stop: int | Expr | None
    span: Span
    step: int | Expr | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class AllAxes:
    """`...` in a subscript: whole slices of every axis the other slices leave out."""

    span: Span


@attrs.frozen
class Index:
    """`x[t]`: one position along an axis, which the axis then leaves (torch's integer
    index); in a time loop, its step variable."""

    index: int | Expr
    span: Span


@attrs.frozen
class Subscript:
    value: Expr
    slices: tuple[Slice | AllAxes | Index, ...]
    span: Span


Expr = Number | Name | Bool | Unary | Binary | Compare | Call | Attribute | ListExpr | Subscript

# ---- declarations and statements ---------------------------------------------------------


@attrs.frozen
class DimRef:
    """One axis in a declared shape: a dim name (plus `offset`, as in `N + 1`), a literal
    size, or a size expression of dims and `int` params (`expr`: `2 * D - 1`)."""

    name: str | None
    size: int | None
    span: Span
    offset: int = 0
    expr: Expr | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class TensorTypeExpr:
    dtype: str
    dtype_span: Span
    # One entry per declared axis; an entry of several factors (`G * CG`) is split into
    # that many logical axes. None: a scalar.
    dims: tuple[tuple[DimRef, ...], ...] | None
    span: Span


@attrs.frozen
class DimDecl:
    """`N = 16`, or a dim computed from the dims before it (`H_out = (H - 3) // 2 + 1`):
    `size` is then its value at their declared sizes, `computed` the expression (of
    Number, Name and Binary nodes, ops add, sub, mul and floordiv)."""

    name: str
    size: int
    span: Span
    computed: Expr | None = None


def computed_size(
    dim: DimDecl, sizes: Mapping[str, int], params: Mapping[str, Expr] | None = None
) -> int:
    """A computed dim's size given the sizes of the dims before it (`sizes`) and the spec's
    size params (`size_params`: `stride`, or `in_channels = C_in`)."""
    assert dim.computed is not None
    return size_value(dim.computed, sizes, params or {}, f" declared before `{dim.name}`")


def size_value(
    node: Expr, sizes: Mapping[str, int], params: Mapping[str, Expr], where: str = ""
) -> int:
    """A size expression's value (+ - * // of integers, dims and `int` params): a computed
    dim, a declared axis (`2 * D - 1`), a slice bound (`7 + C_out`)."""

    def value(node: Expr) -> int:
        if isinstance(node, Number):
            return int(node.value)
        if isinstance(node, Name):
            if node.id in sizes:
                return sizes[node.id]
            default = params.get(node.id)
            if isinstance(default, Number):
                return int(default.value)
            if isinstance(default, Name) and default.id in sizes:
                return sizes[default.id]
            raise SpecError(
                f"`{node.id}` is not a dim{where} nor an `int` param",
                node.span,
                note="a size is made of dims, `int` params and integers",
            )
        assert isinstance(node, Binary), "the grammar makes nothing else"
        lhs, rhs = value(node.lhs), value(node.rhs)
        if node.op in ("floordiv", "div") and rhs == 0:
            raise SpecError("division by zero", node.span)
        if node.op == "div" and lhs % rhs:
            raise SpecError(
                f"{lhs} / {rhs} is not a whole number",
                node.span,
                note="`/` divides exactly; `//` rounds down, as Python's",
            )
        if node.op in ("floordiv", "div"):
            return lhs // rhs
        return {"add": lhs + rhs, "sub": lhs - rhs, "mul": lhs * rhs}[node.op]

    return value(node)


def size_params(items: Iterable[object]) -> dict[str, Expr]:
    """The `int` params a computed dim may name, each with its value: an integer or a dim
    (`param stride: int = 2`, `param in_channels: int = C_in`)."""
    return {
        item.name: item.default
        for item in items
        if isinstance(item, ParamDecl)
        and item.type.dtype == "int"
        and item.type.dims is None
        and (
            isinstance(item.default, Name)
            or (isinstance(item.default, Number) and float(item.default.value).is_integer())
        )
    }


@attrs.frozen
class ParamDecl:
    name: str
    type: TensorTypeExpr
    # A number, a dim name, a product of those (a Binary) or a list of those; None when the
    # spec gives no value.
    default: Number | Name | Binary | ListExpr | None
    span: Span


@attrs.frozen
class InputDecl:
    name: str
    type: TensorTypeExpr
    domain: str | None
    domain_span: Span | None
    span: Span
    value: Number | None = None  # a scalar input's value for checks
    domain_extent: DimRef | None = None  # `in range(C)`: C


@attrs.frozen
class WeightDecl:
    name: str
    type: TensorTypeExpr
    # `ones`, `randn`, `constant` (a Name), `randn * 0.02`, `ones * init` (a Binary) or a
    # number
    init: Name | Binary | Number
    span: Span
    path: str | None = attrs.field(default=None, kw_only=True)  # in a block: `attn.scale`


@attrs.frozen
class ModuleDecl:
    """`weight fc: linear(K, N, bias=true)`: a torch module whose parameters are weights.
    `path` is its place in ModelNew's module tree (`attn.c_attn`, `network.0`) when a block
    or a container holds it; `name` is then the identifier expressions use."""

    name: str
    module: Call
    span: Span
    path: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class StateDecl:
    """`state hidden: f32[B, H] = randn`: a tensor ModelNew carries between calls."""

    name: str
    type: TensorTypeExpr
    init: Name | Binary | Number
    span: Span


@attrs.frozen
class Triangle:
    """`tril(ones)`, `triu(ones, diagonal=1)`: a buffer's triangle of ones."""

    function: str  # "tril" | "triu"
    fill: Name
    diagonal: int
    span: Span


@attrs.frozen
class BufferDecl:
    """`buffer mask: f32[T, T] = tril(ones)`: a constant the module registers."""

    name: str
    type: TensorTypeExpr
    init: Name | Binary | Number | Triangle
    span: Span
    path: str | None = attrs.field(default=None, kw_only=True)  # in a block: `attn.bias`


@attrs.frozen
class OutputDecl:
    name: str
    type: TensorTypeExpr
    span: Span


@attrs.frozen
class Let:
    name: str
    value: Expr
    span: Span
    # made by the parser (the value a `let a, b = x.split(...)` splits): its name starts
    # with `_`, which no spec name may
    hidden: bool = attrs.field(default=False, kw_only=True)


@attrs.frozen
class Assign:
    target: str
    value: Expr
    span: Span


@attrs.frozen
class BlockParam:
    """One constructor argument of a block: `n_head: int`, `eps: f32 = 1e-5`."""

    name: str
    type: TensorTypeExpr
    default: Number | Name | Binary | ListExpr | None
    span: Span


@attrs.frozen
class BlockDef:
    """`block attention(n_embd: int, ...)`: a torch module written in the spec. `state` are
    its weights and modules, `arguments` forward's, `body` its lets, `result` what it
    returns. Instances are inlined where they are called (ptodsl.frontend.blocks)."""

    name: str
    params: tuple[BlockParam, ...]
    state: tuple[WeightDecl | ModuleDecl | BufferDecl, ...]
    arguments: tuple[Name, ...]
    body: tuple[Let, ...]
    result: Expr
    span: Span


@attrs.frozen
class ContainerDecl:
    """A torch module ModelNew creates at `path` to hold others or none (`nn.Sequential`,
    a block instance's `nn.Module`, the `nn.ReLU` of a Sequential), so that state_dict
    paths and Sequential indices are torch's. Made by expanding blocks, never parsed."""

    path: str
    torch: str  # the class ModelNew calls with no arguments: `torch.nn.Sequential`
    span: Span


@attrs.frozen
class StepAssign:
    """`y[t] = value` in a time loop: step t's slice of output `y`."""

    target: str
    index: str
    value: Expr
    span: Span


@attrs.frozen
class For:
    """`for t in range(T)` ... `end`: a loop over time steps (see the grammar)."""

    variable: str
    count: int | Expr
    body: tuple[Let | Assign | StepAssign, ...]
    span: Span


Item = (
    DimDecl
    | ParamDecl
    | InputDecl
    | WeightDecl
    | ModuleDecl
    | StateDecl
    | BufferDecl
    | OutputDecl
    | Let
    | Assign
    | BlockDef
    | ContainerDecl
    | For
)


@attrs.frozen
class Spec:
    name: str
    name_span: Span
    items: tuple[Item, ...]

    @property
    def declared_dims(self) -> dict[str, int]:
        """Each dim's size as the spec writes it (before any `--dim` resizes it)."""
        return {item.name: item.size for item in self.items if isinstance(item, DimDecl)}


def map_syntax(node: object, rewrite: Callable[[object], object | None]) -> object:
    """`node` (a syntax tree, or a tuple of them) rebuilt with `rewrite` applied top-down:
    where it returns a node, that node replaces the subtree; where None, the fields are
    mapped (spans kept)."""
    replaced = rewrite(node)
    if replaced is not None:
        return replaced
    if isinstance(node, tuple):
        return tuple(map_syntax(item, rewrite) for item in node)
    if not attrs.has(type(node)):
        return node
    changes = {
        f.name: map_syntax(getattr(node, f.name), rewrite)
        for f in attrs.fields(type(node))
        if f.name not in ("span", "func_span")
    }
    return attrs.evolve(node, **changes)


def walk_syntax(node: object) -> Iterator[object]:
    """`node` and every node under it, parents first."""
    yield node
    if isinstance(node, tuple):
        for item in node:
            yield from walk_syntax(item)
    elif attrs.has(type(node)):
        for f in attrs.fields(type(node)):
            yield from walk_syntax(getattr(node, f.name))


def format_syntax(node: object, indent: str = "") -> str:
    """An indented dump of a syntax tree, spans left out, for `--emit ast`."""
    if isinstance(node, tuple):
        return "".join(format_syntax(item, indent) for item in node)
    if not attrs.has(type(node)):
        return f"{indent}{node!r}\n"
    fields = [f for f in attrs.fields(type(node)) if not f.name.endswith("span")]
    simple = [f for f in fields if not _is_tree(getattr(node, f.name))]
    nested = [f for f in fields if _is_tree(getattr(node, f.name))]
    header = " ".join(f"{f.name}={getattr(node, f.name)!r}" for f in simple)
    text = f"{indent}{type(node).__name__} {header}".rstrip() + "\n"
    for f in nested:
        text += f"{indent}  {f.name}:\n" + format_syntax(getattr(node, f.name), indent + "    ")
    return text


def _is_tree(value: object) -> bool:
    return attrs.has(type(value)) or (isinstance(value, tuple) and any(_is_tree(v) for v in value))
