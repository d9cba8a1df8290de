"""What ptodsl knows about module state: the torch modules a weight can be (`weight fc:
linear(K, N)`), one registry entry per kind as `ops` is for ops, and how ModelNew creates
every weight so that, under one seed, it draws what the module it replaces draws."""

from __future__ import annotations

import ast
import enum
import math
from collections.abc import Callable, Mapping

import attrs

from ptodsl.emission import pytree
from ptodsl.frontend import syntax as s
from ptodsl.ir import nodes as ir


class ArgumentKind(enum.Enum):
    SIZE = "a size"  # an integer, a dim or an `int` param (`in_features`)
    # a size for every spatial axis, or a list of one each (`kernel_size=[3, 5]`)
    SIZES = "a size or a list of sizes, one per spatial axis"
    SHAPE = "a size or a list of sizes (a shape)"  # LayerNorm's normalized_shape
    FLAG = "`true` or `false`"
    NUMBER = "a number"


@attrs.frozen
class Argument:
    name: str
    kind: ArgumentKind
    default: ir.ParamValue | None = None  # None: required


Arguments = Mapping[str, ir.ParamValue]


@attrs.frozen
class Parameter:
    """One nn.Parameter a module creates: its attribute name, its shape as argument names
    (or computed from the arguments), and the flag arguments it exists under (a
    LayerNorm's bias under two)."""

    attribute: str
    shape: tuple[str, ...] | Callable[[Arguments], tuple[int, ...]]
    present_if: tuple[str, ...] = ()


@attrs.frozen
class Buffer:
    """One buffer a module registers (BatchNorm's running statistics): state_dict holds
    it beside the parameters, so a drop-in module must have it too."""

    attribute: str
    shape: tuple[str, ...]  # argument names; () is a 0-d buffer
    dtype: str  # torch's name (`float32`, `int64`)
    present_if: tuple[str, ...] = ()


@attrs.frozen
class Application:
    """`fc(x)` in a spec: the operand and its shape as checked, the module's parameters as
    names and its arguments' values."""

    operand: s.Expr
    shape: tuple[int, ...]
    parameters: Mapping[str, s.Expr]
    arguments: Arguments
    span: s.Span
    # the module's buffers the kernel reads (`running_mean`), by attribute
    buffers: Mapping[str, s.Expr] = attrs.field(factory=dict)
    # the operands after the first (MultiheadAttention's key and value) and their shapes
    others: tuple[s.Expr, ...] = ()
    other_shapes: tuple[tuple[int, ...], ...] = ()
    # binds a value the expansion reads several times to a hidden let, computed once
    bind: Callable[[s.Expr], s.Expr] = lambda value: value

    def call(self, function: str, *args: s.Expr, **keywords: s.Expr) -> s.Expr:
        """A builtin call the expansion makes (never a module of the spec's)."""
        given = tuple(s.Keyword(k, v, self.span) for k, v in keywords.items())
        return s.Call(function, self.span, args, given, self.span, builtin=True)

    def binary(self, op: str, lhs: s.Expr, rhs: s.Expr) -> s.Expr:
        return s.Binary(op, lhs, rhs, self.span)

    def literal(self, value: ir.ParamValue) -> s.Expr:
        return _literal(value, self.span)


