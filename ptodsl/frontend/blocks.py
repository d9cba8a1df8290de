"""expand_blocks: a spec's module tree flattened before the type checker sees it.

A spec may define a torch module once (`block attention(n_embd: int, n_head: int)`: its
state, `forward(x)`, its lets, `return ...`) and instantiate it with `weight attn:
attention(C, H)`; `sequential(linear(K, H), relu(), linear(H, N))` and `module_dict(c_fc=
linear(...), ...)` hold modules as `nn.Sequential` and `nn.ModuleDict` do. Each instance
owns its state under torch's path for it (`attn.c_attn.weight`, `network.2.bias`), so
ModelNew's state_dict is the replaced module's.

This pass inlines: every instance's modules and weights become declarations of the spec
(identifiers `attn_c_attn`, paths `attn.c_attn`), with a `ContainerDecl` for each module
that only holds others or nothing (the block's `nn.Module`, the Sequential, its `nn.ReLU`),
and every call of an instance becomes the block's lets, renamed apart per call
(`attn_q`, `attn_q_2`), and its result in place of the call. The kernels are then cut and
fused across block boundaries as any spec's are. A spec without blocks or containers comes
out unchanged.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping

import attrs

from ptodsl.frontend import syntax as s
from ptodsl.frontend.diagnostics import Span, SpecError
from ptodsl.ir.modules import CONTAINERS, MODULES, STATELESS_MODULES
from ptodsl.ir.nodes import path_identifier

Substitution = Mapping[str, s.Expr]


@attrs.frozen
class Instance:
    """A module of the spec's tree: a leaf torch module (`kind` its spelling), a block, a
    container, or a stateless module (`relu()`); `members` the modules it holds by name."""

    path: str  # torch's: `attn.c_attn`, `network.0`
    kind: str
    span: Span
    members: dict[str, Instance] = attrs.field(factory=dict)
    block: s.BlockDef | None = None
    params: Substitution = attrs.field(factory=dict)  # a block's constructor arguments
    weights: dict[str, str] = attrs.field(factory=dict)  # a block's own weights: identifiers

    @property
    def identifier(self) -> str:
        """The spec's name for it: `attn_c_attn`, `network_0`."""
        return path_identifier(self.path)

    @property
    def is_leaf(self) -> bool:
        return self.block is None and self.kind not in CONTAINERS


def expand_blocks(spec: s.Spec) -> s.Spec:
    """`spec` with every block instance and container inlined; unchanged without any."""
    uses_blocks = any(
        isinstance(item, s.BlockDef)
        or isinstance(item, s.ModuleDecl)
        and (item.module.func in CONTAINERS or item.module.func in STATELESS_MODULES)
        for item in spec.items
    )
    if not uses_blocks:
        return spec
    return attrs.evolve(spec, items=tuple(_Expander().run(spec.items)))


def substitute(node, names: Substitution):
    """`node` (an expression, a declared type, a declaration) with every name in `names`
    replaced by its expression: a block's constructor arguments and forward's arguments."""
    if not names:
        return node

    def rewrite(node: object) -> object | None:
        if isinstance(node, s.Name):
            return names.get(node.id, node)
        if isinstance(node, s.DimRef) and node.name is not None and node.name in names:
            value = names[node.name]
            if isinstance(value, s.Number) and not node.offset:
                return s.DimRef(None, int(value.value), node.span)
            # a dim, an `int` param or an expression of those: a size expression
            return s.DimRef(None, None, node.span, expr=_offset(value, node))
        return None

    return s.map_syntax(node, rewrite)


def _offset(value: s.Expr, ref: s.DimRef) -> s.Expr:
    if not ref.offset:
        return value
    op = "add" if ref.offset > 0 else "sub"
    return s.Binary(op, value, s.Number(abs(ref.offset), str(abs(ref.offset)), ref.span), ref.span)


