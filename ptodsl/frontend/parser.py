"""Text to `syntax.Spec`, with Lark's LALR parser and positions on every node."""

from __future__ import annotations

import math
import re

import attrs
import lark
from lark import Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken, VisitError

from ptodsl.frontend import syntax as s
from ptodsl.frontend.diagnostics import Span, SpecError
from ptodsl.grammar import GRAMMAR_TEXT, KEYWORDS

_OPENERS = {"LPAR", "LSQB"}
_CLOSERS = {"RPAR", "RSQB"}

_FRIENDLY_TERMINALS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "_NL": "a new line",
    "$END": "the end of the file",
    "COMPARE": "a comparison",
}


class _BracketNewlines:
    """Drops line breaks inside () and [] so that expressions may span lines."""

    always_accept = ("_NL",)

    def process(self, stream):
        depth = 0
        for token in stream:
            if token.type in _OPENERS:
                depth += 1
            elif token.type in _CLOSERS:
                depth = max(0, depth - 1)
            elif token.type == "_NL" and depth:
                continue
            yield token


_PARSER = lark.Lark(
    GRAMMAR_TEXT,
    parser="lalr",
    lexer="contextual",
    postlex=_BracketNewlines(),
    propagate_positions=True,
    maybe_placeholders=True,
)


def _span(meta_or_token) -> Span:
    return Span(
        meta_or_token.line,
        meta_or_token.column,
        meta_or_token.end_line,
        meta_or_token.end_column,
    )


def _integer(token: Token) -> int:
    try:
        return int(token)
    except ValueError:  # longer than Python's integer-string limit (4300 digits)
        raise SpecError(f"integer `{token[:20]}...` is out of range", _span(token)) from None


def _number(token: Token) -> s.Number:
    value = float(token)
    if not math.isfinite(value):
        raise SpecError(f"number `{token}` is out of range", _span(token))
    return s.Number(value, str(token), _span(token))