@attrs.frozen
class ModuleDef:
    name: str  # the spelling in a spec
    torch: str  # the constructor ModelNew calls, which draws the initial values itself
    arguments: tuple[Argument, ...]  # torch's, in torch's order
    parameters: tuple[Parameter, ...]  # in the order torch registers them
    # what `fc(x)` in a spec stands for, an expression (one per result, for `results`)
    apply: Callable[[Application], s.Expr | tuple[s.Expr, ...]]
    spatial: int = 0  # a convolution's spatial axes: every SIZES argument has one per axis
    # why these arguments cannot build the module (torch refuses them), or None
    invalid: Callable[[Arguments], str | None] | None = None
    # which of these arguments, valid to torch, ptodsl does not model yet, or None
    unsupported: Callable[[Arguments], str | None] | None = None
    buffers: tuple[Buffer, ...] = ()  # in the order torch registers them
    # why `fc(x)` cannot take an operand of this shape beyond its rank and channels, or None
    operand_invalid: Callable[[Arguments, tuple[int, ...]], str | None] | None = None
    operand_ranks: tuple[int, ...] = ()  # the ranks `fc(x)` takes (none: any)
    reads_operand_again: bool = False  # `apply` names the operand more than once
    # the argument counting the channels of an [N, C, ...] operand (a norm's), or None
    channels: str | None = None
    # the argument counting the features of the operand's last axis (a linear layer's), or
    # None: an operand whose last axis a spec splits (`linear(C, 4 * C)`'s [B, 4, C]
    # output) is merged back for it, as torch sees it
    features: str | None = None
    # A module with running statistics: `apply` is training mode's value (batch
    # statistics), `eval_apply` eval mode's (the running statistics, read as `buffers`),
    # `updates` training mode's new value of each running statistic. None: `fc(x)` is the
    # same in both modes, and a module with buffers but no `updates` cannot be applied.
    eval_apply: Callable[[Application], s.Expr] | None = None
    updates: Callable[[Application], dict[str, s.Expr]] | None = None
    # the axes of an operand of rank r that one batch statistic reduces (BatchNorm's all
    # but the channels, InstanceNorm's the positions)
    statistic_axes: Callable[[int], tuple[int, ...]] | None = None
    counts_batches: bool = False  # training mode counts `num_batches_tracked` (BatchNorm)
    operands: tuple[str, ...] = ("input",)  # what `fc(...)` takes, as torch names them
    # the values `fc(...)` returns as a tuple (`let out, _ = attn(q, k, v)`); none: one
    results: tuple[str, ...] = ()

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def present_parameters(self, arguments: Mapping[str, ir.ParamValue]) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if all(arguments[f] for f in p.present_if))

    def present_buffers(self, arguments: Mapping[str, ir.ParamValue]) -> tuple[Buffer, ...]:
        return tuple(b for b in self.buffers if all(arguments[f] for f in b.present_if))

    def operand_problem(self, arguments: Arguments, shape: tuple[int, ...]) -> str | None:
        """Why torch's module refuses an operand of this shape (as `channel_view` sees
        it: [N, C, *spatial] for a norm), or None."""
        ranks = self.operand_ranks
        if ranks and len(shape) not in ranks:
            return f"it takes rank-{' or '.join(map(str, sorted(ranks)))} tensors [N, C, ...]"
        channels = self.channels
        if channels is not None and (len(shape) < 2 or shape[1] != int(arguments[channels])):
            return f"axis 1 holds the channels, {channels} = {arguments[channels]}"
        return self.operand_invalid(arguments, shape) if self.operand_invalid else None


@attrs.frozen
class StatelessModule:
    """A torch module without state (`nn.ReLU`): in a `sequential` it takes its index, as
    in torch's, and applies `function` (None: the operand itself)."""

    torch: str
    function: str | None


STATELESS_MODULES = {
    "relu": StatelessModule("torch.nn.ReLU", "relu"),
    "tanh": StatelessModule("torch.nn.Tanh", "tanh"),
    "sigmoid": StatelessModule("torch.nn.Sigmoid", "sigmoid"),
    "identity": StatelessModule("torch.nn.Identity", None),
}
# Modules that hold others: in order (`sequential(...)`, members `0`, `1`, ...) or by name
# (`module_dict(c_fc=...)`); the class ModelNew builds for each.
CONTAINERS = {"sequential": "torch.nn.Sequential", "module_dict": "torch.nn.ModuleDict"}


def _linear(a: Application) -> s.Expr:
    product = a.binary("matmul", a.operand, s.Attribute(a.parameters["weight"], "T", a.span))
    if "bias" not in a.parameters:
        return product
    return a.binary("add", product, a.parameters["bias"])


_SIZE, _FLAG, _NUMBER = ArgumentKind.SIZE, ArgumentKind.FLAG, ArgumentKind.NUMBER
_SIZES, _SHAPE = ArgumentKind.SIZES, ArgumentKind.SHAPE