class _Expander:
    def __init__(self) -> None:
        self.blocks: dict[str, s.BlockDef] = {}
        self.instances: dict[str, Instance] = {}  # the spec's own modules, by name
        self.items: list[s.Item] = []
        self.pending: list[s.Let] = []  # lets an expression's block calls need first
        self.calls: dict[str, itertools.count] = {}  # per instance: how many calls so far
        self.spec_names: set[str] = set()  # tensors of the spec itself, outside every block

    def run(self, items: tuple[s.Item, ...]) -> list[s.Item]:
        for item in items:
            if isinstance(item, s.BlockDef):
                self.define(item)
            elif isinstance(item, s.ModuleDecl) and not self.is_leaf(item.module.func):
                self.instances[item.name] = self.instantiate(item.name, item.module, item.span, {})
            elif isinstance(item, s.ModuleDecl):  # a torch module of the spec's own
                self.instances[item.name] = Instance(item.name, item.module.func, item.span)
                self.items.append(item)
            elif isinstance(item, s.Let | s.Assign):
                self.items += self.expanded(item)
                if isinstance(item, s.Let):
                    self.spec_names.add(item.name)
            elif isinstance(item, s.For):  # each step's calls inlined in the step
                body = tuple(stmt for step in item.body for stmt in self.expanded(step))
                self.items.append(attrs.evolve(item, body=body))
            else:
                declares = s.InputDecl | s.WeightDecl | s.StateDecl | s.BufferDecl | s.OutputDecl
                if isinstance(item, declares):
                    self.spec_names.add(item.name)
                self.items.append(item)
        return self.items

    def expanded(
        self, stmt: s.Let | s.Assign | s.StepAssign
    ) -> list[s.Let | s.Assign | s.StepAssign]:
        """`stmt` with its calls inlined, after the lets they need."""
        value = self.expand(stmt.value, _Scope(self.instances, {}, None))
        pending, self.pending = self.pending, []
        return [*pending, attrs.evolve(stmt, value=value)]

    def is_leaf(self, kind: str) -> bool:
        return kind not in CONTAINERS and kind not in STATELESS_MODULES and kind not in self.blocks

    def define(self, block: s.BlockDef) -> None:
        if block.name in self.blocks:
            raise SpecError(f"block `{block.name}` is already defined", block.span)
        if block.name in CONTAINERS or block.name in STATELESS_MODULES or block.name in MODULES:
            raise SpecError(
                f"`{block.name}` is one of ptodsl's modules", block.span, note="rename the block"
            )
        names = [p.name for p in block.params] + [a.id for a in block.arguments]
        for name, count in collections.Counter(names).items():
            if count > 1:
                raise SpecError(f"`{name}` is named twice in block `{block.name}`", block.span)
        self.blocks[block.name] = block

    # ---- the module tree ----------------------------------------------------------------

    def instantiate(self, path: str, call: s.Call, span: Span, outer: Substitution) -> Instance:
        """The instance `call` builds at `path`, its declarations appended to the spec.
        `outer` binds the names of the block whose state declares it."""
        kind = call.func
        arguments = substitute(call.args, outer)
        keywords = substitute(call.keywords, outer)
        if kind in CONTAINERS:
            return self.container(path, kind, call, keywords, span, outer)
        if kind in STATELESS_MODULES:
            if arguments or keywords:
                raise SpecError(f"`{kind}()` takes no arguments", call.span)
            self.items.append(s.ContainerDecl(path, STATELESS_MODULES[kind].torch, span))
            return Instance(path, kind, span)
        if kind in self.blocks:
            return self.block_instance(path, call, arguments, keywords, span)
        # a torch module of the registry (or an unknown one, which the checker reports)
        module = attrs.evolve(call, args=arguments, keywords=keywords)
        self.items.append(s.ModuleDecl(path_identifier(path), module, span, path=path))
        return Instance(path, kind, span)

    def container(self, path, kind, call, keywords, span, outer):
        instance = Instance(path, kind, span)
        self.items.append(s.ContainerDecl(path, CONTAINERS[kind], span))
        if kind == "sequential":
            if keywords:
                raise SpecError(
                    "`sequential` takes its modules in order, not by name",
                    keywords[0].span,
                    note="`module_dict(c_fc=linear(...), ...)` holds modules by name",
                )
            members = [(str(i), member) for i, member in enumerate(call.args)]
        else:
            if call.args:
                raise SpecError(
                    "`module_dict` takes its modules by name",
                    call.args[0].span,
                    note="`module_dict(c_fc=linear(K, N), c_proj=linear(N, K))`",
                )
            members = [(k.name, k.value) for k in call.keywords]
        for name, member in members:
            if not isinstance(member, s.Call) or member.method:
                raise SpecError(
                    f"`{kind}` holds modules, not expressions",
                    member.span,
                    note="a module is written as its constructor: `linear(K, N)`, `relu()`, "
                    "or a block of the spec's",
                )
            instance.members[name] = self.instantiate(f"{path}.{name}", member, member.span, outer)
        return instance

    def block_instance(self, path, call, arguments, keywords, span) -> Instance:
        block = self.blocks[call.func]
        params = _bind(block, call, arguments, keywords)
        instance = Instance(path, block.name, span, block=block, params=params)
        self.items.append(s.ContainerDecl(path, "torch.nn.Module", span))
        for decl in block.state:
            member_path = f"{path}.{decl.name}"
            member = path_identifier(member_path)
            if isinstance(decl, s.ModuleDecl):
                instance.members[decl.name] = self.instantiate(
                    member_path, decl.module, decl.span, params
                )
                continue
            declared = attrs.evolve(
                decl,
                name=member,
                type=substitute(decl.type, params),
                init=substitute(decl.init, params),
                path=member_path,
            )
            self.items.append(declared)
            instance.weights[decl.name] = member
        return instance

    # ---- calls --------------------------------------------------------------------------

    def expand(self, node, scope: _Scope):
        """`node` with the scope's names bound and every instance call inlined."""
        if isinstance(node, s.Name):
            return scope.name(node)
        if isinstance(node, s.Call) and not node.builtin:
            instance = scope.called(node)
            if instance is not None:
                operands = node.args[1:] if node.method else node.args
                if node.keywords:
                    raise SpecError(
                        "a module is called with its operands only", node.keywords[0].span
                    )
                values = tuple(self.expand(a, scope) for a in operands)
                return self.apply(instance, values, node)
        if isinstance(node, s.Attribute) and isinstance(node.value, s.Name):
            instance = scope.modules.get(node.value.id)
            if instance is not None and instance.is_leaf:  # `c_attn.weight`
                return s.Attribute(
                    s.Name(instance.identifier, node.value.span), node.attr, node.span
                )
        if isinstance(node, tuple):
            return tuple(self.expand(item, scope) for item in node)
        if not attrs.has(type(node)):
            return node
        changes = {
            f.name: self.expand(getattr(node, f.name), scope)
            for f in attrs.fields(type(node))
            if f.name not in ("span", "func_span")
        }
        return attrs.evolve(node, **changes)

    def apply(self, instance: Instance, operands: tuple[s.Expr, ...], call: s.Call) -> s.Expr:
        """What calling `instance` on `operands` computes, its block's lets appended."""
        if instance.kind == "module_dict":
            raise SpecError(
                f"`{instance.path}` holds modules by name and is not called",
                call.span,
                note=f"call its members: `{call.func}.{next(iter(instance.members), 'name')}(x)`",
            )
        stateless = instance.kind in STATELESS_MODULES
        if instance.is_leaf and not stateless:  # typecheck checks its operands and results
            return attrs.evolve(call, func=instance.identifier, args=operands, method=False)
        if instance.block is None and instance.kind != "sequential" and len(operands) != 1:
            raise SpecError(f"`{instance.path}` takes one operand", call.span)
        if stateless:
            function = STATELESS_MODULES[instance.kind].function
            if function is None:  # nn.Identity
                return operands[0]
            return s.Call(function, call.func_span, operands, (), call.span, builtin=True)
        if instance.kind == "sequential":
            if len(operands) != 1:
                raise SpecError(f"`{instance.path}` takes one operand", call.span)
            (value,) = operands
            for member in instance.members.values():
                value = self.apply(member, (value,), call)
            return value
        return self.inline(instance, operands, call)

    def inline(self, instance: Instance, operands: tuple[s.Expr, ...], call: s.Call) -> s.Expr:
        block = instance.block
        assert block is not None
        if len(operands) != len(block.arguments):
            wanted = ", ".join(a.id for a in block.arguments)
            raise SpecError(
                f"`{instance.path}` takes {len(block.arguments)} operands, not {len(operands)}",
                call.span,
                note=f"block `{block.name}`'s forward({wanted})",
            )
        number = next(self.calls.setdefault(instance.identifier, itertools.count(1)))
        suffix = "" if number == 1 else f"_{number}"
        names: dict[str, s.Expr] = dict(instance.params)
        for argument, operand in zip(block.arguments, operands, strict=True):
            if not isinstance(operand, s.Name | s.Number):
                bound = f"{instance.identifier}_{argument.id}{suffix}"
                self.pending.append(s.Let(bound, operand, argument.span))
                operand = s.Name(bound, argument.span)
            names[argument.id] = operand
        for weight, identifier in instance.weights.items():
            names[weight] = s.Name(identifier, block.span)
        scope = _Scope(instance.members, names, self.spec_names, block)
        for let in block.body:
            value = self.expand(let.value, scope)
            renamed = f"{instance.identifier}_{let.name}{suffix}"
            self.pending.append(s.Let(renamed, value, let.span))
            names[let.name] = s.Name(renamed, let.span)
        return self.expand(block.result, scope)


