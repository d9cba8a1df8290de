"""What ptodsl knows about module state: the torch modules a weight can be (`weight fc:
linear(K, N)`), one registry entry per kind as `ops` is for ops, and how ModelNew creates
every weight so that, under one seed, it draws what the module it replaces draws."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

import attrs

from ptodsl import ir
from ptodsl import syntax as s
from ptodsl.pyexpr import emit_call


class ArgumentKind(enum.Enum):
    SIZE = "a size"  # an integer, a dim or an `int` param (`in_features`)
    FLAG = "`true` or `false`"
    NUMBER = "a number"


@attrs.frozen
class Argument:
    name: str
    kind: ArgumentKind
    default: ir.ParamValue | None = None  # None: required


@attrs.frozen
class Parameter:
    """One nn.Parameter a module creates: its attribute name, its shape as argument names,
    and the flag arguments it exists under (a LayerNorm's bias under two)."""

    attribute: str
    shape: tuple[str, ...]
    present_if: tuple[str, ...] = ()


@attrs.frozen
class ModuleDef:
    name: str  # the spelling in a spec
    torch: str  # the constructor ModelNew calls, which draws the initial values itself
    arguments: tuple[Argument, ...]  # torch's, in torch's order
    parameters: tuple[Parameter, ...]  # in the order torch registers them
    # `fc(x)` in a spec stands for this expression, given the operand and the parameters
    apply: Callable[[s.Expr, Mapping[str, s.Expr], s.Span], s.Expr] | None = None

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)

    def present_parameters(self, arguments: Mapping[str, ir.ParamValue]) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if all(arguments[f] for f in p.present_if))


def _linear(x: s.Expr, parameters: Mapping[str, s.Expr], span: s.Span) -> s.Expr:
    product = s.Binary("matmul", x, s.Attribute(parameters["weight"], "T", span), span)
    if "bias" not in parameters:
        return product
    return s.Binary("add", product, parameters["bias"], span)


_SIZE, _FLAG, _NUMBER = ArgumentKind.SIZE, ArgumentKind.FLAG, ArgumentKind.NUMBER
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
    )
}


def creation_lines(kernel: ir.Kernel, indent: str) -> list[str]:
    """`__init__` lines creating every weight in declaration order (a module when its first
    parameter comes), as the replaced torch module does: the same draws from torch's RNG."""
    modules = {module.name: module for module in kernel.modules}
    lines, built = [], set()
    for weight in kernel.weights:
        init, dtype = weight.init, f"torch.{weight.type.dtype.torch_name}"
        shape = ir.format_value(kernel.forward_shape(weight))
        if isinstance(init, ir.ModuleParameter):
            if init.module in built:
                continue
            built.add(init.module)
            module = modules[init.module]
            arguments = [f"{n}={ir.format_value(v)}" for n, v in module.arguments]
            torch = f"self.{module.name} = {MODULES[module.kind].torch}"
            lines += emit_call(torch, [*arguments, f"dtype={dtype}"], indent)
            continue
        if isinstance(init, ir.Drawn):
            value = f"torch.{init.distribution}({shape}, dtype={dtype})"
            if init.scale != 1.0:
                value += f" * {ir.format_number(init.scale)}"
        elif init.value in (0.0, 1.0):
            value = f"torch.{'ones' if init.value else 'zeros'}({shape}, dtype={dtype})"
        else:
            value = f"torch.full({shape}, {ir.format_number(init.value)}, dtype={dtype})"
        lines += emit_call(f"self.{weight.name} = torch.nn.Parameter", [value], indent)
    return lines