@v_args(meta=True)
class _ToSyntax(Transformer):
    """Builds frozen syntax nodes; every node keeps the span of the text it came from."""

    def start(self, meta, children):
        header, *items = children
        name_token = header
        return s.Spec(str(name_token), _span(name_token), tuple(i for i in items if i))

    def kernel_header(self, meta, children):
        return children[0]

    # declarations
    def dims_decl(self, meta, bindings):
        return tuple(bindings)

    def dim_binding(self, meta, children):
        name, size = children
        if isinstance(size, Token):  # a literal size
            return s.DimDecl(str(name), _integer(size), _span(name))
        return s.DimDecl(str(name), 0, _span(name), computed=_size_operand(size))

    def size_int(self, meta, children):
        (token,) = children
        return token

    def size_name(self, meta, children):
        return s.Name(str(children[0]), _span(children[0]))

    def param_decl(self, meta, children):
        name, param_type, default = children
        return s.ParamDecl(str(name), param_type, default, _span(name))

    def param_dim(self, meta, children):
        return s.Name(str(children[0]), _span(children[0]))

    def param_product(self, meta, children):
        factors = [
            _number(token) if token.type == "INT" else s.Name(str(token), _span(token))
            for token in children
        ]
        product = factors[0]
        for factor in factors[1:]:
            product = s.Binary("mul", product, factor, _span(meta))
        return product

    def param_list(self, meta, children):
        return s.ListExpr(tuple(child for child in children if child is not None), _span(meta))

    def signed_number(self, meta, children):
        return children[0]

    def negative_number(self, meta, children):
        number = children[0]
        return s.Number(-number.value, "-" + number.text, _span(meta))

    def input_decl(self, meta, children):
        name, tensor_type, domain, value = children
        domain_name, domain_span, extent = (None, None, None) if domain is None else domain
        return s.InputDecl(
            str(name), tensor_type, domain_name, domain_span, _span(name), value, extent
        )

    def weight_decl(self, meta, children):
        name, tensor_type, init = children
        return s.WeightDecl(str(name), tensor_type, init, _span(name))

    def buffer_decl(self, meta, children):
        name, tensor_type, init = children
        return s.BufferDecl(str(name), tensor_type, init, _span(name))

    def triangle(self, meta, children):
        function, fill, keyword, diagonal = children
        shift = 0 if diagonal is None else diagonal.value
        if keyword is not None and (str(keyword) != "diagonal" or not float(shift).is_integer()):
            raise SpecError(
                f"`{function}` of a buffer takes `diagonal=` and an integer",
                _span(keyword),
                note=f"`{function}(ones, diagonal=1)`",
            )
        fill_name = s.Name(str(fill), _span(fill))
        return s.Triangle(str(function), fill_name, int(shift), _span(meta))

    def state_decl(self, meta, children):
        name, tensor_type, init = children
        return s.StateDecl(str(name), tensor_type, init, _span(name))

    def scaled_draw(self, meta, children):
        name, factor = children
        return s.Binary("mul", s.Name(str(name), _span(name)), factor, _span(meta))

    def scaled_fill(self, meta, children):
        name, factor = children
        return s.Binary(
            "mul", s.Name(str(name), _span(name)), s.Name(str(factor), _span(factor)), _span(meta)
        )

    def block_def(self, meta, children):
        name, *rest = children
        params = tuple(c for c in rest if isinstance(c, s.BlockParam))
        state = tuple(c for c in rest if isinstance(c, s.WeightDecl | s.ModuleDecl | s.BufferDecl))
        (arguments,) = (c for c in rest if type(c) is tuple)
        body = tuple(
            let
            for c in rest
            for let in (c if isinstance(c, _SplitLets) else (c,))
            if isinstance(let, s.Let)
        )
        result = rest[-1]
        return s.BlockDef(str(name), params, state, arguments, body, result, _span(name))

    def for_stmt(self, meta, children):
        variable, function, count, *statements = children
        if str(function) != "range":
            raise SpecError(
                f"a time loop runs over `range(...)`, not `{function}(...)`",
                _span(function),
                note=f"write `for {variable} in range(T)`",
            )
        body = tuple(
            stmt for c in statements for stmt in (c if isinstance(c, _SplitLets) else (c,))
        )
        return s.For(str(variable), _slice_bound(count), body, _span(meta))

    def step_assign_stmt(self, meta, children):
        target, index, value = children
        return s.StepAssign(str(target), str(index), value, _span(target))

    def index(self, meta, children):
        (position,) = children
        return s.Index(_slice_bound(position), _span(meta))

    def block_param(self, meta, children):
        name, param_type, default = children
        return s.BlockParam(str(name), param_type, default, _span(name))

    def block_forward(self, meta, children):
        return tuple(s.Name(str(token), _span(token)) for token in children)

    def module_decl(self, meta, children):
        name, func, *arguments = children
        module = self.call(meta, [func, *arguments])
        return s.ModuleDecl(str(name), attrs.evolve(module, span=_span(func)), _span(name))

    def domain(self, meta, children):
        name, extent = children
        return str(name), _span(name), extent

    def output_decl(self, meta, children):
        name, tensor_type = children
        return s.OutputDecl(str(name), tensor_type, _span(name))

    def tensor_type(self, meta, children):
        dtype, dims = children
        return s.TensorTypeExpr(str(dtype), _span(dtype), dims, _span(meta))

    def shape(self, meta, children):
        return tuple(child for child in children if child is not None)

    def dim_entry(self, meta, children):
        """One declared axis: a dim, a size, a dim and a constant (`N + 1`), a product of
        dims and sizes alone (`G * CG`: logical axes of their own), or any other size
        expression (`2 * D - 1`, `(G * CG)`): one axis of that size."""
        (size,) = children
        if isinstance(size, _Parens):
            return (_one_axis(size.expr, _span(meta)),)
        factors = _split_factors(_size_operand(size))
        if factors is not None:
            return tuple(_one_axis(factor, factor.span) for factor in factors)
        return (_one_axis(_size_operand(size), _span(meta)),)

    def size_paren(self, meta, children):
        (size,) = children
        return _Parens(_size_operand(size))

    def dim_name(self, meta, children):
        return s.DimRef(str(children[0]), None, _span(children[0]))

    def dim_literal(self, meta, children):
        return s.DimRef(None, _integer(children[0]), _span(children[0]))

    def dim_plus(self, meta, children):
        name, offset = children
        return s.DimRef(str(name), None, _span(meta), _integer(offset))

    def dim_minus(self, meta, children):
        name, offset = children
        return s.DimRef(str(name), None, _span(meta), -_integer(offset))

    def subscript(self, meta, children):
        value, *slices = children
        return s.Subscript(value, tuple(slices), _span(meta))

    def ellipsis(self, meta, children):
        return s.AllAxes(_span(meta))

    def slice(self, meta, children):
        # `a:b` or `a:b:c` (the step may be left out); a literal bound is an int, others
        # expressions of dims and `int` params, sized when the spec is checked
        start, stop, *step = (_slice_bound(child) for child in children)
        return s.Slice(start, stop, _span(meta), step=step[0] if step else None)

    def slice_bound(self, meta, children):  # not called: `?slice_bound` inlines a size
        raise AssertionError("inlined by the grammar")

    def negative_bound(self, meta, children):
        (size,) = children
        if isinstance(size, Token):
            return -_integer(size)
        return s.Binary("sub", s.Number(0.0, "0", _span(meta)), _size_operand(size), _span(meta))

    def let_stmt(self, meta, children):
        *names, value = children
        if len(names) == 1:
            return s.Let(str(names[0]), value, _span(names[0]))
        return _split_lets(names, value)

    def assign_stmt(self, meta, children):
        name, value = children
        return s.Assign(str(name), value, _span(name))

    # expressions
    def int_literal(self, meta, children):
        return _number(children[0])

    float_literal = int_literal

    def name(self, meta, children):
        return s.Name(str(children[0]), _span(children[0]))

    def true(self, meta, children):
        return s.Bool(True, _span(meta))

    def false(self, meta, children):
        return s.Bool(False, _span(meta))

    def _binary(op):  # noqa: N805 - a factory used while the class body runs
        def build(self, meta, children):
            lhs, rhs = children
            return s.Binary(op, lhs, rhs, _span(meta))

        return build

    def _size_binary(op):  # noqa: N805 - a factory used while the class body runs
        def build(self, meta, children):
            lhs, rhs = (_size_operand(c) for c in children)
            return s.Binary(op, lhs, rhs, _span(meta))

        return build

    size_add = _size_binary("add")
    size_sub = _size_binary("sub")
    size_mul = _size_binary("mul")
    size_floordiv = _size_binary("floordiv")
    size_div = _size_binary("div")
    del _size_binary

    add = _binary("add")
    sub = _binary("sub")
    mul = _binary("mul")
    div = _binary("div")
    matmul = _binary("matmul")
    pow_op = _binary("pow")
    del _binary

    def neg(self, meta, children):
        return s.Unary("neg", children[0], _span(meta))

    def compare(self, meta, children):
        lhs, op, rhs = children
        names = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
        return s.Compare(names[str(op)], lhs, rhs, _span(meta))

    def attribute(self, meta, children):
        value, attr = children
        return s.Attribute(value, str(attr), _span(meta))

    def call(self, meta, children):
        func, *arguments = children
        return self._call(func, (), arguments, meta)

    def method_call(self, meta, children):
        receiver, func, *arguments = children
        return self._call(func, (receiver,), arguments, meta)

    @staticmethod
    def _call(func, receiver: tuple, arguments: list, meta) -> s.Call:
        arguments = [a for a in arguments if a is not None]
        args = tuple(a for a in arguments if not isinstance(a, s.Keyword))
        keywords = tuple(a for a in arguments if isinstance(a, s.Keyword))
        first_keyword = next(
            (i for i, a in enumerate(arguments) if isinstance(a, s.Keyword)), len(arguments)
        )
        if any(not isinstance(a, s.Keyword) for a in arguments[first_keyword:]):
            misplaced = next(a for a in arguments[first_keyword:] if not isinstance(a, s.Keyword))
            raise SpecError("positional argument after a keyword argument", misplaced.span)
        return s.Call(
            str(func), _span(func), receiver + args, keywords, _span(meta), method=bool(receiver)
        )

    def keyword(self, meta, children):
        name, value = children
        return s.Keyword(str(name), value, _span(meta))

    def list(self, meta, children):
        return s.ListExpr(tuple(c for c in children if c is not None), _span(meta))