def _multihead_attention_apply(a: Application) -> tuple[s.Expr, s.Expr]:
    """`attn(query, key, value)` of nn.MultiheadAttention, as torch's
    multi_head_attention_forward computes it (need_weights, no masks): each operand
    projected by its third of `in_proj_weight` (one projection split in three when the
    three are one tensor, as torch's packed path), viewed as heads, the scaled queries'
    scores by the keys softmaxed, the values weighted by them, the heads joined and
    projected by `out_proj`. Its results: that output, and the weights averaged over the
    heads. Operands are [L, N, E] ([N, L, E] with batch_first); inside, [N, H, L, E / H]."""
    embed, heads = int(a.arguments["embed_dim"]), int(a.arguments["num_heads"])
    head_size, batch_first = embed // heads, bool(a.arguments["batch_first"])
    weight, bias = a.parameters["in_proj_weight"], a.parameters.get("in_proj_bias")

    def lits(*values: int) -> list[s.Expr]:
        return [a.literal(v) for v in values]

    def linear(x: s.Expr, w: s.Expr, b: s.Expr | None) -> s.Expr:
        product = a.binary("matmul", x, s.Attribute(w, "T", a.span))
        return product if b is None else a.binary("add", product, b)

    def third(x: s.Expr, part: int, axis: int = 0) -> s.Expr:
        """Third `part` of `x` along `axis` (torch's `chunk(3)`)."""
        return a.call(
            "split",
            x,
            a.literal(embed),
            axis=a.literal(axis),
            part=a.literal(part),
            parts=a.literal(3),
        )

    operands = (a.operand, *a.others)
    if all(_same_name(o, a.operand) for o in a.others):  # self-attention: one projection
        packed = a.bind(linear(a.operand, weight, bias))
        projected = [third(packed, part, axis=2) for part in range(3)]
    else:
        projected = [
            linear(x, third(weight, part), None if bias is None else third(bias, part))
            for part, x in enumerate(operands)
        ]
    query, key, value = projected
    query = a.binary("mul", query, a.literal(math.sqrt(1.0 / head_size)))

    def split_heads(x: s.Expr, shape: tuple[int, ...]) -> s.Expr:
        first, second = shape[:2]  # [N, L] with batch_first, else [L, N]
        viewed = a.call("reshape", x, *lits(first, second, heads, head_size))
        order = (0, 2, 1, 3) if batch_first else (1, 2, 0, 3)
        return a.bind(a.call("permute", viewed, *lits(*order)))

    shapes = (a.shape, *a.other_shapes)
    query, key, value = (
        split_heads(x, shape) for x, shape in zip((query, key, value), shapes, strict=True)
    )
    transposed = a.call("transpose", key, *lits(2, 3))
    scores = a.binary("matmul", query, transposed)
    weights = a.bind(a.call("softmax", scores, axis=a.literal(3)))
    joined = a.binary("matmul", weights, value)
    order = (0, 2, 1, 3) if batch_first else (2, 0, 1, 3)
    merged = a.call("reshape", a.call("permute", joined, *lits(*order)), *lits(*a.shape))
    output = linear(merged, a.parameters["out_proj.weight"], a.parameters.get("out_proj.bias"))
    return output, a.call("mean", weights, axis=a.literal(1))


def _same_name(one: s.Expr, other: s.Expr) -> bool:
    return isinstance(one, s.Name) and isinstance(other, s.Name) and one.id == other.id


def _multihead_attention_invalid(arguments: Arguments) -> str | None:
    embed, heads = int(arguments["embed_dim"]), int(arguments["num_heads"])
    if heads < 1 or embed % heads:
        return f"{heads} heads do not divide embed_dim = {embed}"
    return None


def _multihead_attention_unsupported(arguments: Arguments) -> str | None:
    if float(arguments["dropout"]) != 0.0:
        return f"dropout = {arguments['dropout']} on the attention weights"
    flag = next((f for f in ("add_bias_kv", "add_zero_attn") if arguments[f]), None)
    return None if flag is None else f"{flag} = true"


def _multihead_attention_operand_invalid(
    arguments: Arguments, shape: tuple[int, ...]
) -> str | None:
    if shape[-1] != int(arguments["embed_dim"]):
        return f"its last axis is not embed_dim = {arguments['embed_dim']}"
    return None


def per_axis(value: ir.ParamValue, spatial: int) -> tuple[int, ...]:
    """A SIZES argument with one value per spatial axis."""
    return value if isinstance(value, tuple) else (int(value),) * spatial


def _literal(value: ir.ParamValue, span: s.Span) -> s.Expr:
    if isinstance(value, tuple):
        return s.ListExpr(tuple(_literal(item, span) for item in value), span)
    return s.Number(float(value), str(value), span)


def _conv_apply(spatial: int, transposed: bool) -> Callable:
    """`conv(x)` of a nn.Conv*d (of a nn.ConvTranspose*d): the `conv` (`conv_transpose`)
    function with the module's geometry, and its bias added per output channel."""
    function = "conv_transpose" if transposed else "conv"
    keywords = ("stride", "padding", "dilation", "groups")
    keywords += ("output_padding",) if transposed else ()

    def apply(a: Application) -> s.Expr:
        given = {k: a.literal(a.arguments[k]) for k in keywords}
        value = a.call(function, a.operand, a.parameters["weight"], **given)
        if "bias" not in a.parameters:
            return value
        channels = a.literal((int(a.arguments["out_channels"]), *(1,) * spatial))
        return a.binary("add", value, a.call("reshape", a.parameters["bias"], channels))

    return apply


