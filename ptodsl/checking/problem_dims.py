"""A spec's dims bound from a problem file's own shapes (`check --against --set`).

With `--set NAME=VALUE` the problem is resized by naming its constants, and everything it
derives from them follows; the spec's dims are then read off what the resized problem
gives: its `get_inputs()` tensors' shapes (the spec's tensor inputs, in order), its
`get_init_inputs()` values (the spec's params whose default is a dim, or a list of them)
and its forward's output shapes (torch's meta device, no arithmetic). Each declared axis is
an equation: a dim name (`C`, `N + 1`), a literal size, or a product (`G * CG`) solved once
all but one factor are known. A size that disagrees names the axis and both sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs
import torch

from ptodsl.checking.problems import ProblemError, ProblemRun, Resize, run_problem
from ptodsl.frontend import syntax as s
from ptodsl.frontend.diagnostics import Source, SpecError
from ptodsl.ir import nodes as ir
from ptodsl.pipeline import lower


@attrs.frozen
class _Factor:
    """One factor of a declared axis: a dim (plus `offset`), a literal size, or a size
    expression (`2 * D - 1`: checked once its dims are known, never solved for)."""

    name: str | None
    size: int = 0
    offset: int = 0
    expr: s.Expr | None = None


@attrs.frozen
class _Axis:
    what: str  # "input `x`, axis 1"
    factors: tuple[_Factor, ...]
    size: int  # what the problem gives


def bound_dims(
    syntax: s.Spec, checked: ir.Kernel, run: ProblemRun, where: str
) -> tuple[dict[str, int], list[str]]:
    """Each dim of the spec the problem's shapes determine, and how each was found
    ("C_out = 8 (input `x`, axis 1)"). Dims nothing determines keep their declared size."""
    declared = syntax.declared_dims
    axes = [*_input_axes(syntax, checked, run, where), *_output_axes(syntax, checked, run)]
    axes += _param_axes(syntax, checked, run)
    axes = [a for a in axes if all(f.name is None or f.name in declared for f in a.factors)]
    computed = {
        i.name: i for i in syntax.items if isinstance(i, s.DimDecl) and i.computed is not None
    }
    params = s.size_params(syntax.items)
    bound: dict[str, tuple[int, str]] = {}
    progress = True
    while progress:
        progress = False
        for name, dim in computed.items():
            if name not in bound and _names(dim.computed, params) <= set(bound):
                sizes = {n: size for n, (size, _) in bound.items()}
                try:
                    bound[name] = (s.computed_size(dim, sizes, params), "computed")
                except SpecError as error:  # `X // (H - 4)` with H bound to 4
                    raise ProblemError(
                        f"{where}: at the sizes the problem gives, the spec's computed dim "
                        f"`{name}` (line {dim.span.line}): {error.message}"
                    ) from None
                progress = True
        for axis in axes:
            solved = _solved_expression(axis, bound, params, computed)
            if solved is not None:
                bound[solved[0]] = (solved[1], axis.what)
                progress = True
                continue
            unknown = [f for f in axis.factors if f.name is not None and f.name not in bound]
            if len(unknown) != 1 or unknown[0].name in computed:
                continue  # known already, several unknowns (`N * N` too), or computed
            if not _sized(axis, bound, params):
                continue  # an expression of dims not known yet
            (factor,) = unknown
            name = factor.name
            known = math.prod(_size(f, bound, params) for f in axis.factors if f.name != name)
            if known == 0 or axis.size % known:
                raise ProblemError(
                    f"{where}: {axis.what}: the problem gives {axis.size}, which the spec's "
                    f"other factors ({known}) do not divide"
                )
            bound[name] = (axis.size // known - factor.offset, axis.what)
            progress = True
    for axis in axes:
        _expect_size(axis, bound, params, where)
    sizes = {name: size for name, (size, _) in bound.items()}
    for name, size in sizes.items():
        if size < 1:
            raise ProblemError(
                f"{where}: {bound[name][1]} makes the spec's dim `{name}` {size}; a dim is at "
                "least 1"
            )
    found = [f"{name} = {sizes[name]} ({bound[name][1]})" for name in declared if name in sizes]
    return {n: size for n, size in sizes.items() if n not in computed}, found


def _names(expr: s.Expr | None, params: Mapping[str, s.Expr]) -> set[str]:
    """The dims a size expression is computed from (through a param whose value is a dim)."""
    names, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, s.Name) and node.id in params:
            stack.append(params[node.id])
        elif isinstance(node, s.Name):
            names.add(node.id)
        elif isinstance(node, s.Binary):
            stack += [node.lhs, node.rhs]
    return names


def problem_dims(
    source: Source, problem: Path, resize: Resize, seed: int, timeout: float
) -> tuple[dict[str, int], list[str]]:
    """`bound_dims` of the spec `source` and the resized problem (run without forward)."""
    lowered = lower(source, until="check")
    run = run_problem(problem, seed, [], resize, timeout, inputs=[])
    return bound_dims(lowered.syntax, lowered.checked, run, f"problem {problem}")


_MAX_TRIED_SIZES = 1 << 16


def _solved_expression(
    axis: _Axis,
    bound: dict[str, tuple[int, str]],
    params: Mapping[str, s.Expr],
    computed: Mapping[str, s.DimDecl],
) -> tuple[str, int] | None:
    """An axis of one size expression with one dim unknown (`2 * D - 1`): that dim's one
    size giving the problem's size, tried from 1 up; None when no size or several do
    (`(H - 4) // 2`), or the expression has no single unknown."""
    if len(axis.factors) != 1 or axis.factors[0].expr is None:
        return None
    expr = axis.factors[0].expr
    unknown = _names(expr, params) - set(bound)
    if len(unknown) != 1 or unknown <= set(computed):
        return None
    (name,) = unknown
    sizes = {n: size for n, (size, _) in bound.items()}
    found = []
    for size in range(1, min(4 * axis.size + 64, _MAX_TRIED_SIZES)):
        try:
            if s.size_value(expr, {**sizes, name: size}, params) == axis.size:
                found.append(size)
        except SpecError:  # a division by zero at this size
            continue
        if len(found) > 1:
            return None
    return (name, found[0]) if found else None


def _sized(axis: _Axis, bound: dict[str, tuple[int, str]], params: Mapping[str, s.Expr]) -> bool:
    """Every size expression among the axis's factors can be computed from `bound`."""
    return all(_names(f.expr, params) <= set(bound) for f in axis.factors if f.expr is not None)