@attrs.frozen
class _Scope:
    """What names mean where an expression is: the modules it may call, the names bound to
    expressions (a block's arguments, params, weights and lets), and, inside a block, the
    spec's own tensors, which a block does not see."""

    modules: Mapping[str, Instance]
    names: Mapping[str, s.Expr]
    hidden: set[str] | None
    block: s.BlockDef | None = None

    def name(self, node: s.Name) -> s.Expr:
        if node.id in self.names:
            value = self.names[node.id]
            return attrs.evolve(value, span=node.span) if isinstance(value, s.Name) else value
        if self.hidden is not None and node.id in self.hidden:
            assert self.block is not None
            raise SpecError(
                f"block `{self.block.name}` does not see the spec's `{node.id}`",
                node.span,
                note="a block sees its forward's arguments, its constructor's, its own state "
                "and the spec's dims: pass the tensor to forward",
            )
        return node

    def called(self, node: s.Call) -> Instance | None:
        """The instance a call calls: `attn(x)`, or a member, `mlp.c_fc(x)`."""
        if not node.method and node.func in self.modules:
            return self.modules[node.func]
        receiver = node.args[0] if node.method and node.args else None
        if isinstance(receiver, s.Name) and receiver.id in self.modules:
            holder = self.modules[receiver.id]
            if node.func in holder.members:
                return holder.members[node.func]
            if not holder.is_leaf:
                raise SpecError(
                    f"`{holder.path}` has no module `{node.func}`",
                    node.func_span,
                    note="its modules: " + ", ".join(f"`{m}`" for m in holder.members),
                )
        return None


def _bind(
    block: s.BlockDef, call: s.Call, arguments: tuple[s.Expr, ...], keywords: tuple[s.Keyword, ...]
) -> dict[str, s.Expr]:
    """A block's constructor arguments, bound as Python binds them (defaults last)."""
    names = [p.name for p in block.params]
    signature = f"`{block.name}({', '.join(names)})`"
    if len(arguments) > len(names):
        raise SpecError(
            f"`{block.name}` takes at most {len(names)} arguments, not {len(arguments)}",
            call.span,
            note=signature,
        )
    bound = dict(zip(names, arguments, strict=False))
    for keyword in keywords:
        if keyword.name not in names:
            raise SpecError(
                f"`{block.name}` takes no argument `{keyword.name}`", keyword.span, note=signature
            )
        if keyword.name in bound:
            raise SpecError(f"argument `{keyword.name}` is given twice", keyword.span)
        bound[keyword.name] = keyword.value
    for param in block.params:
        if param.name not in bound:
            if param.default is None:
                raise SpecError(f"`{block.name}` needs `{param.name}`", call.span, note=signature)
            bound[param.name] = param.default
    return bound
