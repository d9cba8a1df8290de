"""The typed intermediate representation that passes rewrite and codegen reads.

An expression is a tree of `Const`, `Ref` and `Op` nodes; every node knows its type and the
span of the spec text it came from. `Op` is generic (an op name, operands and attributes) so
that rewrite tables can be keyed on op names alone; its attributes are typed, one class per
op family, and the op's registry entry (`ptodsl.ir.ops`) says which. After `materialise`, a
kernel also carries its `Program`: per phase, the instructions codegen prints.
"""

from __future__ import annotations

import enum
import fractions
import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import attrs

from ptodsl.frontend.diagnostics import Span


class DType(enum.Enum):
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    # Integer and bool tensors are kernel inputs and outputs; computation is in floats
    # (typecheck converts them on use, as torch promotes `mask * x`).
    I32 = "i32"
    I64 = "i64"
    BOOL = "bool"

    def __repr__(self) -> str:
        return self.value

    @property
    def itemsize(self) -> int:
        return _DTYPE_FACTS[self.value][0]

    @property
    def pypto_name(self) -> str:
        return _DTYPE_FACTS[self.value][1]

    @property
    def torch_name(self) -> str:
        return _DTYPE_FACTS[self.value][2]

    @property
    def is_float(self) -> bool:
        return self in (DType.F32, DType.F16, DType.BF16)

    @property
    def largest(self) -> float:
        """The largest finite value (of a float dtype): a padding no element beats."""
        return _LARGEST_FLOAT[self.value]

    def holds(self, value: float) -> bool:
        """Whether `value` rounds to a finite value of this float dtype."""
        return abs(value) < _ROUNDS_TO_INFINITY[self.value]


# Per dtype: bytes per element, PyPTO's name, torch's name.
_DTYPE_FACTS = {
    "f32": (4, "DT_FP32", "float32"),
    "f16": (2, "DT_FP16", "float16"),
    "bf16": (2, "DT_BF16", "bfloat16"),
    "i32": (4, "DT_INT32", "int32"),
    "i64": (8, "DT_INT64", "int64"),
    "bool": (1, "DT_BOOL", "bool"),
}
_LARGEST_FLOAT = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.3895313892515355e38}
# From here on a value rounds to infinity: the largest finite value plus half its ulp (the
# tie rounds to the even neighbour, which is infinity).
_ROUNDS_TO_INFINITY = {"f32": 2.0**128 - 2.0**103, "f16": 65520.0, "bf16": 2.0**128 - 2.0**119}


@attrs.frozen
class TensorType:
    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{', '.join(map(str, self.shape))}]"


@attrs.frozen
class ScalarType:
    """A compile-time scalar: a literal, a spec param, or arithmetic on them."""

    def __str__(self) -> str:
        return "scalar"


SCALAR = ScalarType()
Type = TensorType | ScalarType


@attrs.frozen
class Const:
    value: float
    span: Span
    type: ScalarType = SCALAR


@attrs.frozen
class Ref:
    """A named value: an input, a param, or a `let` binding."""

    name: str
    type: Type
    span: Span


# ---- op attributes: each op's registry entry names the one class its attributes have ----


@attrs.frozen
class Reduce:
    """The axes a reduction reduces (sorted, distinct); `keepdim` keeps them as size 1."""

    axes: tuple[int, ...]
    keepdim: bool


@attrs.frozen
class Variance(Reduce):
    correction: int  # Bessel's correction: the divisor is count - correction


@attrs.frozen
class Along:
    """The one axis a whole-axis function (softmax, log_softmax) works along."""

    axis: int


@attrs.frozen
class AlongKeep(Along):
    """logsumexp: reduces its axis, which `keepdim` keeps as size 1."""

    keepdim: bool


@attrs.frozen
class Scan(Along):
    """A running total along `axis`: from the end when `reverse`, each element's own term
    left out when `exclusive` (torch.cumsum is neither)."""

    reverse: bool = False
    exclusive: bool = False

    @property
    def variant(self) -> str:
        """Part of the op's form (`cumsum[reverse](t)`): PyPTO runs only the plain scan."""
        flags = [name for name in ("reverse", "exclusive") if getattr(self, name)]
        return f"[{','.join(flags)}]" if flags else ""


@attrs.frozen
class Triangle:
    """triu/tril: the diagonal (0 the main one, k > 0 above it) that bounds the kept part."""

    diagonal: int


@attrs.frozen
class Cast:
    """The dtype a conversion gives its operand's values (exact: integers below 2^24)."""

    dtype: DType

    @property
    def variant(self) -> str:
        """Part of the op's form (`cast[i64](t)`): each conversion has its own spelling."""
        return f"[{self.dtype.value}]"


@attrs.frozen
class Slice:
    """A static crop: per axis, where it starts and ends (None: the axis is not cut, which
    passes may merge or split like any other)."""

    starts: tuple[int, ...]
    stops: tuple[int | None, ...]

    def cut(self) -> frozenset[int]:
        return frozenset(axis for axis, stop in enumerate(self.stops) if stop is not None)

    def moved(self, sources: list[int | None]) -> Slice:
        """The crop on new axes: each takes the bounds of its source axis, or none (uncut)."""
        return Slice(
            tuple(0 if s is None else self.starts[s] for s in sources),
            tuple(None if s is None else self.stops[s] for s in sources),
        )


@attrs.frozen
class Reshape:
    """The same elements, in row-major order, seen as `shape`."""

    shape: tuple[int, ...]


@attrs.frozen
class Transposes:
    """Whether matmul reads each operand transposed (stored as [K, M] or [N, K])."""

    a_trans: bool
    b_trans: bool


@attrs.frozen
class Expand:
    """The shape an explicit broadcast copies its operand to."""

    shape: tuple[int, ...]