def _describe_expected(expected: set[str]) -> str:
    names = []
    for terminal in sorted(expected):
        if terminal in _FRIENDLY_TERMINALS:
            names.append(_FRIENDLY_TERMINALS[terminal])
            continue
        pattern = _PARSER.get_terminal(terminal).pattern
        names.append(f"`{pattern.value}`" if pattern.type == "str" else terminal.lower())
    names = sorted(set(names))
    if len(names) > 6:
        return ""
    return "; expected " + (
        names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    )


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "_NL":
        return "end of line"
    return f"`{token}`"


def _lines(text: str) -> list[str]:
    """The lines as Lark counts them: at "\n" only (`splitlines` also breaks at \r, \f, ...)."""
    lines = text.split("\n")
    if lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return lines


def _syntax_error(error: lark.exceptions.UnexpectedInput, text: str) -> SpecError:
    if isinstance(error, UnexpectedCharacters):
        char = text[error.pos_in_stream]
        return SpecError(f"unexpected character `{char}`", Span.point(error.line, error.column))
    if isinstance(error, UnexpectedEOF):
        lines = _lines(text)
        span = Span.point(len(lines), len(lines[-1]) + 1)
        return SpecError("unexpected end of file" + _describe_expected(error.expected), span)
    assert isinstance(error, UnexpectedToken)
    token = error.token
    if token.type == "$END":
        lines = _lines(text)
        span = Span.point(len(lines), len(lines[-1]) + 1)
    elif token.type == "_NL":
        # Point just past the end of the line that broke off, not at the next one.
        span = Span.point(token.line, token.column)
    else:
        span = _span(token)
    message = f"unexpected {_describe_token(token)}" + _describe_expected(error.expected)
    note = None
    declaration = _lines(text)[token.line - 1].lstrip() if token.line else ""
    if token.type == "_NL" and "EQUAL" in error.expected and declaration.startswith("weight"):
        note = s.WEIGHT_INIT_NOTE  # `weight b: f32[N]` with no value
    first = re.match(r"[A-Za-z_]\w*", declaration)
    if first and first.group(0) in KEYWORDS and re.match(r"\w+\s*=(?!=)", declaration):
        # `state = x`, `end = x`: a keyword taken for a tensor's name
        note = f"`{first.group(0)}` is a keyword of the spec language; rename the tensor"
    return SpecError(message, span, note=note)


