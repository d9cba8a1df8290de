"""A spec's time loop (`for t in range(T)` ... `end`) at the syntax level: the loop's
statements at one step (what the unrolled body computes, step by step) and the spec of one
step (what is lowered: a kernel `forward` runs T times).

In the loop, `x[t]` reads step t of an input whose first axis the loop runs along, a `let`
declared before the loop and assigned in it is carried from step to step, and `y[t] = ...`
writes step t of an output. The typechecker checks the loop's shape rules (what may be
carried, sliced and written) and calls these to build the two views of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import attrs

from ptodsl.frontend import syntax as s
from ptodsl.frontend.diagnostics import SpecError
from ptodsl.ir import nodes as ir

# What a step's spec keeps of the declarations: sizes, construction arguments and module
# state (the step reads the module's weights), never the spec's own inputs and outputs.
KEPT = (s.DimDecl, s.ParamDecl, s.WeightDecl, s.ModuleDecl, s.BufferDecl, s.ContainerDecl)


def _is_step_index(node: object, variable: str) -> bool:
    return (
        isinstance(node, s.Index) and isinstance(node.index, s.Name) and node.index.id == variable
    )


def sequences(loop: s.For) -> dict[str, s.Span]:
    """The inputs the loop reads step by step (`x[t]`), each where it first does; the step
    variable anywhere else is an error."""
    found: dict[str, s.Span] = {}
    indexes = set()
    for stmt in loop.body:
        for node in s.walk_syntax(stmt.value):
            if isinstance(node, s.Subscript) and any(
                _is_step_index(c, loop.variable) for c in node.slices
            ):
                if not (isinstance(node.value, s.Name) and len(node.slices) == 1):
                    raise SpecError(
                        f"a step reads a tensor's first axis at `{loop.variable}`",
                        node.span,
                        note=f"write `x[{loop.variable}]` of an input `x` whose first axis the "
                        "loop runs along",
                    )
                found.setdefault(node.value.id, node.span)
                indexes.add(id(node.slices[0].index))
        for node in s.walk_syntax(stmt.value):
            if isinstance(node, s.Name) and node.id == loop.variable and id(node) not in indexes:
                raise SpecError(
                    f"`{loop.variable}` is the loop's step: it only indexes a sequence",
                    node.span,
                    note=f"read step `{loop.variable}` of an input as `x[{loop.variable}]`",
                )
    return found


def at_step(value: s.Expr, variable: str, step: int) -> s.Expr:
    """`value` at step `step`: each `x[t]` is `x[step]`."""

    def rewrite(node: object) -> object | None:
        if _is_step_index(node, variable):
            return attrs.evolve(node, index=step)
        return None

    return s.map_syntax(value, rewrite)


def renamed(value: s.Expr, names: Mapping[str, str]) -> s.Expr:
    """`value` reading `names[n]` wherever it reads the tensor `n`."""

    def rewrite(node: object) -> object | None:
        if isinstance(node, s.Name) and node.id in names:
            return attrs.evolve(node, id=names[node.id])
        if isinstance(node, s.Attribute):  # `fc.weight`: a module's, never renamed
            return node
        return None

    return s.map_syntax(value, rewrite)


@attrs.frozen
class StepNames:
    """The names the step's spec gives what the loop reads and writes."""

    sliced: dict[str, str]  # sequence input -> its step (`x` -> `x_t`)
    next: dict[str, str]  # carried let -> the step output holding its next value
    stacked: dict[str, str]  # output -> its step (`y` -> `y_t`)


def step_names(
    loop: s.For,
    sliced: Iterable[str],
    carried: Iterable[str],
    stacked: Iterable[str],
    taken: set[str],
) -> StepNames:
    """Names apart from every name of the spec (`taken`) and of the loop's lets."""
    used = set(taken) | {stmt.name for stmt in loop.body if isinstance(stmt, s.Let)}

    def fresh(base: str) -> str:
        numbered = (f"{base}{n}" for n in itertools.count(2))
        name = next(c for c in itertools.chain((base,), numbered) if c not in used)
        used.add(name)
        return name

    return StepNames(
        {x: fresh(f"{x}_{loop.variable}") for x in sliced},
        {h: fresh(f"{h}_next") for h in carried},
        {y: fresh(f"{y}_{loop.variable}") for y in stacked},
    )


def _stepped_type(declared: s.TensorTypeExpr) -> s.TensorTypeExpr:
    """A declared `[T, ...]` type without its first axis, the step's."""
    assert declared.dims is not None
    return attrs.evolve(declared, dims=declared.dims[1:])


def step_spec(
    spec: s.Spec,
    loop: s.For,
    names: StepNames,
    carried: Mapping[str, s.InputDecl],
    read: set[str],
) -> s.Spec:
    """One step of `loop` as a spec of its own: the spec's sizes, arguments and module
    state; as inputs each sequence's step, each carried value and the inputs the loop
    reads whole (`read`); as outputs each output's step and each carried value's next one.
    A carried value assigned in the step is read as its new value by what follows."""
    declared = {item.name: item for item in spec.items if isinstance(item, s.InputDecl)}
    outputs = {item.name: item for item in spec.items if isinstance(item, s.OutputDecl)}
    items: list[s.Item] = [item for item in spec.items if isinstance(item, KEPT)]
    items += [declared[name] for name in declared if name in read]
    for sequence, step in names.sliced.items():
        decl = declared[sequence]
        items.append(attrs.evolve(decl, name=step, type=_stepped_type(decl.type)))
    for name, start in carried.items():
        items.append(attrs.evolve(start, name=name))
        items.append(s.OutputDecl(names.next[name], start.type, start.span))
    for output, step in names.stacked.items():
        decl = outputs[output]
        items.append(s.OutputDecl(step, _stepped_type(decl.type), decl.span))
    current: dict[str, str] = {}

    def in_step(value: s.Expr) -> s.Expr:
        def rewrite(node: object) -> object | None:
            if isinstance(node, s.Subscript) and _is_step_index(node.slices[0], loop.variable):
                assert isinstance(node.value, s.Name), "`sequences` checked the form"
                return s.Name(names.sliced[node.value.id], node.span)
            return None

        return renamed(s.map_syntax(value, rewrite), current)

    for number, stmt in enumerate(loop.body):
        value = in_step(stmt.value)
        if isinstance(stmt, s.Let):
            items.append(attrs.evolve(stmt, value=value))
        elif isinstance(stmt, s.StepAssign):
            items.append(s.Assign(names.stacked[stmt.target], value, stmt.span))
        else:  # a carried value's new value, read by name from here on
            new = ir.generated_name(f"new{number}", stmt.target)
            items.append(s.Let(new, value, stmt.span, hidden=True))
            current[stmt.target] = new
    for name, output in names.next.items():
        items.append(s.Assign(output, s.Name(current.get(name, name), loop.span), loop.span))
    return s.Spec(f"{spec.name}_step", spec.name_span, tuple(items))