def _size(factor: _Factor, bound: dict[str, tuple[int, str]], params: Mapping[str, s.Expr]) -> int:
    if factor.expr is not None:
        sizes = {name: size for name, (size, _) in bound.items()}
        return s.size_value(factor.expr, sizes, params)
    if factor.name is None:
        return factor.size
    return bound[factor.name][0] + factor.offset


def _expect_size(
    axis: _Axis, bound: dict[str, tuple[int, str]], params: Mapping[str, s.Expr], where: str
) -> None:
    if any(f.name is not None and f.name not in bound for f in axis.factors):
        return  # two unknown factors: the check's own shape comparison judges it
    if not _sized(axis, bound, params):
        return  # an expression of dims no shape binds: the check's comparison judges it
    size = math.prod(_size(f, bound, params) for f in axis.factors)
    if size == axis.size:
        return
    named = [f.name for f in axis.factors if f.name is not None]
    how = "; ".join(
        f"`{n}` = {bound[n][0]} " + ("computed" if src == "computed" else f"from {src}")
        for n in named
        for src in [bound[n][1]]
    )
    raise ProblemError(
        f"{where}: {axis.what}: the problem gives {axis.size}, the spec declares "
        f"{size}{f' ({how})' if how else ''}"
    )


def _input_axes(syntax: s.Spec, checked: ir.Kernel, run: ProblemRun, where: str) -> list[_Axis]:
    tensors = [v for v in run.inputs if isinstance(v, torch.Tensor)]
    arguments = checked.tensor_arguments
    if len(tensors) != len(arguments):
        raise ProblemError(
            f"{where}: its get_inputs() gives {len(tensors)} tensors; the spec takes "
            f"{len(arguments)} tensor inputs ({', '.join(a.name for a in arguments)})"
        )
    decls = {i.name: i for i in syntax.items if isinstance(i, s.InputDecl)}
    return [
        axis
        for tensor, argument in zip(tensors, arguments, strict=True)
        for axis in _tensor_axes(
            f"input `{argument.name}`", decls[argument.name].type, tensor.shape
        )
    ]


def _output_axes(syntax: s.Spec, checked: ir.Kernel, run: ProblemRun) -> list[_Axis]:
    if len(run.shapes) != len(checked.returned_outputs):  # unknown (no meta kernel), or told later
        return []
    decls = {i.name: i for i in syntax.items if isinstance(i, s.OutputDecl)}
    return [
        axis
        for shape, output in zip(run.shapes, checked.returned_outputs, strict=True)
        for axis in _tensor_axes(f"output `{output.name}`", decls[output.name].type, shape)
    ]


def _tensor_axes(what: str, declared: s.TensorTypeExpr, shape: Sequence[int]) -> list[_Axis]:
    entries = declared.dims or ()
    if len(entries) != len(shape):
        return []  # the check's own comparison names the rank that differs
    return [
        _Axis(f"{what}, axis {index}", tuple(_dim_factor(d) for d in entry), int(size))
        for index, (entry, size) in enumerate(zip(entries, shape, strict=True))
    ]


def _dim_factor(dim: s.DimRef) -> _Factor:
    if dim.expr is not None:
        return _Factor(None, expr=dim.expr)
    if dim.name is None:
        assert dim.size is not None, "a declared axis is a dim or a literal size"
        return _Factor(None, dim.size)
    return _Factor(dim.name, 0, dim.offset)


def _param_axes(syntax: s.Spec, checked: ir.Kernel, run: ProblemRun) -> list[_Axis]:
    """A param whose default is a dim (`param in_channels: int = C_in`), a product of dims or
    a list of those gives an equation per int the problem builds its Model with."""
    decls = {i.name: i for i in syntax.items if isinstance(i, s.ParamDecl)}
    axes = []
    for param, value in zip(checked.init_params, run.init_values, strict=False):
        default = decls[param.name].default
        items: Iterable[tuple[str, s.Expr | None, object]]
        if isinstance(default, s.ListExpr) and isinstance(value, tuple):
            if len(default.items) != len(value):
                continue  # the check's own comparison says so
            items = [
                (f"param `{param.name}`[{i}]", e, v)
                for i, (e, v) in enumerate(zip(default.items, value, strict=True))
            ]
        else:
            items = [(f"param `{param.name}`", default, value)]
        for what, expr, given in items:
            factors = _param_factors(expr)
            if factors and type(given) is int:
                axes.append(_Axis(what, factors, given))
    return axes


def _param_factors(expr: s.Expr | None) -> tuple[_Factor, ...]:
    """A dim, an int or a product of those; anything else binds nothing."""
    if isinstance(expr, s.Name):
        return (_Factor(expr.id),)
    if isinstance(expr, s.Number) and float(expr.value).is_integer():
        return (_Factor(None, int(expr.value)),)
    if isinstance(expr, s.Binary) and expr.op == "mul":
        lhs, rhs = _param_factors(expr.lhs), _param_factors(expr.rhs)
        return (*lhs, *rhs) if lhs and rhs else ()
    return ()
