"""What ptodsl knows about module state: the torch modules a weight can be (`weight fc:
linear(K, N)`), one registry entry per kind as `ops` is for ops, and how ModelNew creates
every weight so that, under one seed, it draws what the module it replaces draws."""

from __future__ import annotations

import ast
import enum
from collections.abc import Callable, Mapping

import attrs

from ptodsl import ir, pytree
from ptodsl import syntax as s


class ArgumentKind(enum.Enum):
    SIZE = "a size"  # an integer, a dim or an `int` param (`in_features`)
    # a size for every spatial axis, or a list of one each (`kernel_size=[3, 5]`)
    SIZES = "a size or a list of sizes, one per spatial axis"
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
class ModuleDef:
    name: str  # the spelling in a spec
    torch: str  # the constructor ModelNew calls, which draws the initial values itself
    arguments: tuple[Argument, ...]  # torch's, in torch's order
    parameters: tuple[Parameter, ...]  # in the order torch registers them
    # `fc(x)` in a spec stands for this expression, given the operand, the parameters and
    # the module's arguments
    apply: Callable[[s.Expr, Mapping[str, s.Expr], Arguments, s.Span], s.Expr] | None = None
    spatial: int = 0  # a convolution's spatial axes: every SIZES argument has one per axis
    # why these arguments cannot build the module, or None
    invalid: Callable[[Arguments], str | None] | None = None

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def present_parameters(self, arguments: Mapping[str, ir.ParamValue]) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if all(arguments[f] for f in p.present_if))


def _linear(
    x: s.Expr, parameters: Mapping[str, s.Expr], arguments: Arguments, span: s.Span
) -> s.Expr:
    product = s.Binary("matmul", x, s.Attribute(parameters["weight"], "T", span), span)
    if "bias" not in parameters:
        return product
    return s.Binary("add", product, parameters["bias"], span)


_SIZE, _FLAG, _NUMBER = ArgumentKind.SIZE, ArgumentKind.FLAG, ArgumentKind.NUMBER
_SIZES = ArgumentKind.SIZES


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

    def apply(
        x: s.Expr, parameters: Mapping[str, s.Expr], arguments: Arguments, span: s.Span
    ) -> s.Expr:
        given = tuple(s.Keyword(k, _literal(arguments[k], span), span) for k in keywords)
        weight = parameters["weight"]
        value: s.Expr = s.Call(function, span, (x, weight), given, span, builtin=True)
        if "bias" not in parameters:
            return value
        channels = _literal((int(arguments["out_channels"]), *(1,) * spatial), span)
        bias = s.Call("reshape", span, (parameters["bias"], channels), (), span, builtin=True)
        return s.Binary("add", value, bias, span)

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


def _affine(size: str, *flags: str) -> tuple[Parameter, ...]:
    """A normalisation's affine parameters, which start as ones and zeros (no draw)."""
    return (Parameter("weight", (size,), flags[:1]), Parameter("bias", (size,), flags))


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
        ),
        ModuleDef(
            "layer_norm",
            "torch.nn.LayerNorm",
            (
                Argument("normalized_shape", _SIZE),
                _EPS,
                Argument("elementwise_affine", _FLAG, True),
                Argument("bias", _FLAG, True),
            ),
            _affine("normalized_shape", "elementwise_affine", "bias"),
        ),
        ModuleDef(
            "batch_norm",
            "torch.nn.BatchNorm1d",
            (
                Argument("num_features", _SIZE),
                _EPS,
                Argument("momentum", _NUMBER, 0.1),
                Argument("affine", _FLAG, True),
            ),
            _affine("num_features", "affine"),
        ),
        *(
            _conv_module(spatial, transposed)
            for transposed in (False, True)
            for spatial in (1, 2, 3)
        ),
    )
}


def creation_statements(kernel: ir.Kernel) -> list[ast.stmt]:
    """`__init__` statements creating every weight in declaration order (a module when its
    first parameter comes), as the replaced torch module does: the same draws from torch's
    RNG."""
    modules = {module.name: module for module in kernel.modules}
    statements: list[ast.stmt] = []
    built = set()
    for weight in kernel.weights:
        init = weight.init
        dtype = pytree.name(f"torch.{weight.type.dtype.torch_name}")
        shape = kernel.forward_shape(weight)
        if isinstance(init, ir.ModuleParameter):
            if init.module in built:
                continue
            built.add(init.module)
            module = modules[init.module]
            create = pytree.call(MODULES[module.kind].torch, **dict(module.arguments), dtype=dtype)
            statements.append(pytree.assign(f"self.{module.name}", create))
            continue
        if isinstance(init, ir.Drawn):
            value = pytree.call(f"torch.{init.distribution}", shape, dtype=dtype)
            if init.scale != 1.0:
                value = ast.BinOp(value, ast.Mult(), pytree.value(init.scale))
        elif init.value in (0.0, 1.0):
            value = pytree.call(f"torch.{'ones' if init.value else 'zeros'}", shape, dtype=dtype)
        else:
            value = pytree.call("torch.full", shape, init.value, dtype=dtype)
        parameter = pytree.call("torch.nn.Parameter", value)
        statements.append(pytree.assign(f"self.{weight.name}", parameter))
    return statements