def parse(text: str) -> s.Spec:
    """Parses spec text; raises `SpecError` (without source attached) on bad syntax."""
    if not text.endswith("\n"):
        text += "\n"
    try:
        tree = _PARSER.parse(text)
    except lark.exceptions.UnexpectedInput as error:
        raise _syntax_error(error, text) from None
    try:
        spec = _ToSyntax().transform(tree)
    except VisitError as error:
        if isinstance(error.orig_exc, SpecError | RecursionError):
            raise error.orig_exc from None
        raise
    return _flatten_dims(spec)


@attrs.frozen
class _Parens:
    """A parenthesised size expression, kept as such until its dim entry has seen it:
    `(G * CG)` is one axis where `G * CG` splits."""

    expr: s.Expr


def _size_operand(node) -> s.Expr:
    """A size expression's node: a literal size as a Number, parentheses dropped."""
    if isinstance(node, Token):
        return s.Number(float(_integer(node)), str(node), _span(node))
    if isinstance(node, _Parens):
        return node.expr
    return node


def _slice_bound(node) -> int | s.Expr | None:
    if node is None or isinstance(node, int):
        return node
    if isinstance(node, Token):
        return _integer(node)
    return _size_operand(node)


def _split_factors(size: s.Expr) -> list[s.Name | s.Number] | None:
    """The factors of a product of dims and sizes alone, left to right, or None."""
    if isinstance(size, s.Name | s.Number):
        return [size]
    if isinstance(size, s.Binary) and size.op == "mul":
        lhs, rhs = _split_factors(size.lhs), _split_factors(size.rhs)
        return lhs + rhs if lhs is not None and rhs is not None else None
    return None