def _conv_weight(spatial: int, transposed: bool) -> Callable[[Arguments], tuple[int, ...]]:
    """nn.Conv*d's weight [C_out, C_in / groups, *kernel]; nn.ConvTranspose*d's
    [C_in, C_out / groups, *kernel]."""

    def shape(arguments: Arguments) -> tuple[int, ...]:
        kernel = per_axis(arguments["kernel_size"], spatial)
        groups = int(arguments["groups"])
        if transposed:
            return (
                int(arguments["in_channels"]),
                int(arguments["out_channels"]) // groups,
                *kernel,
            )
        return (int(arguments["out_channels"]), int(arguments["in_channels"]) // groups, *kernel)

    return shape


def _conv_invalid(spatial: int, transposed: bool) -> Callable[[Arguments], str | None]:
    def invalid(arguments: Arguments) -> str | None:
        for name, value in arguments.items():
            if isinstance(value, tuple) and len(value) != spatial:
                return f"`{name}` has {len(value)} values for {spatial} spatial axes"
        groups = int(arguments["groups"])
        for name in ("in_channels", "out_channels"):
            if groups < 1 or int(arguments[name]) % groups:
                return f"{groups} groups do not divide {name} = {arguments[name]}"
        if min(per_axis(arguments["kernel_size"], spatial)) < 1:
            return "every kernel size is at least 1"
        if transposed:
            padding = per_axis(arguments["output_padding"], spatial)
            stride = per_axis(arguments["stride"], spatial)
            dilation = per_axis(arguments["dilation"], spatial)
            if any(p >= max(s, d) for p, s, d in zip(padding, stride, dilation, strict=True)):
                return "output_padding must be smaller than the stride or the dilation (torch)"
        return None

    return invalid


def _conv_module(spatial: int, transposed: bool) -> ModuleDef:
    """nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d, with torch's arguments in its order."""
    geometry = [Argument("stride", _SIZES, 1), Argument("padding", _SIZES, 0)]
    if transposed:
        geometry += [Argument("output_padding", _SIZES, 0), Argument("groups", _SIZE, 1)]
        geometry += [Argument("bias", _FLAG, True), Argument("dilation", _SIZES, 1)]
    else:
        geometry += [Argument("dilation", _SIZES, 1), Argument("groups", _SIZE, 1)]
        geometry += [Argument("bias", _FLAG, True)]
    kind = "ConvTranspose" if transposed else "Conv"
    return ModuleDef(
        f"{'conv_transpose' if transposed else 'conv'}{spatial}d",
        f"torch.nn.{kind}{spatial}d",
        (
            Argument("in_channels", _SIZE),
            Argument("out_channels", _SIZE),
            Argument("kernel_size", _SIZES),
            *geometry,
        ),
        (
            Parameter("weight", _conv_weight(spatial, transposed)),
            Parameter("bias", ("out_channels",), ("bias",)),
        ),
        apply=_conv_apply(spatial, transposed),
        spatial=spatial,
        invalid=_conv_invalid(spatial, transposed),
    )


_EPS = Argument("eps", _NUMBER, 1e-5)


def _statistics(a: Application, x: s.Expr, axes: tuple[int, ...]) -> tuple[s.Expr, s.Expr]:
    """`mean` and the biased `var` of `x` over `axes` (negative: from the end), keeping
    them; the normalisation and the running statistics' update write them alike, so the
    passes compute them once."""
    numbers = [s.Unary("neg", a.literal(-i), a.span) if i < 0 else a.literal(i) for i in axes]
    axis = s.ListExpr(tuple(numbers), a.span)
    keepdim = s.Bool(True, a.span)
    mean = a.call("mean", x, axis=axis, keepdim=keepdim)
    return mean, a.call("var", x, axis=axis, keepdim=keepdim, correction=a.literal(0))


def _normalised(a: Application, x: s.Expr, axes: tuple[int, ...]) -> s.Expr:
    """`(x - mean) * rsqrt(var + eps)` over `axes`, the variance biased, as torch's norms
    compute it (the passes fuse the two-pass variance with the mean)."""
    mean, variance = _statistics(a, x, axes)
    scale = a.call("rsqrt", a.binary("add", variance, a.literal(float(a.arguments["eps"]))))
    return a.binary("mul", a.binary("sub", x, mean), scale)


def _per_channel(a: Application, value: s.Expr) -> s.Expr:
    """A [C] value broadcast along axis 1 of the [N, C, *spatial] operand."""
    channels, *spatial = a.shape[1:]
    return a.call("reshape", value, *map(a.literal, (channels, *(1,) * len(spatial))))


def _affine_applied(a: Application, value: s.Expr, per_channel: bool) -> s.Expr:
    """`value * weight + bias`, absent parameters left out; `per_channel`: broadcast along
    axis 1 (`weight.reshape(C, 1, 1)`; a weight whose axis a spec splits, `G * CG`, is
    merged so), else elementwise over the trailing axes."""

    def broadcast(parameter: s.Expr) -> s.Expr:
        return _per_channel(a, parameter) if per_channel else parameter

    if "weight" in a.parameters:
        value = a.binary("mul", value, broadcast(a.parameters["weight"]))
    if "bias" in a.parameters:
        value = a.binary("add", value, broadcast(a.parameters["bias"]))
    return value


def _layer_norm_apply(a: Application) -> s.Expr:
    """`ln(x)`: normalised over the normalized_shape's trailing axes, its affine elementwise
    over them."""
    shape = a.arguments["normalized_shape"]
    trailing = len(shape) if isinstance(shape, tuple) else 1
    normalised = _normalised(a, a.operand, tuple(range(-trailing, 0)))
    return _affine_applied(a, normalised, per_channel=False)


def _instance_norm_apply(a: Application) -> s.Expr:
    """`inorm(x)` of nn.InstanceNorm1d/2d/3d without running statistics: each sample's
    channel normalised over its spatial axes, the affine per channel."""
    normalised = _normalised(a, a.operand, tuple(range(2, len(a.shape))))
    return _affine_applied(a, normalised, per_channel=True)


def _batch_norm_apply(a: Application) -> s.Expr:
    """`bn(x)` of nn.BatchNorm1d/2d/3d in training mode, or in either without running
    statistics: each channel normalised over the batch and its positions."""
    normalised = _normalised(a, a.operand, (0, *range(2, len(a.shape))))
    return _affine_applied(a, normalised, per_channel=True)


def _running_eval_apply(a: Application) -> s.Expr:
    """`bn(x)` in eval mode: each channel normalised with its running statistics."""
    centred = a.binary("sub", a.operand, _per_channel(a, a.buffers["running_mean"]))
    variance = _per_channel(a, a.buffers["running_var"])
    scale = a.call("rsqrt", a.binary("add", variance, a.literal(float(a.arguments["eps"]))))
    return _affine_applied(a, a.binary("mul", centred, scale), per_channel=True)


def _batch_statistic_axes(rank: int) -> tuple[int, ...]:
    return (0, *range(2, rank))


def _instance_statistic_axes(rank: int) -> tuple[int, ...]:
    return tuple(range(2, rank))


def statistic_count(definition: ModuleDef, shape: tuple[int, ...]) -> int:
    """The values one batch statistic reduces: torch refuses training mode's unbiased
    variance of one."""
    assert definition.statistic_axes is not None
    return math.prod(shape[axis] for axis in definition.statistic_axes(len(shape)))


def _running_updates(definition_axes: Callable[[int], tuple[int, ...]]) -> Callable:
    """Training mode moves each running statistic toward the batch's by the momentum, the
    variance unbiased (`n / (n - 1)` times the biased one), as torch does; an instance
    norm's statistics are each sample's, averaged over the batch (torch's instance_norm
    updates a copy per sample and keeps their mean). Each is the statistics' kept shape
    ([1, C, 1, 1]): the channels stay on axis 1, where launches by channels cut them."""

    def updates(a: Application) -> dict[str, s.Expr]:
        axes = definition_axes(len(a.shape))
        mean, variance = _statistics(a, a.operand, axes)
        if 0 not in axes:  # per sample: their mean over the batch
            batch = s.ListExpr((a.literal(0),), a.span)
            keepdim = s.Bool(True, a.span)
            mean = a.call("mean", mean, axis=batch, keepdim=keepdim)
            variance = a.call("mean", variance, axis=batch, keepdim=keepdim)
        momentum = float(a.arguments["momentum"])
        count = math.prod(a.shape[axis] for axis in axes)

        def moved(attribute: str, batch: s.Expr, factor: float) -> s.Expr:
            kept = a.binary("mul", _per_channel(a, a.buffers[attribute]), a.literal(1.0 - momentum))
            return a.binary("add", kept, a.binary("mul", batch, a.literal(factor)))

        return {
            "running_mean": moved("running_mean", mean, momentum),
            "running_var": moved("running_var", variance, momentum * count / (count - 1)),
        }

    return updates


def _group_norm_apply(a: Application) -> s.Expr:
    """`gn(x)` of [N, C, *spatial]: the channels split into groups
    (`x.reshape(N, G, C / G, *spatial)`), each normalised over its channels and positions,
    back to [N, C, *spatial], the affine per channel."""
    batch, channels, *spatial = a.shape
    groups = int(a.arguments["num_groups"])
    grouped = a.call(
        "reshape", a.operand, *map(a.literal, (batch, groups, channels // groups, *spatial))
    )
    normalised = _normalised(a, grouped, tuple(range(2, 3 + len(spatial))))
    back = a.call("reshape", normalised, *map(a.literal, a.shape))
    return _affine_applied(a, back, per_channel=True)


def channel_view(definition: ModuleDef, arguments: Arguments, shape: tuple[int, ...]) -> tuple:
    """The operand's shape as the module sees it: a channel axis a spec splits into logical
    axes (`[B, G, CG]` of `linear(K, G * CG)`) merged back into one (`[B, G * CG]`), which
    is unambiguous, as torch would refuse a tensor whose axis 1 is not the channel count;
    a linear layer's features, its operand's last axes, alike."""
    if definition.features is not None:
        features = int(arguments[definition.features])
        for start in range(len(shape) - 1, -1, -1):
            if math.prod(shape[start:]) == features:
                return (*shape[:start], features)
            if math.prod(shape[start:]) > features:
                break
        return shape
    if definition.channels is None or len(shape) < 2:
        return shape
    channels = int(arguments[definition.channels])
    for end in range(2, len(shape) + 1):
        if math.prod(shape[1:end]) == channels:
            return (shape[0], channels, *shape[end:])
        if math.prod(shape[1:end]) > channels:
            break
    return shape


def _layer_norm_operand_invalid(arguments: Arguments, shape: tuple[int, ...]) -> str | None:
    normalized = arguments["normalized_shape"]
    normalized = normalized if isinstance(normalized, tuple) else (int(normalized),)
    if shape[len(shape) - len(normalized) :] != normalized:
        return f"its trailing axes are not normalized_shape {list(normalized)}"
    return None


def _group_norm_invalid(arguments: Arguments) -> str | None:
    groups, channels = int(arguments["num_groups"]), int(arguments["num_channels"])
    if groups < 1 or channels % groups:
        return f"{groups} groups do not divide num_channels = {channels}"
    return None


def _affine(size: str, *flags: str) -> tuple[Parameter, ...]:
    """A normalisation's affine parameters, which start as ones and zeros (no draw)."""
    return (Parameter("weight", (size,), flags[:1]), Parameter("bias", (size,), flags))


def _running_norm(kind: str, spatial: int) -> ModuleDef:
    """nn.BatchNorm1d/2d/3d and nn.InstanceNorm1d/2d/3d: their arguments and state differ
    only in the defaults (an instance norm has no affine parameters and no running
    statistics unless asked)."""
    batch = kind == "batch_norm"
    axes = _batch_statistic_axes if batch else _instance_statistic_axes
    return ModuleDef(
        f"{kind}{spatial}d",
        f"torch.nn.{'BatchNorm' if batch else 'InstanceNorm'}{spatial}d",
        (
            Argument("num_features", _SIZE),
            _EPS,
            Argument("momentum", _NUMBER, 0.1),
            Argument("affine", _FLAG, batch),
            Argument("track_running_stats", _FLAG, batch),
        ),
        _affine("num_features", "affine"),
        apply=_batch_norm_apply if batch else _instance_norm_apply,
        eval_apply=_running_eval_apply,
        updates=_running_updates(axes),
        statistic_axes=axes,
        counts_batches=batch,
        # BatchNorm1d takes [N, C] as well as [N, C, L]
        operand_ranks=(2, 3) if batch and spatial == 1 else (spatial + 2,),
        reads_operand_again=True,
        channels="num_features",
        spatial=spatial,
        buffers=tuple(
            Buffer(attribute, shape, dtype, ("track_running_stats",))
            for attribute, shape, dtype in (
                ("running_mean", ("num_features",), "float32"),
                ("running_var", ("num_features",), "float32"),
                ("num_batches_tracked", (), "int64"),
            )
        ),
    )


# What a spec wrote before the norms carried their spatial rank, and what it writes now.
RENAMED_MODULES = {
    "batch_norm": "`batch_norm1d`, `batch_norm2d` or `batch_norm3d`, as the problem's "
    "nn.BatchNorm1d/2d/3d",
    "instance_norm": "`instance_norm1d`, `instance_norm2d` or `instance_norm3d`, as the "
    "problem's nn.InstanceNorm1d/2d/3d",
}


MODULES: dict[str, ModuleDef] = {
    module.name: module
    for module in (
        ModuleDef(
            "linear",
            "torch.nn.Linear",
            (
                Argument("in_features", _SIZE),
                Argument("out_features", _SIZE),
                Argument("bias", _FLAG, True),
            ),
            (
                Parameter("weight", ("out_features", "in_features")),
                Parameter("bias", ("out_features",), ("bias",)),
            ),
            apply=_linear,
            features="in_features",
        ),
        ModuleDef(
            "multihead_attention",
            "torch.nn.MultiheadAttention",
            (
                Argument("embed_dim", _SIZE),
                Argument("num_heads", _SIZE),
                Argument("dropout", _NUMBER, 0.0),
                Argument("bias", _FLAG, True),
                Argument("add_bias_kv", _FLAG, False),
                Argument("add_zero_attn", _FLAG, False),
                Argument("batch_first", _FLAG, False),
            ),
            (
                Parameter(
                    "in_proj_weight", lambda a: (3 * int(a["embed_dim"]), int(a["embed_dim"]))
                ),
                Parameter("in_proj_bias", lambda a: (3 * int(a["embed_dim"]),), ("bias",)),
                # its `out_proj` Linear's, a submodule torch's constructor builds
                Parameter("out_proj.weight", ("embed_dim", "embed_dim")),
                Parameter("out_proj.bias", ("embed_dim",), ("bias",)),
            ),
            apply=_multihead_attention_apply,
            invalid=_multihead_attention_invalid,
            unsupported=_multihead_attention_unsupported,
            operand_invalid=_multihead_attention_operand_invalid,
            operand_ranks=(3,),
            operands=("query", "key", "value"),
            results=("attn_output", "attn_output_weights"),
        ),
        ModuleDef(
            "group_norm",
            "torch.nn.GroupNorm",
            (
                Argument("num_groups", _SIZE),
                Argument("num_channels", _SIZE),
                _EPS,
                Argument("affine", _FLAG, True),
            ),
            _affine("num_channels", "affine"),
            apply=_group_norm_apply,
            invalid=_group_norm_invalid,
            channels="num_channels",
            reads_operand_again=True,
        ),
        ModuleDef(
            "layer_norm",
            "torch.nn.LayerNorm",
            (
                Argument("normalized_shape", _SHAPE),
                _EPS,
                Argument("elementwise_affine", _FLAG, True),
                Argument("bias", _FLAG, True),
            ),
            _affine("normalized_shape", "elementwise_affine", "bias"),
            apply=_layer_norm_apply,
            operand_invalid=_layer_norm_operand_invalid,
            reads_operand_again=True,
        ),
        *(_running_norm("batch_norm", spatial) for spatial in (1, 2, 3)),
        *(_running_norm("instance_norm", spatial) for spatial in (1, 2, 3)),
        *(
            _conv_module(spatial, transposed)
            for transposed in (False, True)
            for spatial in (1, 2, 3)
        ),
    )
}


def creation_statements(kernel: ir.Kernel) -> list[ast.stmt]:
    """`__init__` statements creating ModelNew's module tree, weights and carried tensors in
    the order the spec declares them (`kernel.created`), as the replaced torch module does:
    the same draws from torch's RNG, the same state_dict paths."""
    containers = {c.path: c for c in kernel.containers}
    modules = {m.name: m for m in kernel.modules}
    weights = {
        w.state_name: w for w in kernel.weights if not isinstance(w.init, ir.ModuleParameter)
    }
    carried = {t.name: t for t in kernel.inputs if t.is_carried}
    registered = {t.state_name: t for t in kernel.inputs if isinstance(t.init, ir.Registered)}
    statements: list[ast.stmt] = []
    for path in kernel.created:
        if path in containers:
            value = pytree.call(containers[path].torch)
        elif path in modules:
            module = modules[path]
            dtype = pytree.name("torch.float32")
            value = pytree.call(MODULES[module.kind].torch, **dict(module.arguments), dtype=dtype)
        elif path in registered:  # a constant buffer, in state_dict
            statements.append(_registration(kernel, registered[path]))
            continue
        elif path in carried:  # a buffer outside state_dict, which moves with the module
            tensor = carried[path]
            assert isinstance(tensor.init, ir.Carried)
            start = _initial_value(kernel, tensor, tensor.init.start)
            register = pytree.method(
                pytree.name("self"), "register_buffer", path, start, persistent=False
            )
            statements.append(pytree.statement(register))
            continue
        else:
            weight = weights[path]
            value = pytree.call("torch.nn.Parameter", _initial_value(kernel, weight, weight.init))
        statements.append(_place(path, value))
    return statements


def _registration(kernel: ir.Kernel, tensor: ir.Input) -> ast.stmt:
    """`self.register_buffer("mask", torch.tril(torch.ones(...)))`."""
    init = tensor.init
    assert isinstance(init, ir.Registered)
    value = _initial_value(kernel, tensor, ir.Filled(init.fill))
    if init.triangle is not None:
        value = pytree.call(f"torch.{init.triangle}", value, diagonal=init.diagonal)
    holder, _, attribute = tensor.state_name.rpartition(".")
    owner = pytree.name(f"self.{holder}" if holder else "self")
    return pytree.statement(pytree.method(owner, "register_buffer", attribute, value))


def _initial_value(
    kernel: ir.Kernel, tensor: ir.Input, init: ir.Filled | ir.Drawn | ir.ParamFilled
) -> ast.expr:
    """A weight's (a carried tensor's) first value, as the torch module being replaced
    makes it."""
    dtype = pytree.name(f"torch.{tensor.type.dtype.torch_name}")
    shape = kernel.forward_shape(tensor)
    if isinstance(init, ir.Drawn):
        value = pytree.call(f"torch.{init.distribution}", shape, dtype=dtype)
        if init.scale != 1.0:
            value = ast.BinOp(value, ast.Mult(), pytree.value(init.scale))
    elif isinstance(init, ir.ParamFilled):
        fill = pytree.call("float", pytree.name(init.param))
        value = pytree.call("torch.full", shape, fill, dtype=dtype)
    elif init.value in (0.0, 1.0):
        value = pytree.call(f"torch.{'ones' if init.value else 'zeros'}", shape, dtype=dtype)
    else:
        value = pytree.call("torch.full", shape, init.value, dtype=dtype)
    return value


def _place(path: str, value: ast.expr) -> ast.stmt:
    """`self.attn.c_attn = value`, or `self.network.append(value)` for a Sequential's next
    member (blocks.py numbers a Sequential's members in order, from 0)."""
    holder, _, last = path.rpartition(".")
    if last.isdigit():
        return pytree.statement(pytree.method(pytree.name(f"self.{holder}"), "append", value))
    return pytree.assign(f"self.{path}", value)


@attrs.frozen
class StateEntry:
    """One entry of ModelNew's state_dict: a parameter or a buffer."""

    name: str  # `fc.weight`, `bn.running_mean`, `scale`
    shape: tuple[int, ...]
    dtype: str  # torch's name: `float32`, `int64`


def state_entries(kernel: ir.Kernel) -> tuple[StateEntry, ...]:
    """What `ModelNew.state_dict()` holds, in its order: depth first through the module
    tree, each module's parameters, then its buffers, then its submodules' in the order
    they were assigned (`ir.Kernel.torch_order`)."""
    order = kernel.torch_order()
    entries = [
        (
            order(w.state_name, buffer=isinstance(w.init, ir.Registered)),
            StateEntry(w.state_name, w.declared_shape, w.type.dtype.torch_name),
        )
        for w in kernel.inputs
        if w.is_weight or isinstance(w.init, ir.Registered)
    ]
    for module in kernel.modules:
        definition, arguments = MODULES[module.kind], dict(module.arguments)
        for buffer in definition.present_buffers(arguments):
            name = f"{module.name}.{buffer.attribute}"
            shape = tuple(int(arguments[size]) for size in buffer.shape)
            entries.append((order(name, buffer=True), StateEntry(name, shape, buffer.dtype)))
    return tuple(entry for _, entry in sorted(entries, key=lambda pair: pair[0]))