@attrs.frozen
class Window:
    """A window reduction over `axes` (torch's pooling): per axis, the window's `size`,
    `stride`, zero-based `padding` on both ends, `dilation` between taps; `ceil_mode`
    keeps a last, partial window that starts inside the input or its left padding."""

    axes: tuple[int, ...]
    size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool = False

    def extent(self, position: int, length: int) -> int:
        """The number of windows along `axes[position]` of a `length`-long axis (torch)."""
        size, stride = self.size[position], self.stride[position]
        padding, dilation = self.padding[position], self.dilation[position]
        span = length + 2 * padding - dilation * (size - 1) - 1
        count = (-(-span // stride) if self.ceil_mode else span // stride) + 1
        if self.ceil_mode and (count - 1) * stride >= length + padding:
            count -= 1  # torch: the last window must start inside the input or left padding
        return count

    def result_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        extents = {axis: self.extent(i, shape[axis]) for i, axis in enumerate(self.axes)}
        return tuple(extents.get(axis, size) for axis, size in enumerate(shape))

    def moved(self, sources: list[int | None]) -> Window:
        """The window on new axes: `sources[new]` is the old axis a new one comes from (each
        windowed axis comes from exactly one), per-axis values following their axes."""
        order = sorted(range(len(self.axes)), key=lambda i: sources.index(self.axes[i]))

        def per_axis(values: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(values[i] for i in order)

        return attrs.evolve(
            self,
            axes=tuple(sources.index(self.axes[i]) for i in order),
            size=per_axis(self.size),
            stride=per_axis(self.stride),
            padding=per_axis(self.padding),
            dilation=per_axis(self.dilation),
        )


@attrs.frozen
class Conv:
    """torch's convolution (`conv1d`, `conv2d`, `conv3d`) of an input [N, C_in, *spatial]
    with a weight [C_out, C_in / groups, *kernel]: per spatial axis, the `stride`, the
    zero `padding` on both ends and the `dilation` between taps; `groups` splits both
    channel axes into that many independent convolutions."""

    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    # a row launch's: `rows` of the output's first spatial axis, from the launch's first
    # row (the kernel factory's argument, `RowLaunches.variable`); 0: all of them
    rows: int = attrs.field(default=0, kw_only=True)

    @property
    def spatial(self) -> int:
        return len(self.stride)

    def launched(self, spatial: tuple[int, ...]) -> tuple[int, ...]:
        """The output's spatial extents one launch computes: `rows` of the first, if set."""
        return (self.rows, *spatial[1:]) if self.rows else spatial

    def extent(self, position: int, length: int, kernel: int) -> int:
        """The output's length along spatial axis `position` (torch's formula)."""
        span = length + 2 * self.padding[position] - self.dilation[position] * (kernel - 1) - 1
        return span // self.stride[position] + 1

    def result_shape(self, x: tuple[int, ...], weight: tuple[int, ...]) -> tuple[int, ...]:
        spatial = tuple(
            self.extent(i, length, kernel)
            for i, (length, kernel) in enumerate(zip(x[2:], weight[2:], strict=True))
        )
        return (x[0], weight[0], *self.launched(spatial))


@attrs.frozen
class ConvTranspose(Conv):
    """torch's transposed convolution (`conv_transpose1d/2d/3d`) of an input [N, C_in,
    *spatial] with a weight [C_in, C_out / groups, *kernel]: the gradient of a convolution
    with these attributes; `output_padding` lengthens each spatial axis at its end."""

    output_padding: tuple[int, ...] = ()

    def extent(self, position: int, length: int, kernel: int) -> int:
        stride, padding = self.stride[position], self.padding[position]
        dilation = self.dilation[position]
        extra = self.output_padding[position]
        return (length - 1) * stride - 2 * padding + dilation * (kernel - 1) + extra + 1

    def result_shape(self, x: tuple[int, ...], weight: tuple[int, ...]) -> tuple[int, ...]:
        spatial = tuple(
            self.extent(i, length, kernel)
            for i, (length, kernel) in enumerate(zip(x[2:], weight[2:], strict=True))
        )
        return (x[0], weight[1] * self.groups, *self.launched(spatial))


@attrs.frozen
class ConvGeometry:
    """The sizes of one convolution, in torch's terms (what every pass that lowers it reads)."""

    batch: int
    in_channels: int
    out_channels: int
    spatial: tuple[int, ...]  # the input's spatial extents
    kernel: tuple[int, ...]
    out: tuple[int, ...]  # the output's spatial extents (a row launch's rows of the first)
    attributes: Conv
    whole_rows: int  # the output's first spatial extent over all row launches

    @classmethod
    def of(cls, conv: Op) -> ConvGeometry:
        x, weight = (operand.type for operand in conv.operands)
        assert isinstance(x, TensorType) and isinstance(weight, TensorType)
        assert isinstance(conv.attrs, Conv)
        natural = conv.attrs.result_shape(x.shape, weight.shape)
        whole = attrs.evolve(conv.attrs, rows=0).result_shape(x.shape, weight.shape)
        return cls(
            x.shape[0],
            x.shape[1],
            natural[1],
            x.shape[2:],
            weight.shape[2:],
            natural[2:],
            conv.attrs,
            whole[2],
        )

    @property
    def group_in(self) -> int:
        return self.in_channels // self.attributes.groups

    @property
    def group_out(self) -> int:
        return self.out_channels // self.attributes.groups

    @property
    def taps(self) -> list[tuple[int, ...]]:
        """Every kernel position, in the weight's row-major order."""
        return list(itertools.product(*(range(k) for k in self.kernel)))

    @property
    def transposed(self) -> bool:
        return isinstance(self.attributes, ConvTranspose)

    @property
    def inserted(self) -> tuple[int, ...]:
        """Per spatial axis, the spacing of the input's elements in the input the
        convolution slides over: a transposed convolution's stride (zeros between), else 1."""
        return self.attributes.stride if self.transposed else (1,) * len(self.spatial)

    @property
    def stride(self) -> tuple[int, ...]:
        """The stride of the convolution that computes this one: 1 for a transposed one."""
        return (1,) * len(self.spatial) if self.transposed else self.attributes.stride

    @property
    def front(self) -> tuple[int, ...]:
        """Zeros before each spatial axis of the (spaced) input; negative: a crop. A
        transposed convolution is the convolution of its spaced input with the kernel
        flipped, padded by dilation * (kernel - 1) - padding."""
        if not self.transposed:
            return self.attributes.padding
        return tuple(
            d * (k - 1) - p
            for d, k, p in zip(
                self.attributes.dilation, self.kernel, self.attributes.padding, strict=True
            )
        )

    def tap_weight(self, tap: tuple[int, ...]) -> int:
        """The weight's tap (row-major) that multiplies the input at `tap`: the same one, or
        the flipped one for a transposed convolution."""
        if self.transposed:
            tap = tuple(k - 1 - t for k, t in zip(self.kernel, tap, strict=True))
        position = 0
        for k, t in zip(self.kernel, tap, strict=True):
            position = position * k + t
        return position

    def spacing(self, axis: int, extents: tuple[int, ...]) -> tuple[int, int, int, int]:
        """The input [C_in, *extents] as [before, n, gap, after] around spatial `axis`:
        joining `gap - 1` zeros after each of its n elements spaces them `gap` apart. Along
        the last axis (after = 1) the kernel first exchanges [before, n] to [n, before]:
        PyPTO copies a [before, n, 1] value whole, in 32-byte blocks per element (#73)."""
        before = self.in_channels * math.prod(extents[:axis])
        return (before, extents[axis], self.inserted[axis], math.prod(extents[axis + 1 :]))

    def split_source(self, padded: tuple[int, ...]) -> tuple[int, ...]:
        """The padded input [C_in, *padded] with each strided axis split as [length /
        stride, stride], so that one tap's outputs along it are one column of a view."""
        shape: list[int] = [self.in_channels]
        for length, step in zip(padded, self.stride, strict=True):
            shape += [length // step, step] if step > 1 else [length]
        return tuple(shape)

    @property
    def macs(self) -> int:
        """Multiply-adds: each output element sums C_in/groups channels times the taps (a
        transposed convolution's, over its spaced input, counted the same)."""
        outputs = self.batch * self.out_channels * math.prod(self.out)
        return outputs * self.group_in * len(self.taps)

    @property
    def depthwise(self) -> bool:
        """One input and one output channel per group: each channel convolved alone."""
        return not self.transposed and self.group_in == self.group_out == 1

    def tap_view(
        self, rows: int, leading: tuple[int, ...] = (), channels: int | None = None
    ) -> tuple[int, ...]:
        """A tap's view of the (split) input for `rows` output rows: [C_in/groups (or
        `channels`), rows, *rest], with a column of 1 after each strided axis."""
        shape: list[int] = [*leading, self.group_in if channels is None else channels]
        for length, step in zip((rows, *self.out[1:]), self.stride, strict=True):
            shape += [length, 1] if step > 1 else [length]
        return tuple(shape)

    def tap_start(self, tap: tuple[int, ...], skip: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Where a tap's view starts along each spatial axis of the split input: its first
        element's (row, column) along a strided axis, else its position."""
        starts = []
        for k, first, d, step in zip(tap, skip, self.attributes.dilation, self.stride, strict=True):
            at = first + k * d
            starts.append(divmod(at, step) if step > 1 else (at,))
        return starts

    @property
    def stacked(self) -> int:
        """The cube's K: a group's input channels times the taps, each tap's view of the
        input stacked under the others into one [K, columns] matrix."""
        return self.group_in * len(self.taps)

    def rows_per_block(self, block_elements: int, max_columns: int | None = None) -> int:
        """Output rows (along the first spatial axis) per block: as many as keep a block's
        matrices ([K, rows * rest] stacked taps and [C_out/groups, rows * rest] on the
        cube; [C/groups, rows * rest] on the vector cores) within `block_elements` and,
        for the cube, their rows * rest columns within `max_columns`; at least one."""
        rest = math.prod(self.out[1:])
        height = self.group_in if self.depthwise else self.stacked
        rows = block_elements // (max(height, self.group_out) * rest)
        if max_columns is not None:
            rows = min(rows, max_columns // rest)
        return max(1, min(self.out[0], rows))

    @property
    def merges_batch(self) -> bool:
        """A 3-D convolution's tensors have rank 5: the kernel sees the batch and channel
        axes as one (PyPTO 0.2.0 has rank 4)."""
        return len(self.spatial) == 3


@attrs.frozen
class Fill:
    """A tensor of the result's shape holding `value` everywhere (a window's padding)."""

    value: float


@attrs.frozen
class Swap:
    """Two axes a transpose exchanges (a window phase's last-axis steps)."""

    first: int
    second: int


OpAttrs = (
    Reduce
    | Along
    | Triangle
    | Cast
    | Slice
    | Transposes
    | Expand
    | Window
    | Conv
    | ConvTranspose
    | Fill
    | Swap
)


def attribute_items(attributes: OpAttrs | None) -> tuple[tuple[str, object], ...]:
    """An op's attributes as (name, value) pairs, in declaration order; a keyword-only one
    (a launch's own, such as `Conv.rows`) only when it is not its default."""
    if attributes is None:
        return ()
    return tuple(
        (f.name, getattr(attributes, f.name))
        for f in attrs.fields(type(attributes))
        if not f.kw_only or getattr(attributes, f.name) != f.default
    )


@attrs.frozen
class Op:
    op: str
    operands: tuple[Expr, ...]
    type: Type
    span: Span
    attrs: OpAttrs | None = None


Expr = Const | Ref | Op


def is_scalar(expr: Expr) -> bool:
    return isinstance(expr.type, ScalarType)


def broadcast_shapes(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two shapes, or None when they do not broadcast."""
    result = []
    for a, b in itertools.zip_longest(reversed(lhs), reversed(rhs), fillvalue=1):
        if a != b and 1 not in (a, b):
            return None
        result.append(max(a, b))
    return tuple(reversed(result))


def compute_itemsize(expr: Expr) -> int:
    """Bytes per element of the float dtype an expression computes in: its own, or for an
    integer result (a position), its widest float operand's (f32 when it has none)."""
    if isinstance(expr.type, TensorType) and expr.type.dtype.is_float:
        return expr.type.dtype.itemsize
    floats = [
        node.type.dtype.itemsize
        for node in walk(expr)
        if isinstance(node.type, TensorType) and node.type.dtype.is_float
    ]
    return max(floats, default=DType.F32.itemsize)


def covering_shape(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[int, ...]:
    """The longer extent per right-aligned axis: the broadcast of two shapes that broadcast,
    and what a crop or a concatenation, which give one axis several extents, runs over."""
    pairs = itertools.zip_longest(reversed(lhs), reversed(rhs), fillvalue=1)
    return tuple(reversed([max(a, b) for a, b in pairs]))


def elementwise_type(operands: tuple[Expr, ...]) -> Type:
    """The type of an elementwise op on already checked operands."""
    tensors = [o.type for o in operands if isinstance(o.type, TensorType)]
    if not tensors:
        return SCALAR
    shape = tensors[0].shape
    for tensor in tensors[1:]:
        merged = broadcast_shapes(shape, tensor.shape)
        assert merged is not None, "operands were checked to broadcast"
        shape = merged
    return TensorType(shape, tensors[0].dtype)


def generated_name(kind: str, base: str | None = None) -> str:
    """A name ptodsl makes up: `_<kind>` (`_t0`) or `_<kind>_<base>` (`_chunk_x`, the chunk of
    `x`). Spec names cannot start with `_` and a kind has none, so reading the kind up to
    the first `_` recovers both parts: a generated name never equals a spec name or another
    generated name."""
    assert kind and "_" not in kind and kind.isidentifier(), kind
    return f"_{kind}" if base is None else f"_{kind}_{base}"


def op(
    name: str,
    *operands: Expr,
    span: Span,
    attributes: OpAttrs | None = None,
    type: Type | None = None,  # noqa: A002 - the field it fills
) -> Op:
    """A new op, its type from its registry entry's type rule (`ops.type_fault`): every op
    is built here. `type` gives a layout the rule accepts (a matmul in the kernel's frame),
    or the type of an op that creates its value; an op the rule refuses is ptodsl's bug."""
    from ptodsl.ir import ops

    result, fault = ops.type_fault(name, operands, attributes, type)
    if fault is not None:
        raise ops.IllTyped(fault)
    return Op(name, operands, result, span, attributes)


def convolutions(kernel: Kernel) -> list[Op]:
    """Every convolution (forward or transposed) in the kernel's statements."""
    return [
        node
        for stmt in kernel.body
        for node in walk(stmt.value)
        if isinstance(node, Op) and isinstance(node.attrs, Conv)
    ]


def convolution_macs(kernel: Kernel) -> int:
    """The multiply-adds of the kernel's convolutions."""
    return sum(ConvGeometry.of(conv).macs for conv in convolutions(kernel))


def op_reshape(value: Expr, shape: tuple[int, ...]) -> Op:
    """`value`'s elements seen as `shape`."""
    return op("reshape", value, span=value.span, attributes=Reshape(shape))


def cast(value: Expr, dtype: DType) -> Op:
    """`value` converted to `dtype`."""
    return op("cast", value, span=value.span, attributes=Cast(dtype))


def map_expr(expr: Expr, rewrite: Callable[[Expr], Expr]) -> Expr:
    """Applies `rewrite` bottom-up: operands first, then the rebuilt node itself."""
    if isinstance(expr, Op):
        operands = tuple(map_expr(operand, rewrite) for operand in expr.operands)
        if operands != expr.operands:
            expr = attrs.evolve(expr, operands=operands)
    return rewrite(expr)


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of the tree, operands before the node that uses them."""
    if isinstance(expr, Op):
        for operand in expr.operands:
            yield from walk(operand)
    yield expr


def let_lifetimes(body: Sequence[Stmt]) -> dict[int, tuple[str, ...]]:
    """Per statement index, the `let`s whose last read is that statement (a `let` never
    read ends at its own): what an evaluation in order can let go after it."""
    last: dict[str, int] = {}
    for index, stmt in enumerate(body):
        if isinstance(stmt, Let):
            last[stmt.name] = index
        for node in walk(stmt.value):
            if isinstance(node, Ref) and node.name in last:
                last[node.name] = index
    ending: dict[int, tuple[str, ...]] = {}
    for name, index in last.items():
        ending[index] = (*ending.get(index, ()), name)
    return ending


# ---- kernel ------------------------------------------------------------------------------


@attrs.frozen
class Dim:
    name: str
    size: int
    span: Span


ParamValue = float | int | bool | tuple[int, ...]


@attrs.frozen
class Param:
    """A scalar fixed when the kernel is built: a `ModelNew.__init__` argument by default,
    or a `forward` argument when `forward` is set (the kernel is then built per value).
    A `fixed` param (an int or a tuple of ints) never reaches the kernel: `ModelNew` takes it
    to mirror the problem's constructor and asserts it equals the value the kernel is for."""

    name: str
    default: ParamValue | None
    span: Span
    forward: bool = False
    fixed: bool = False
    # A float argument a weight of its name shadows (`weight constant: f32 = constant`):
    # ModelNew takes it to start that weight; expressions read the weight, never it.
    shadowed: bool = False


DimFactor = str | int  # a dim's name, or a literal size written in the spec


@attrs.frozen
class Tensor:
    """A kernel input or output. `dims` spells the declared shape (dim names or literal
    sizes); axis merging sets `kernel_dims`, the factors of each kernel-side axis."""

    name: str
    type: TensorType
    span: Span
    dims: tuple[DimFactor, ...]
    kernel_dims: tuple[tuple[DimFactor, ...], ...] | None = None
    declared: tuple[int, ...] | None = attrs.field(default=None, kw_only=True)
    # how many logical axes each declared axis splits into (`G * CG`: 2); None: one each
    splits: tuple[int, ...] | None = attrs.field(default=None, kw_only=True)

    @property
    def declared_dims(self) -> tuple[tuple[DimFactor, ...], ...]:
        """The logical axes' factors grouped by declared axis."""
        return self.by_declared_axis(self.dims)

    @property
    def declared_groups(self) -> tuple[tuple[int, ...], ...]:
        """The logical axes' sizes grouped by declared axis."""
        return self.by_declared_axis(self.type.shape)

    def by_declared_axis(self, per_logical_axis: tuple) -> tuple[tuple, ...]:
        """Per-logical-axis values grouped by the declared axis they split from."""
        counts = self.splits or (1,) * len(self.dims)
        starts = [sum(counts[:i]) for i in range(len(counts))]
        return tuple(per_logical_axis[a : a + n] for a, n in zip(starts, counts, strict=True))

    @property
    def declared_shape(self) -> tuple[int, ...]:
        """The shape `forward` takes or returns; `type` is the logical shape, which splits
        entries such as `G * CG` into separate axes."""
        return self.type.shape if self.declared is None else self.declared

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        """The shape the kernel sees (the declared shape until axes are merged)."""
        if self.kernel_dims is None:
            return self.type.shape
        sizes = dict(zip(self.dims, self.type.shape, strict=True))
        # an int factor is its own size: a literal dim, or a part of an axis a reshape splits
        return tuple(
            math.prod(f if isinstance(f, int) else sizes[f] for f in factors)
            for factors in self.kernel_dims
        )


@attrs.frozen
class Filled:
    """A weight that starts as one value everywhere (`= ones`, `= zeros`, `= 2.0`)."""

    value: float

    def __str__(self) -> str:
        return {1.0: "ones", 0.0: "zeros"}.get(self.value, f"= {format_value(self.value)}")

    @property
    def how_it_starts(self) -> str:
        """`as ones`, `at 2`: how ModelNew starts the weight, for messages."""
        return f"as {self}" if self.value in (0.0, 1.0) else f"at {format_value(self.value)}"


@attrs.frozen
class Drawn:
    """A weight drawn from torch's RNG (`= randn`, `= rand`, `= randn * 0.02`)."""

    distribution: str  # "randn" | "rand"
    scale: float = 1.0

    def __str__(self) -> str:
        factor = "" if self.scale == 1.0 else f" * {format_value(self.scale)}"
        return self.distribution + factor

    @property
    def how_it_starts(self) -> str:
        """`as randn * 0.02`: how ModelNew starts the weight, for messages."""
        return f"as {self}"


@attrs.frozen
class ModuleState:
    """An entry of a torch module's state the spec declares, named as state_dict names it
    (`fc.weight`)."""

    module: str
    attribute: str

    def __str__(self) -> str:
        return f"{self.module}.{self.attribute}"


@attrs.frozen
class ModuleParameter(ModuleState):
    """A parameter of a torch module the spec declares (`fc.weight` of `linear(...)`)."""


@attrs.frozen
class ParamFilled:
    """A weight that starts as a constructor argument's value everywhere (`= constant`,
    `= ones * init`): nn.Parameter(torch.tensor(constant)), torch.ones(shape) * init."""

    param: str

    def __str__(self) -> str:
        return f"= {self.param}"

    @property
    def how_it_starts(self) -> str:
        return f"at the constructor's `{self.param}`"


WeightInit = Filled | Drawn | ParamFilled | ModuleParameter


class Mode(enum.Enum):
    """torch's module modes: a spec whose result depends on it (a BatchNorm with running
    statistics, dropout) is checked and lowered once per mode."""

    TRAINING = "training"
    EVAL = "eval"


@attrs.frozen
class ModuleBuffer(ModuleState):
    """A buffer of a torch module the spec declares (`bn.running_mean`): module state the
    kernel reads, never a parameter (the running statistics)."""


@attrs.frozen
class DropoutMask:
    """Training mode's dropout mask: `forward` draws it from torch's generator, as torch's
    own dropout does (`empty_like(x).bernoulli_(1 - p).div_(1 - p)`), and the kernel
    multiplies by it. `p` is a number or a float param's name."""

    p: float | str

    def __str__(self) -> str:
        return f"dropout mask (p = {self.p})"


@attrs.frozen
class Carried:
    """A tensor ModelNew carries from one forward to the next (`state hidden: f32[B, H] =
    randn`): created as `start` says, a buffer outside state_dict (torch's non-persistent
    one, so it moves with the module), read by forward and replaced by its new value."""

    start: Filled | Drawn | ParamFilled

    def __str__(self) -> str:
        return f"carried, starts {self.start}"


@attrs.frozen
class Registered:
    """A constant the module registers as a buffer (`buffer mask: f32[T, T] = tril(ones)`):
    in state_dict, the same in every call, never drawn by a check. `triangle` keeps the
    lower (`tril`) or upper (`triu`) triangle of `fill` over the last two axes, from
    `diagonal`."""

    fill: float
    triangle: str | None = None
    diagonal: int = 0

    def __str__(self) -> str:
        fill = format_value(self.fill)
        if self.triangle is None:
            return f"registered, {fill}"
        return f"registered, {self.triangle}({fill}, diagonal={self.diagonal})"


StateInit = WeightInit | ModuleBuffer | DropoutMask | Carried | Registered


@attrs.frozen
class Module:
    """`weight fc: linear(K, N)`: a torch module (a `modules.MODULES` kind) built with these
    arguments, whose parameters are the kernel's weights."""

    name: str  # its path in ModelNew's module tree: `fc`, `attn.c_attn`, `network.0`
    kind: str
    arguments: tuple[tuple[str, ParamValue], ...]
    span: Span

    @property
    def identifier(self) -> str:
        """The name a spec calls it by (`attn_c_attn` inside an inlined block)."""
        return path_identifier(self.name)


def path_identifier(path: str) -> str:
    """The spec's name for what ModelNew holds at a torch path: `attn.c_attn` is
    `attn_c_attn`, `network.0` is `network_0` (frontend/blocks.py names instances so)."""
    return path.replace(".", "_")


@attrs.frozen
class Container:
    """A torch module ModelNew creates at `path` that holds others or no state (a block's
    `nn.Module`, an `nn.Sequential`, its `nn.ReLU`): state_dict paths and Sequential
    indices are then torch's."""

    path: str
    torch: str  # the class, called with no arguments
    span: Span


@attrs.frozen
class Input(Tensor):
    domain: str = attrs.field(default="real", kw_only=True)
    extent: int | None = attrs.field(default=None, kw_only=True)  # `in range(extent)`
    # A weight is module state (an nn.Parameter or a declared module's parameter), not a
    # `forward` argument; the kernel still takes it as an input.
    init: StateInit | None = attrs.field(default=None, kw_only=True)
    # A second kernel input reading the same tensor as input `twin_of`, in another layout
    # (a matmul operand's: see passes/twin_operands.py); forward passes that tensor again.
    twin_of: str | None = attrs.field(default=None, kw_only=True)
    # a block's own weight: its place in ModelNew's module tree (`attn.scale`)
    path: str | None = attrs.field(default=None, kw_only=True)

    @property
    def state_name(self) -> str:
        """The weight's name in ModelNew's state dict (`fc.weight` for a module's)."""
        if isinstance(self.init, ModuleParameter | ModuleBuffer):
            return str(self.init)
        return self.path or self.name

    @property
    def is_module_state(self) -> bool:
        """In ModelNew's state_dict: a weight or a module buffer (a dropout mask is drawn
        by forward)."""
        return self.init is not None and not isinstance(self.init, DropoutMask | Carried)

    @property
    def is_weight(self) -> bool:
        """A parameter of ModelNew (its own or a module's)."""
        return self.init is not None and not isinstance(
            self.init, ModuleBuffer | DropoutMask | Carried | Registered
        )

    @property
    def is_carried(self) -> bool:
        return isinstance(self.init, Carried)

    @property
    def is_held(self) -> bool:
        """ModelNew holds it and forward reads it from there: module state or a carried
        tensor."""
        return self.is_module_state or self.is_carried


@attrs.frozen
class Output(Tensor):
    # Training mode's new value of a module buffer (`bn.running_mean`): forward copies it
    # there and does not return it; the check compares it with the Model's buffer.
    updates: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class Let:
    name: str
    value: Expr
    span: Span


@attrs.frozen
class Store:
    """Writes `value` to an output. `clone` asks codegen for a copy, because PyPTO moves the
    value into the output and a value that is read again, or an input, must not move."""

    output: str
    value: Expr
    span: Span
    clone: bool = False


Stmt = Let | Store


@attrs.frozen
class Tuning:
    """Plan choices that replace the tiling and loop passes' defaults (found by `ptodsl tune`).
    None keeps a default. Every choice still goes through the passes' legality rules."""

    tile_elements: int | None = None  # vector tile budget, at most the target's limit
    last_axis_tile: int | None = None  # cap on a vector tile's last axis; other axes fill
    loop_count: int | None = None  # at least this many iterations for a looped vector phase
    matmul_chunks: int | None = None  # M chunks of a 2-D matmul; 1 runs it without a loop
    variance: str | None = None  # "one_pass": E[x^2] - E[x]^2 instead of the two-pass form
    # "per_op": a kernel per op, every value between them in memory (the unfused baseline
    # fusion is measured against); None: the fewest kernels (passes/partition.py)
    kernels: str | None = None
    # A program of several kernels: choices of single kernels, by kernel name, each in
    # place of the choices above for that kernel (`kernels` stays the program's).
    per_kernel: tuple[tuple[str, Tuning], ...] = ()

    def for_kernel(self, name: str) -> Tuning:
        """The choices the passes apply to the kernel named `name`."""
        own = dict(self.per_kernel).get(name)
        if own is None:
            return attrs.evolve(self, per_kernel=())
        return attrs.evolve(own, kernels=self.kernels)

    def describe(self) -> str:
        chosen = [
            f"{f.name}={getattr(self, f.name)}"
            for f in attrs.fields(Tuning)
            if f.name != "per_kernel"
        ]
        chosen = [c for c in chosen if not c.endswith("=None")]
        own = [f"kernel {name}: {choices.describe()}" for name, choices in self.per_kernel]
        if not own:
            return ", ".join(chosen) or "defaults"
        return "; ".join([", ".join(chosen), *own] if chosen else own)


@attrs.frozen
class ChannelCut:
    """An input that each channel launch gets a part of: `chunk` long along `axis`, from the
    launch's first output channel times numerator / denominator (a weight's output-channel
    axis: 1 / 1; a grouped convolution's input channels: C_in / C_out, whole groups)."""

    name: str
    axis: int
    chunk: int
    numerator: int = 1
    denominator: int = 1


@attrs.frozen
class ChannelLaunches:
    """Within each launch along axis 0, `count` launches on `chunk` consecutive output
    channels: axis 1 of every output and a part of each of `inputs` (for a convolution
    whose one sample is still too big to verify)."""

    count: int
    chunk: int
    inputs: tuple[ChannelCut, ...]

    @property
    def extent(self) -> int:
        return self.count * self.chunk

    @property
    def group_input_ratio(self) -> fractions.Fraction | None:
        """Input channels per output channel when some input is cut by groups: a launch's
        groups' first input channel is its first output channel times this."""
        for part in self.inputs:
            if part.numerator != part.denominator:
                return fractions.Fraction(part.numerator, part.denominator)
        return None

    def cut(self, name: str) -> ChannelCut | None:
        return next((c for c in self.inputs if c.name == name), None)


@attrs.frozen
class LaunchCut:
    """One axis of a tensor that `forward` cuts per launch: its part starts at the launch
    loop's `variable` and is `chunk` long, of `extent` in all."""

    axis: int
    variable: str
    chunk: int
    extent: int


# The first input channel of a channel launch of a grouped convolution (see ChannelCut)
GROUP_INPUT_VARIABLE = "channel_in"
# forward's loop over row launches (see RowLaunches)
ROW_VARIABLE = "row"


@attrs.frozen
class RowLaunches:
    """Within each launch along axis 0 (one sample), `count` launches on `chunk` consecutive
    rows of the outputs' axis 2 (a convolution's first spatial axis), for a convolution
    whose one sample, even one output channel of it, is too big to verify: each launch
    reads the whole sample (its taps' views start `chunk` rows further per launch) and
    writes its rows to a buffer of their own, which `forward` copies into the output (a
    part along axis 2 is not contiguous). The kernel's factory takes the launch's first row
    as its argument `variable`."""

    count: int
    chunk: int
    variable: str = "first_row"

    @property
    def extent(self) -> int:
        return self.count * self.chunk

    @property
    def firsts(self) -> range:
        """Every launch's first row."""
        return range(0, self.extent, self.chunk)


@attrs.frozen
class Launches:
    """`forward` launches the kernel `count` times, each on `chunk` consecutive indices of
    axis 0 of every output and of the `sliced` inputs (the other inputs go whole to every
    launch), and each of those `channels.count` or `rows.count` times when set (one or the
    other). The kernel's shapes are one launch's."""

    count: int
    chunk: int
    sliced: tuple[str, ...]
    channels: ChannelLaunches | None = None
    rows: RowLaunches | None = None

    @property
    def extent(self) -> int:
        return self.count * self.chunk

    @property
    def total(self) -> int:
        """Launches in all."""
        within = self.channels or self.rows
        return self.count * (1 if within is None else within.count)

    def cuts(self, tensor: Tensor) -> tuple[LaunchCut, ...]:
        """The axes of `tensor` each launch gets a chunk of, in axis order."""
        batch = LaunchCut(0, "start", self.chunk, self.extent)
        channels = self.channels
        if isinstance(tensor, Output):
            if self.rows is not None:
                rows = self.rows
                return (batch, LaunchCut(2, ROW_VARIABLE, rows.chunk, rows.extent))
            if channels is None:
                return (batch,)
            return (batch, LaunchCut(1, "channel", channels.chunk, channels.extent))
        cuts = [batch] if tensor.name in self.sliced else []
        part = None if channels is None else channels.cut(tensor.name)
        if part is not None:
            assert channels is not None
            extent = channels.extent * part.numerator // part.denominator
            variable = "channel" if part.numerator == part.denominator else GROUP_INPUT_VARIABLE
            cuts.append(LaunchCut(part.axis, variable, part.chunk, extent))
        return tuple(cuts)


@attrs.frozen
class Recurrence:
    """A spec's time loop (`for t in range(T)`): `step` is the kernel of one step, which
    `forward` runs `count` times. Its inputs are each sequence's step (`sliced`: step
    input, the input whose first axis it indexes), each carried value (`carried`: step
    input, the step output holding its next value, the input it starts as) and the spec's
    other inputs; its outputs, each step's slice of an output (`stacked`: step output,
    output) and the carried values' next ones. `final`: outputs holding a carried value
    after the last step (output, step input)."""

    variable: str
    count: int
    step: Kernel
    sliced: tuple[tuple[str, str], ...]
    carried: tuple[tuple[str, str, str], ...]
    stacked: tuple[tuple[str, str], ...]
    final: tuple[tuple[str, str], ...]


@attrs.frozen
class Kernel:
    name: str
    dims: tuple[Dim, ...]
    params: tuple[Param, ...]
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    body: tuple[Stmt, ...]
    schedule: Schedule | None = None
    decisions: tuple[str, ...] = ()  # lowering choices worth stating in the plan
    program: Program | None = None  # the schedule materialised into instructions
    launches: Launches | None = None  # set by the launches pass when one launch is too big
    modules: tuple[Module, ...] = ()  # the torch modules whose parameters are weights
    containers: tuple[Container, ...] = ()  # the modules holding others or no state
    # ModelNew's state in the order it is created (declaration order, instances inlined):
    # container and module paths, the own weights' state names
    created: tuple[str, ...] = ()
    tuning: Tuning | None = None  # plan choices other than the defaults (`ptodsl tune`'s)
    # Invariants a pass establishes and every later stage keeps (ptodsl/ir/verify.py checks
    # them wherever they are claimed): `legalize` leaves only forms of the target,
    # `merge_axes` only kernel-side values within the target's rank.
    target_forms: bool = False
    target_ranks: bool = False
    mode: Mode | None = None  # the mode a spec whose result depends on it is lowered for
    # the spec's time loop: the body holds it unrolled (what it computes), `recurrence`
    # one step as a kernel of its own (what is lowered)
    recurrence: Recurrence | None = None

    def free_name(self, name: str, taken: frozenset[str] = frozenset()) -> str:
        """`name`, or `name2`, `name3`, ... where the spec uses it (einsum-style dims `i`,
        `j`, `k` are welcome in a spec) or it is `taken`."""
        numbered = (f"{name}{n}" for n in itertools.count(2))
        used = self.spec_names | taken
        return next(c for c in itertools.chain((name,), numbered) if c not in used)

    @property
    def launch_count(self) -> int:
        """The launches `forward` makes: the kernel's, and its staging launches (one per
        chunk of samples, before that chunk's channel launches, or one per channel launch)."""
        launches = self.launches
        staging = 0 if self.program is None else len(self.program.staging)
        if launches is None:
            return 1 + staging
        stagings = launches.total if self.stages_per_channel_launch else launches.count
        return launches.total + stagings * staging

    @property
    def stages_per_channel_launch(self) -> bool:
        """Whether the channel launches cut a staging launch's source (a grouped
        convolution's input): each channel launch then stages its own part."""
        channels = None if self.launches is None else self.launches.channels
        staging = () if self.program is None else self.program.staging
        return channels is not None and any(channels.cut(s.source) for s in staging)

    def launch_cuts(self, tensor: Tensor) -> tuple[LaunchCut, ...]:
        """The axes of `tensor` each launch gets only a chunk of (none without launches)."""
        return () if self.launches is None else self.launches.cuts(tensor)

    def forward_shape(self, tensor: Tensor) -> tuple[int, ...]:
        """The shape `forward` takes or returns: a cut axis is all launches' extent."""
        shape = list(tensor.declared_shape)
        for cut in self.launch_cuts(tensor):
            shape[cut.axis] = cut.extent
        return tuple(shape)

    def input(self, name: str) -> Input:
        return next(i for i in self.inputs if i.name == name)

    @property
    def spec_names(self) -> frozenset[str]:
        """Every name the spec declares (dims, params, tensors, lets): generated code keeps
        them as written and names its own variables around them."""
        names = {d.name for d in self.dims} | {p.name for p in self.params}
        names |= {t.name for t in (*self.inputs, *self.outputs)}
        return frozenset(names | {s.name for s in self.body if isinstance(s, Let)})

    @property
    def init_params(self) -> tuple[Param, ...]:
        """`ModelNew.__init__`'s arguments, in declaration order."""
        return tuple(p for p in self.params if not p.forward)

    @property
    def forward_params(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.forward)

    @property
    def kernel_params(self) -> tuple[Param, ...]:
        """The params the kernel factory is built for (fixed ones are only asserted, shadowed
        ones only start a weight)."""
        return tuple(p for p in self.params if not (p.fixed or p.shadowed))

    @property
    def tensor_arguments(self) -> tuple[Input, ...]:
        """The inputs `forward` takes as tensors: all but the weights (and twins)."""
        return tuple(t for t in self.inputs if t.init is None and t.twin_of is None)

    @property
    def weights(self) -> tuple[Input, ...]:
        """The weights in declaration order, the order ModelNew creates them in."""
        return tuple(t for t in self.inputs if t.is_weight and t.twin_of is None)

    @property
    def buffer_inputs(self) -> tuple[Input, ...]:
        """The buffers the kernel reads (eval mode's running statistics, carried tensors)."""
        return tuple(t for t in self.inputs if isinstance(t.init, ModuleBuffer | Carried))

    @property
    def dropout_masks(self) -> tuple[Input, ...]:
        """The masks forward draws, in the order it draws them."""
        return tuple(t for t in self.inputs if isinstance(t.init, DropoutMask))

    @property
    def updated_buffers(self) -> tuple[str, ...]:
        """The module buffers (state_dict names) training mode's outputs update, in order."""
        return tuple(o.updates for o in self.outputs if o.updates is not None)

    @property
    def returned_outputs(self) -> tuple[Output, ...]:
        """The outputs forward returns (the others update module buffers)."""
        return tuple(o for o in self.outputs if o.updates is None)

    @property
    def weights_in_torch_order(self) -> tuple[Input, ...]:
        """The weights as `Module.parameters()` lists them: depth first, a module's own
        parameters before its submodules', each submodule in the order it was assigned."""
        order = self.torch_order()
        return tuple(sorted(self.weights, key=lambda w: order(w.state_name)))

    def torch_order(self) -> Callable[..., tuple[tuple[int, int], ...]]:
        """A sort key placing a state_dict entry (`attn.c_attn.weight`, `buffer=True` for a
        buffer) where torch lists it: by the creation order of the modules on its path;
        own parameters, then own buffers, then submodules."""
        created = {path: index for index, path in enumerate(self.created)}

        def key(state_name: str, buffer: bool = False) -> tuple[tuple[int, int], ...]:
            owner = state_name.rpartition(".")[0]
            levels, path = [], ""
            for segment in owner.split(".") if owner else ():
                path = f"{path}.{segment}" if path else segment
                # a submodule a torch module's constructor builds (MultiheadAttention's
                # `out_proj`) is not the spec's: after its owner's own parameters
                levels.append((2, created.get(path, 0)))
            return (*levels, (1 if buffer else 0, 0))

        return key

    def map_values(self, transform: Callable[[Expr], Expr]) -> Kernel:
        """The kernel with `transform` applied to every statement's whole expression."""
        body = tuple(attrs.evolve(stmt, value=transform(stmt.value)) for stmt in self.body)
        return attrs.evolve(self, body=body)

    def map_body(self, rewrite: Callable[[Expr], Expr]) -> Kernel:
        """The kernel with `rewrite` applied bottom-up to every node of every statement."""
        return self.map_values(lambda value: map_expr(value, rewrite))


# ---- printing ----------------------------------------------------------------------------


def format_number(value: float) -> str:
    """The shortest literal that reads back as the same float (`repr` round-trips); `inf`
    and `-inf` as a spec writes them."""
    if math.isnan(value):
        raise ValueError(f"non-finite constant {value}")
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(float(value))
    return text


def product_shape(matmul: Op) -> tuple[int, ...]:
    """The shape the cube computes, from the operands' layouts and transpose flags (the
    matmul's own type may split its axes or add axes of size 1 for the kernel's frame)."""
    a, b = (operand.type.shape for operand in matmul.operands)
    if matmul.attrs.a_trans:
        a = (*a[:-2], a[-1], a[-2])
    if matmul.attrs.b_trans:
        b = (*b[:-2], b[-1], b[-2])
    return (*a[:-1], b[-1])


def is_cube_matrix(operand: Expr) -> bool:
    """A matmul operand the kernel computes, seen as its [M, K] matrix: align_axes wraps such
    operands in a reshape (and leaves no other reshape before materialise)."""
    return isinstance(operand, Op) and operand.op == "reshape"


def regroup(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[tuple[int, ...], ...]]:
    """A reshape of `old` to `new` (equal element counts) as runs of axes with equal
    products: `(old_axes, new_axes)` pairs in order. A run is one axis on either side (kept),
    one old axis split, several old axes merged, an old axis of size 1 dropped (no new axes)
    or a new one of size 1 added (no old axes); several on both sides regroup elements."""
    runs: list[tuple[tuple[int, ...], ...]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and j < len(new) and old[i] == new[j]:
            runs.append(((i,), (j,)))
            i, j = i + 1, j + 1
        elif i < len(old) and old[i] == 1:
            runs.append(((i,), ()))
            i += 1
        elif j < len(new) and new[j] == 1:
            runs.append(((), (j,)))
            j += 1
        else:
            old_run, new_run = [i], [j]
            old_product, new_product = old[i], new[j]
            i, j = i + 1, j + 1
            while old_product != new_product:
                if old_product < new_product:
                    old_run.append(i)
                    old_product *= old[i]
                    i += 1
                else:
                    new_run.append(j)
                    new_product *= new[j]
                    j += 1
            runs.append((tuple(old_run), tuple(new_run)))
    return runs


def splits_into(natural: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether `shape` is `natural` with axes split into runs of consecutive axes (and axes
    of size 1 anywhere): the same elements in the same row-major order."""
    position = 0
    for size in natural:
        product = 1
        while position < len(shape) and (product < size or shape[position] == 1):
            product *= shape[position]
            position += 1
            if product == size and (position == len(shape) or shape[position] != 1):
                break
        if product != size:
            return False
    return all(size == 1 for size in shape[position:])


def format_value(value: ParamValue) -> str:
    """A param's value as a Python literal: ints and tuples as written, floats round-tripped."""
    if isinstance(value, float):
        return format_number(value)
    return repr(value)


def format_expr(expr: Expr) -> str:
    if isinstance(expr, Const):
        return format_number(expr.value)
    if isinstance(expr, Ref):
        return expr.name
    arguments = [format_expr(operand) for operand in expr.operands]
    arguments += [f"{name}={value!r}" for name, value in attribute_items(expr.attrs)]
    return f"{expr.op}({', '.join(arguments)})"


def format_kernel(kernel: Kernel) -> str:
    lines = [f"kernel {kernel.name}"]
    if kernel.mode is not None:
        lines.append(f"  mode {kernel.mode.value}")
    if kernel.launches is not None:
        launches = kernel.launches
        sliced = ", ".join((*launches.sliced, *(o.name for o in kernel.outputs)))
        lines.append(f"  launches {launches.count} x {launches.chunk} along axis 0 of {sliced}")
        if launches.channels is not None:
            channels = launches.channels
            parts = [f"{c.name} (axis {c.axis})" for c in channels.inputs]
            cut = ", ".join((*parts, *(f"{o.name} (axis 1)" for o in kernel.outputs)))
            lines.append(
                f"    each in {channels.count} x {channels.chunk} output channels of {cut}"
            )
    if kernel.dims:
        lines.append("  dims " + ", ".join(f"{d.name} = {d.size}" for d in kernel.dims))
    for param in kernel.params:
        default = "" if param.default is None else f" = {format_value(param.default)}"
        kind = "fixed param" if param.fixed else "forward param" if param.forward else "param"
        kind = "shadowed param" if param.shadowed else kind
        lines.append(f"  {kind} {param.name}{default}")
    for module in kernel.modules:
        arguments = ", ".join(f"{name}={format_value(v)}" for name, v in module.arguments)
        lines.append(f"  module {module.name} = {module.kind}({arguments})")
    for tensor in kernel.inputs:
        domain = "" if tensor.domain == "real" else f" in {tensor.domain}"
        if tensor.extent is not None:
            domain += f"({tensor.extent})"
        kind = "input" if tensor.init is None else f"weight ({tensor.init})"
        if isinstance(tensor.init, ModuleBuffer):
            kind = f"buffer ({tensor.init})"
        elif isinstance(tensor.init, DropoutMask):
            kind = f"input ({tensor.init})"
        elif isinstance(tensor.init, Carried):
            kind = f"state ({tensor.init})"
        elif isinstance(tensor.init, Registered):
            kind = f"buffer ({tensor.init})"
        if tensor.twin_of is not None:
            kind += f" (twin of {tensor.twin_of})"
        lines.append(f"  {kind} {tensor.name}: {tensor.type}{_as_kernel(tensor)}{domain}")
    for tensor in kernel.outputs:
        updates = "" if tensor.updates is None else f" (updates {tensor.updates})"
        lines.append(f"  output {tensor.name}: {tensor.type}{_as_kernel(tensor)}{updates}")
    for stmt in kernel.body:
        if isinstance(stmt, Let):
            lines.append(f"  let {stmt.name}: {stmt.value.type} = {format_expr(stmt.value)}")
        else:
            value = format_expr(stmt.value)
            lines.append(f"  {stmt.output} <- {'clone(' + value + ')' if stmt.clone else value}")
    for index, phase in enumerate(kernel.schedule.phases if kernel.schedule else ()):
        loop = phase.loop
        looped = ""
        if loop:
            looped = f", loop on axis {loop.axis}: {loop.count} x {loop.chunk} + tail {loop.tail}"
        tile = (
            f"cube tile {[list(t) for t in phase.cube]}"
            if phase.cube
            else "a convolution"
            if phase.conv
            else f"tile {list(phase.tile)}"
        )
        if phase.k_loop:
            k_loop = phase.k_loop
            looped += f", K loop: {k_loop.count} x {k_loop.chunk} + tail {k_loop.tail}"
        if phase.accumulate_tile:
            looped += f", accumulated under tile {list(phase.accumulate_tile)}"
        lines.append(
            f"  phase {index}: statements {list(phase.statements)} over {list(phase.shape)}, "
            f"{tile}{looped}"
        )
        for partial in phase.partials:
            lines.append(
                f"    statement {partial.statement}: partial results {list(partial.shape)}, "
                f"combined under tile {list(partial.tile)}"
            )
        if phase.conv is not None:
            plan, rows = phase.conv, phase.conv.rows
            cube = [list(extents) for extents in plan.cube]
            cores = "depthwise, vector cores" if plan.vector else f"cube tile {cube}"
            staged = " by a launch of its own" if plan.staged else ""
            lines.append(
                f"    convolution: batch loop {plan.batch} x 1, rows loop on axis {rows.axis}: "
                f"{rows.count} x {rows.chunk} + tail {rows.tail}; pad {list(plan.front)} + "
                f"{list(plan.back)}{staged}; {cores}"
            )
            lines += [f"    tile {list(tile)} for {list(shape)}" for shape, tile in plan.tiles]
        for step in phase.window or ():
            exchanged = ", last two axes exchanged" if step.transposed else ""
            lines.append(
                f"    window axis {step.axis}{exchanged}: pad {step.front} + {step.back}, "
                f"split {list(step.split)}, taps {[list(t) for t in step.taps]}, "
                f"{step.extent} windows; tiles {list(step.frame_tile)} / "
                f"{list(step.split_tile)} / {list(step.result_tile)}"
            )
    if kernel.program is not None:
        lines.append("  materialised:")
        for staging in kernel.program.staging:
            lines.append(
                f"    staging launch for phase {staging.phase}: {staging.source} -> "
                f"{staging.buffer}: {staging.type}"
            )
            lines += format_instructions(staging.instructions, "      ")
        for code in kernel.program.phases:
            lines.append(f"    phase {code.phase}:")
            lines += format_instructions(code.instructions, "      ")
    return "\n".join(lines) + "\n"


def _as_kernel(tensor: Tensor) -> str:
    if tensor.kernel_dims is None:
        return ""
    return f" as [{', '.join(map(str, tensor.kernel_shape))}]"


# ---- schedule ----------------------------------------------------------------------------


@attrs.frozen
class Loop:
    """`count` iterations of `chunk` indices along kernel axis `axis`, then a `tail` block if
    the chunks do not cover the axis exactly. Every view size is a compile-time constant."""

    count: int
    chunk: int
    tail: int
    axis: int = 0


@attrs.frozen
class Partial:
    """A `let` whose reduction a loop splits: one partial result per loop block, kept in a
    tensor of `shape` (the reduced axis has one entry per block) and combined after the
    loop under the vector tile `tile`."""

    statement: int
    shape: tuple[int, ...]
    tile: tuple[int, ...]


@attrs.frozen
class WindowStep:
    """One axis of a window phase, on a block of shape `shape` (the frame's rank; with the
    last two axes exchanged first when `transposed`, so that the window never slides along
    the contiguous axis, whose one-element views PyPTO copies element row by row): the
    axis is padded by `front` and `back` fill values under `frame_tile`, so that its length
    is `rows * stride`; reshaped to `split` = [outer, rows, stride, inner], where tap j is
    the view [outer, extent, 1, inner] at row `taps[j][0]`, column `taps[j][1]`, under
    `split_tile`; the taps combine into [outer, extent, 1, inner], reshaped back to the
    block with the axis `extent` long (and exchanged back) under `result_tile`."""

    axis: int  # the windowed axis, in the frame's order
    shape: tuple[int, ...]  # the block the step reads, in the frame's order
    front: int
    back: int
    split: tuple[int, int, int, int]
    taps: tuple[tuple[int, int], ...]
    extent: int
    frame_tile: tuple[int, ...]
    split_tile: tuple[int, int, int, int]
    result_tile: tuple[int, ...]  # of the result in the working layout
    transposed: bool = False
    swap_tile: tuple[int, ...] | None = None  # of the block, for the exchange before

    @property
    def padded(self) -> tuple[int, ...]:
        """The padded block in the working layout."""
        at = self.working_axis
        return (
            self.working_shape[:at]
            + (self.split[1] * self.split[2],)
            + self.working_shape[at + 1 :]
        )

    @property
    def working_result(self) -> tuple[int, ...]:
        at = self.working_axis
        return self.working_shape[:at] + (self.extent,) + self.working_shape[at + 1 :]

    @property
    def result(self) -> tuple[int, ...]:
        """The step's result in the frame's order."""
        return self.shape[: self.axis] + (self.extent,) + self.shape[self.axis + 1 :]

    @property
    def working_axis(self) -> int:
        """The windowed axis in the layout the step pads and splits."""
        return len(self.shape) - 2 if self.transposed else self.axis

    @property
    def working_shape(self) -> tuple[int, ...]:
        """The block in that layout."""
        return swap_last(self.shape) if self.transposed else self.shape


@attrs.frozen
class ConvPlan:
    """How a convolution phase runs, as an implicit GEMM on the cube: a loop over the batch
    (`batch` iterations, one element each) around a loop `rows` over the output's first
    spatial axis. Once, each group's [C_out/groups, K] weight matrix is read from the weight
    [C_out * C_in/groups, taps] (K = C_in/groups * taps; a transposed convolution's [C_in,
    C_out/groups, taps] is exchanged to [C_out/groups, C_in/groups, taps] first). Per batch
    element the input is spaced (a transposed convolution's stride: zeros between its
    elements) and padded by `front` and `back` zeros per spatial axis, when any of that
    applies, into a [C_in, *padded] value; per block of rows and group, each tap's view of
    it, [C_in/groups, rows, *rest], is stacked into one [K, rows * rest] matrix (in the
    weight's tap order: a transposed convolution's flipped), which one matmul multiplies by
    the group's weight matrix, and the [C_out/groups, rows, *rest] block is assembled into
    the result. `tiles` gives the vector tile of every shape the phase computes on."""

    batch: int
    rows: Loop
    front: tuple[int, ...]
    back: tuple[int, ...]
    skip: tuple[int, ...]  # per spatial axis, where the first tap starts in the padded input
    cube: tuple[tuple[int, int], ...]
    tiles: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]
    # a depthwise convolution on the vector cores: per tap, the view of every channel times
    # the tap's column of the weight, summed (no matmuls of one channel)
    vector: bool = False
    # the input spaced and padded by a launch of its own into device memory, which the
    # taps view (see Staging)
    staged: bool = False

    def tile(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return dict(self.tiles)[shape]


def swap_last(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape[:-2] + (shape[-1], shape[-2])


@attrs.frozen
class Phase:
    """Statements that run under one vector tile shape, over one iteration shape."""

    statements: tuple[int, ...]
    shape: tuple[int, ...]
    tile: tuple[int, ...]
    loop: Loop | None = None
    cube: tuple[tuple[int, int], ...] | None = None  # a matmul phase's cube tiles (m, k, n)
    k_loop: Loop | None = None  # a matmul contracting more than PyPTO's inner-axis limit
    partials: tuple[Partial, ...] = ()  # reductions the loop splits, combined after it
    accumulate_tile: tuple[int, ...] | None = None  # vector tile of a K loop's accumulation
    window: tuple[WindowStep, ...] | None = None  # a window phase's steps, one per axis
    conv: ConvPlan | None = None  # a convolution phase's plan

    @property
    def block_shape(self) -> tuple[int, ...]:
        """The shape one loop iteration (or the whole phase, without a loop) works on."""
        if self.loop is None:
            return self.shape
        axis = self.loop.axis
        return self.shape[:axis] + (self.loop.chunk,) + self.shape[axis + 1 :]

    @property
    def tail_tile(self) -> tuple[int, ...] | None:
        if self.loop is None or not self.loop.tail:
            return None
        axis = self.loop.axis
        return self.tile[:axis] + (min(self.tile[axis], self.loop.tail),) + self.tile[axis + 1 :]


@attrs.frozen
class Schedule:
    phases: tuple[Phase, ...]


# ---- materialised schedule ---------------------------------------------------------------
#
# What `materialise` makes of the schedule: per phase, the instructions the kernel runs, with
# every view, temporary, block-local name, offset and accumulation spelled out, so that
# codegen only prints them.


@attrs.frozen
class Affine:
    """`variable * scale + constant`: an offset that steps with a loop variable by other
    than the block size (a convolution's channels per batch element, its taps)."""

    variable: str
    scale: int = 1
    constant: int = 0
    # a second variable added (a row launch's first row: its views are the first launch's,
    # that many rows further)
    shift: str | None = None

    def __str__(self) -> str:
        text = self.variable if self.scale == 1 else f"{self.variable} * {self.scale}"
        text = text if self.shift is None else f"{text} + {self.shift}"
        return text if not self.constant else f"{text} + {self.constant}"

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable,) if self.shift is None else (self.variable, self.shift)

    def at(self, values: dict[str, int]) -> int:
        shift = 0 if self.shift is None else values[self.shift]
        return values[self.variable] * self.scale + shift + self.constant


# A constant, a loop variable (`i`, `offset`) of an enclosing loop, or an affine form of one.
Index = int | str | Affine


@attrs.frozen
class SetVecTiles:
    """`pypto.set_vec_tile_shapes`: the vector tile of the work that follows."""

    tile: tuple[int, ...]
    purpose: str | None = None  # what the tile is for, when it is not the phase's own work


@attrs.frozen
class SetCubeTiles:
    """`pypto.set_cube_tile_shapes`: the [L0, L1] extents of m, k and n of the matmuls that
    follow."""

    m: tuple[int, int]
    k: tuple[int, int]
    n: tuple[int, int]


@attrs.frozen
class Allocate:
    """A full-size temporary, written block by block (`Assemble`) by the loop after it."""

    name: str
    type: TensorType
    span: Span


@attrs.frozen
class View:
    """`name` reads the block of `source` of shape `type.shape` starting at `offsets`."""

    name: str
    source: str
    type: TensorType
    offsets: tuple[Index, ...]


@attrs.frozen
class Assign:
    """Binds `name` to `value`, whose names are block-local where the block reads a part."""

    name: str
    value: Expr
    span: Span


@attrs.frozen
class StoreOutput:
    """Writes a whole output at once (`output[:] = value`)."""

    output: str
    value: Expr
    span: Span


@attrs.frozen
class Assemble:
    """Writes the block `part` into the larger tensor `into`, starting at `offsets`."""

    part: str
    into: str
    offsets: tuple[Index, ...]


@attrs.frozen
class Accumulate:
    """Adds a block's partial reduction `part` into the whole `output`, combined as the op
    `reduction`'s registry entry says. The first block to run writes the part instead: the
    tail when the loop has one (`overwrites`), else iteration 0 of the loop variable
    `first_iteration`; with neither, every run combines."""

    output: str
    part: str
    reduction: str
    span: Span
    first_iteration: str | None = None
    overwrites: bool = False


@attrs.frozen
class Comment:
    """A note for the reader of the generated kernel."""

    text: str


@attrs.frozen
class BlockLoop:
    """`for index in pypto.loop(0, count)`: `body` runs on block `index`, the `chunk`
    indices of kernel axis `axis` starting at `offset` (= index * chunk). `tail`, on the
    last `tail_size` indices at the constant offset count * chunk, runs once before the
    loop: pypto 0.2.0 drops what a block after a loop assembles into a kernel-local tensor
    the loop assembles into too. Names the body or the tail binds are local to it."""

    name: str
    axis: int
    count: int
    chunk: int
    body: tuple[Instruction, ...]
    tail_size: int = 0
    tail: tuple[Instruction, ...] = ()
    index: str = "i"
    offset: str = "offset"


Instruction = (
    SetVecTiles
    | SetCubeTiles
    | Allocate
    | View
    | Assign
    | StoreOutput
    | Assemble
    | Accumulate
    | Comment
    | BlockLoop
)


@attrs.frozen
class PhaseCode:
    """The instructions of the schedule's phase number `phase`."""

    phase: int
    instructions: tuple[Instruction, ...]


@attrs.frozen
class Staging:
    """A launch of its own before the kernel's: `instructions` read input `source` and write
    `buffer` whole, a tensor in device memory the kernel then takes as an input (a
    convolution's input spaced and padded with zeros: pypto charges views of a padded value
    built inside the kernel some 50 times more, and its simulator runs out of workspace on
    the larger ones)."""

    phase: int  # the convolution phase that reads the buffer
    buffer: str
    type: TensorType
    source: str
    instructions: tuple[Instruction, ...]


@attrs.frozen
class Program:
    phases: tuple[PhaseCode, ...]
    staging: tuple[Staging, ...] = ()


def format_indexes(offsets: tuple[Index, ...]) -> str:
    return "[" + ", ".join(map(str, offsets)) + "]"


def format_instructions(instructions: tuple[Instruction, ...], indent: str) -> list[str]:
    """A readable listing of materialised instructions, a loop's blocks indented."""
    lines = []
    for instruction in instructions:
        if isinstance(instruction, BlockLoop):
            loop = instruction
            if loop.tail_size:  # runs first
                at = loop.count * loop.chunk
                lines.append(
                    f"{indent}tail: the last {loop.tail_size} of axis {loop.axis}, at {at}"
                )
                lines += format_instructions(loop.tail, indent + "  ")
            lines.append(
                f"{indent}loop {loop.name} on axis {loop.axis}: {loop.index} in 0..{loop.count}, "
                f"{loop.offset} = {loop.index} * {loop.chunk}"
            )
            lines += format_instructions(loop.body, indent + "  ")
        else:
            lines.append(indent + _format_instruction(instruction))
    return lines


def _format_instruction(instruction: Instruction) -> str:
    match instruction:
        case SetVecTiles(tile, purpose):
            return f"set vector tiles {list(tile)}" + (f" ({purpose})" if purpose else "")
        case SetCubeTiles(m, k, n):
            return f"set cube tiles m {list(m)}, k {list(k)}, n {list(n)}"
        case Allocate(name, type_):
            return f"allocate {name}: {type_}"
        case View(name, source, type_, offsets):
            return f"view {name}: {type_} of {source} at {format_indexes(offsets)}"
        case Assign(name, value):
            return f"let {name}: {value.type} = {format_expr(value)}"
        case StoreOutput(output, value):
            return f"{output} <- {format_expr(value)}"
        case Assemble(part, into, offsets):
            return f"assemble {part} into {into} at {format_indexes(offsets)}"
        case Accumulate(output, part, reduction, _, first, overwrites):
            first_writes = f", written when {first} == 0" if first else ""
            first_writes = ", written (the first block)" if overwrites else first_writes
            return f"accumulate {part} into {output} by {reduction}{first_writes}"
        case Comment(text):
            return f"# {text}"
    raise TypeError(f"not an instruction: {instruction!r}")