def _one_axis(size: s.Expr, span: Span) -> s.DimRef:
    """A declared axis of one size: a dim, a literal, a dim plus or minus a literal, or an
    expression sized when the spec is checked."""
    if isinstance(size, s.Name):
        return s.DimRef(size.id, None, size.span)
    if isinstance(size, s.Number):
        return s.DimRef(None, int(size.value), size.span)
    if (
        isinstance(size, s.Binary)
        and size.op in ("add", "sub")
        and isinstance(size.lhs, s.Name)
        and isinstance(size.rhs, s.Number)
    ):
        offset = int(size.rhs.value)
        return s.DimRef(size.lhs.id, None, span, offset if size.op == "add" else -offset)
    return s.DimRef(None, None, span, expr=size)


class _SplitLets(tuple):
    """The lets one `let a, b = ...` of several names makes, spread into the spec's items."""


DISCARDED = "_"  # a name in a `let` of several that binds nothing, as Python's `_`


def _split_lets(names: list[Token], value: s.Expr) -> _SplitLets:
    """`let q, k, v = E.split(C, axis=2)`: E bound once to a hidden let, then each name to
    its chunk (`split(_split_q_k_v, C, axis=2, part=0, parts=3)`, checked like a slice).
    `let out, _ = attn(x, x, x)`: each name bound to its result of the module's call (the
    call marked with it; the passes compute what results share once). `_` binds nothing."""
    span = _span(names[0])
    given = ", ".join(map(str, names))
    if isinstance(value, s.Call) and value.func != "split" and not value.method:
        return _SplitLets(
            s.Let(str(name), attrs.evolve(value, result=(index, len(names))), _span(name))
            for index, name in enumerate(names)
            if name != DISCARDED
        )
    if not (isinstance(value, s.Call) and value.func == "split"):
        raise SpecError(
            f"a `let` of {len(names)} names takes a split or a module's call of {len(names)} "
            "results",
            value.span,
            note=f"write `let {given} = x.split(size, axis=k)`, or `let {given} = "
            "attn(q, k, v)` for a module returning several values",
        )
    if not value.args:
        raise SpecError("`split` needs a tensor, then the size of its chunks", value.span)
    source, *arguments = value.args
    hidden = "_split_" + "_".join(map(str, names))
    lets = [s.Let(hidden, source, source.span, hidden=True)]
    for part, name in enumerate(names):
        if name == DISCARDED:
            continue
        counts = tuple(
            s.Keyword(key, s.Number(float(count), str(count), span), span)
            for key, count in (("part", part), ("parts", len(names)))
        )
        chunk = s.Call(
            "split",
            value.func_span,
            (s.Name(hidden, source.span), *arguments),
            value.keywords + counts,
            value.span,
            builtin=True,
        )
        lets.append(s.Let(str(name), chunk, _span(name)))
    return _SplitLets(lets)


def _flatten_dims(spec: s.Spec) -> s.Spec:
    """`dims M = 1, N = 2` parses to one tuple; spread it into separate items, each computed
    dim's declared size evaluated from the dims before it and the `int` params."""
    flat = [part for item in spec.items for part in (item if isinstance(item, tuple) else (item,))]
    params = s.size_params(flat)
    items: list[s.Item] = []
    sizes: dict[str, int] = {}
    for part in flat:
        if isinstance(part, s.DimDecl):
            if part.computed is not None:
                part = attrs.evolve(part, size=s.computed_size(part, sizes, params))
            sizes[part.name] = part.size
        items.append(part)
    return s.Spec(spec.name, spec.name_span, tuple(items))
