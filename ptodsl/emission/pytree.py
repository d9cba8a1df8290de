"""Generated Python as syntax trees: built from `ast` nodes, printed by one printer.

Codegen and the torch reference build `ast` statements and expressions; `render` prints
them, breaking what does not fit in `WIDTH` columns Black-style (a call one argument per
line, a sum or product one operand per line in parentheses, a long string as adjacent
literals). Parentheses come from the tree alone (`ast.unparse`'s precedence rules), so an
expression prints as it is built: a spelling cannot change what it means by where it
stands. Three statements the `ast` module lacks: `Comment` and `Blank` lines, and `Verbatim`
for fixed helper source (valid Python, checked when it is made).

The registry spells each op as a template of Python source with holes (`{0}` an operand,
`{axis}` an attribute); `template` parses it once into a tree and `fill` substitutes trees
for the holes.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence

# Generated lines stay within ruff's 100 columns, a margin of one kept.
WIDTH = 99
PROSE_WIDTH = 100  # a docstring's lines: ruff's limit
RECURSION_LIMIT = 20_000  # frames while printing, as while lowering (ptodsl.pipeline)
_STEP = "    "


class Comment(ast.stmt):
    """`# text` (each line of `text` a comment line)."""

    _fields = ("text",)


class Blank(ast.stmt):
    """An empty line, where the layout wants one inside a body."""

    _fields = ()


class Verbatim(ast.stmt):
    """Fixed Python source printed as written (ptodsl's own helper functions)."""

    _fields = ("source",)

    def __init__(self, source: str) -> None:
        super().__init__(source=source.strip("\n"))
        _parse_once(self.source)  # a helper that is not Python is ptodsl's bug, found here


@functools.cache
def _parse_once(source: str) -> ast.Module:
    return ast.parse(source)


class _Unparser(ast._Unparser):  # type: ignore[name-defined]
    """`ast.unparse` that writes strings in double quotes where it can, as ruff's formatter
    and the rest of ptodsl's generated code do (`ast.unparse` writes `repr`'s single)."""

    def _str_literal_helper(self, string, *, quote_types=ast._ALL_QUOTES, **options):  # type: ignore[attr-defined]
        preferred = sorted(quote_types, key=lambda quote: quote[0] != '"')
        return super()._str_literal_helper(string, quote_types=preferred, **options)

    def visit_Slice(self, node):
        """`a:b`, and `start : start + 4` around a bound that is not a name or a number,
        as ruff's formatter (and PEP 8) space a slice."""
        bounds = [bound for bound in (node.lower, node.upper, node.step) if bound is not None]
        simple = all(isinstance(b, ast.Name | ast.Constant) for b in bounds)
        separator = ":" if simple else " : "
        parts = []
        for bound in (node.lower, node.upper) + ((node.step,) if node.step else ()):
            parts.append("" if bound is None else _Unparser().visit(bound))
        self.write(separator.join(parts))

    def _write_constant(self, constant):
        if isinstance(constant, str):
            self._write_str_avoiding_backslashes(constant)
        else:
            super()._write_constant(constant)


def unparse(node: ast.AST) -> str:
    return _Unparser().visit(node)


# ---- building -------------------------------------------------------------------------


def name(identifier: str) -> ast.expr:
    """A name or a dotted path (`pypto.view`); a numbered part indexes, as torch's module
    paths do (`self.network.0.weight` is `self.network[0].weight`)."""
    head, *rest = identifier.split(".")
    node: ast.expr = ast.Name(head, ast.Load())
    for part in rest:
        if part.isdigit():
            node = ast.Subscript(node, ast.Constant(int(part)), ast.Load())
        else:
            node = ast.Attribute(node, part, ast.Load())
    return node


def store(target: str | ast.expr) -> ast.expr:
    """An assignment target: a name or dotted path, or an expression built by the caller
    (`y[:]`)."""
    node = name(target) if isinstance(target, str) else target
    node.ctx = ast.Store()
    return node


def value(python: object) -> ast.expr:
    """A Python value as a literal: numbers (a negative one as unary minus, so that it
    binds as a unit wherever it stands), strings, booleans, None, tuples, and lists."""
    if isinstance(python, ast.expr):
        return python
    if isinstance(python, tuple):
        return ast.Tuple([value(item) for item in python], ast.Load())
    if isinstance(python, list):
        return ast.List([value(item) for item in python], ast.Load())
    if isinstance(python, int | float) and not isinstance(python, bool):
        if math.isnan(python):
            raise ValueError(f"no Python literal for {python!r}")
        if math.copysign(1, python) < 0:  # -0.0 too: its literal is a negation
            return ast.UnaryOp(ast.USub(), value(-python))
        if math.isinf(python):  # a mask's fill: `float("inf")`, no literal spells it
            return call("float", "inf")
    if python is None or isinstance(python, bool | int | float | str):
        return ast.Constant(python)
    raise TypeError(f"no Python literal for {python!r}")


def call(function: str | ast.expr, *arguments: object, **keywords: object) -> ast.Call:
    func = name(function) if isinstance(function, str) else function
    return ast.Call(
        func,
        [value(argument) for argument in arguments],
        [ast.keyword(key, value(item)) for key, item in keywords.items()],
    )


def method(
    receiver: ast.expr, method_name: str, *arguments: object, **keywords: object
) -> ast.Call:
    return call(ast.Attribute(receiver, method_name, ast.Load()), *arguments, **keywords)


def assign(target: str | ast.expr, expression: object, comment: str | None = None) -> ast.Assign:
    """`target = expression`, with a comment at the end of its line."""
    node = ast.Assign([store(target)], value(expression))
    node.trailing_comment = comment
    return node


def statement(expression: ast.expr, comment: str | None = None) -> ast.Expr:
    """An expression evaluated for its effect, with a comment at the end of its line."""
    node = ast.Expr(expression)
    node.trailing_comment = comment
    return node


def returns(*values: ast.expr) -> ast.Return:
    if len(values) == 1:
        return ast.Return(values[0])
    return ast.Return(ast.Tuple(list(values), ast.Load()))


def subscript(base: str | ast.expr, *items: ast.expr) -> ast.expr:
    """`base[a, b]`; an item may be a slice (`whole()`, `span(start, 4)`)."""
    target = name(base) if isinstance(base, str) else base
    index = items[0] if len(items) == 1 else ast.Tuple(list(items), ast.Load())
    return ast.Subscript(target, index, ast.Load())


def whole() -> ast.Slice:
    """`:`, every index of an axis."""
    return ast.Slice()


def span(start: str, length: int) -> ast.Slice:
    """`start:start + length`."""
    return ast.Slice(name(start), ast.BinOp(name(start), ast.Add(), value(length)))


def expression(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def arguments(
    names: Sequence[str],
    annotations: Mapping[str, ast.expr] | None = None,
    defaults: Mapping[str, ast.expr] | None = None,
    keyword_only: Sequence[str] = (),
) -> ast.arguments:
    """A def's parameters: positional `names`, then `keyword_only` ones after `*`, each
    with its annotation and default where given."""
    annotations, defaults = annotations or {}, defaults or {}
    positional = [ast.arg(n, annotations.get(n)) for n in names]
    trailing = [defaults[n] for n in names if n in defaults]
    keywords = [ast.arg(n, annotations.get(n)) for n in keyword_only]
    return ast.arguments(
        posonlyargs=[],
        args=positional,
        vararg=None,
        kwonlyargs=keywords,
        kw_defaults=[defaults.get(n) for n in keyword_only],
        kwarg=None,
        defaults=trailing,
    )


def function(
    function_name: str,
    parameters: ast.arguments,
    body: list[ast.stmt],
    decorators: Sequence[ast.expr] = (),
    docstring: str | None = None,
    one_parameter_a_line: bool = False,
) -> ast.FunctionDef:
    """A def; its docstring's text is printed between triple quotes as given, and its
    parameters one a line when asked (a kernel's tensors, each with its shape)."""
    head = [ast.Expr(ast.Constant(docstring))] if docstring is not None else []
    node = ast.FunctionDef(function_name, parameters, [*head, *body], list(decorators), None)
    node.one_parameter_a_line = one_parameter_a_line
    return node


# ---- registry templates ------------------------------------------------------------------

_HOLE = re.compile(r"\{(\w+)\}")
_HOLE_PREFIX = "_hole_"


@functools.cache
def template(source: str) -> ast.expr:
    """A registry spelling (`torch.clamp({0}, min={1})`, `pypto.cast({0}, pypto.{dtype})`)
    as a tree whose holes are names (or attribute names) `_hole_<key>`."""
    return expression(_HOLE.sub(lambda hole: _HOLE_PREFIX + hole[1], source))


def holes(source: str) -> frozenset[str]:
    """The keys of a template's holes: operand positions and attribute names."""
    return frozenset(_HOLE.findall(source))


def fill(source: str, operands: Sequence[ast.expr], attributes: Mapping[str, object]) -> ast.expr:
    """The template `source` with `operands` and `attributes` (values or trees) in its
    holes; each operand tree stands where its hole does, whatever its precedence."""

    def hole(identifier: str) -> object | None:
        if not identifier.startswith(_HOLE_PREFIX):
            return None
        key = identifier.removeprefix(_HOLE_PREFIX)
        return operands[int(key)] if key.isdigit() else attributes[key]

    def build(node: object) -> object:
        """A new tree for the template's `node` (the cached template stays as it is)."""
        if isinstance(node, list):
            return [build(item) for item in node]
        if not isinstance(node, ast.AST) or isinstance(node, ast.expr_context):
            return node
        if isinstance(node, ast.Name) and (found := hole(node.id)) is not None:
            return value(found)
        fields = {field: build(getattr(node, field)) for field in node._fields}
        if isinstance(node, ast.Attribute) and (found := hole(node.attr)) is not None:
            assert isinstance(found, str), f"attribute hole {node.attr} takes a name"
            fields["attr"] = found
        return type(node)(**fields)

    return build(template(source))


# ---- printing ----------------------------------------------------------------------------


def render(body: Sequence[ast.stmt], width: int = WIDTH) -> str:
    """A module's statements as source text: two blank lines around top-level defs and
    classes, one before a method. What the printer lays out itself (an expression broken
    across lines, a docstring) is parsed back and must be what it was built from: a
    printing fault is ptodsl's, raised here, never a module that means something else. A
    line that fits is `ast.unparse`'s own text."""
    depth_limit = sys.getrecursionlimit()
    # ast.unparse recurses a few frames per level: a flat sum of 500 terms is a tree as deep.
    sys.setrecursionlimit(max(depth_limit, RECURSION_LIMIT))
    try:
        printer = _Printer(width)
        docstring, rest = printer.docstring(body, "")
        lines = [*docstring, *([""] if docstring and rest else [])]
        lines += printer.block(rest, "", "module")
    finally:
        sys.setrecursionlimit(depth_limit)
    return "\n".join(lines).rstrip("\n") + "\n"


def _misprinted() -> AssertionError:
    return AssertionError("generated Python does not parse back to the tree it was built from")


def _same(built: object, parsed: object) -> bool:
    """Whether two trees are the same (contexts aside)."""
    kind = type(built)
    if kind is not type(parsed):
        return False
    if kind is list:
        return len(built) == len(parsed) and all(map(_same, built, parsed))
    if not isinstance(built, ast.AST):
        # 1 and 1.0, 0.0 and -0.0 print differently: equal values are not enough
        return repr(built) == repr(parsed)
    if isinstance(built, ast.expr_context):
        return True
    return all(_same(getattr(built, f, None), getattr(parsed, f, None)) for f in built._fields)


# Python's binary operators from loosest to tightest, for breaking a chain of one level
# across lines: an operand at a looser level keeps its parentheses.
_LEVELS = (
    (ast.BitOr,),
    (ast.BitXor,),
    (ast.BitAnd,),
    (ast.LShift, ast.RShift),
    (ast.Add, ast.Sub),
    (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.MatMult),
    (ast.Pow,),
)
_SYMBOLS = {
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.MatMult: "@",
    ast.Pow: "**",
}


def _level(node: ast.expr) -> int | None:
    if isinstance(node, ast.BinOp):
        return next(i for i, ops in enumerate(_LEVELS) if isinstance(node.op, ops))
    return None


_COMPARISONS = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}


def _binary_place(op: ast.operator, position: int) -> Callable[[ast.expr], ast.expr]:
    """Where a chain's operand stands: the left of its first operator, else a right."""
    other = ast.Name("_", ast.Load())
    if position == 0:
        return lambda operand: ast.BinOp(operand, op, other)
    return lambda operand: ast.BinOp(other, op, operand)


def _compare_place(op: ast.cmpop, position: int) -> Callable[[ast.expr], ast.expr]:
    other = ast.Name("_", ast.Load())
    if position == 0:
        return lambda operand: ast.Compare(operand, [op], [other])
    return lambda operand: ast.Compare(other, [op], [operand])


def _chain(node: ast.BinOp) -> list[tuple[ast.operator, ast.expr]]:
    """A left-associative run of one level: `a + b - c` is [(+, a), (+, b), (-, c)], each
    operand with the operator before it (the first with the one after it)."""
    level = _level(node)
    head: list[tuple[ast.operator, ast.expr]]
    if _level(node.left) == level and not isinstance(node.op, ast.Pow):
        head = _chain(node.left)
    else:
        head = [(node.op, node.left)]
    return [*head, (node.op, node.right)]


def _parameters(parameters: ast.arguments) -> list[str]:
    """A def's parameters one piece each (`x: pypto.Tensor(...)`, `alpha=0.7`, `*`)."""

    def piece(argument: ast.arg, default: ast.expr | None) -> str:
        text = unparse(argument)
        if default is None:
            return text
        return (
            f"{text} = {unparse(default)}" if argument.annotation else f"{text}={unparse(default)}"
        )

    positional = parameters.args
    defaults = [None] * (len(positional) - len(parameters.defaults)) + parameters.defaults
    pieces = [piece(a, d) for a, d in zip(positional, defaults, strict=True)]
    if parameters.kwonlyargs:
        pieces.append("*")
        pieces += [
            piece(a, d) for a, d in zip(parameters.kwonlyargs, parameters.kw_defaults, strict=True)
        ]
    return pieces


class _Printer:
    def __init__(self, width: int):
        self.width = width

    # -- statements --
    def block(self, body: Sequence[ast.stmt], indent: str, kind: str = "function") -> list[str]:
        """A body's lines: at the top of a module two blank lines around each def, class
        and helper; in a class one before each method after the first; elsewhere the
        `Blank` statements the builder put."""
        lines: list[str] = []
        spaced = (ast.FunctionDef, ast.ClassDef, Verbatim)
        for position, stmt in enumerate(body):
            if position and kind == "module":
                if isinstance(stmt, spaced) or isinstance(body[position - 1], spaced):
                    lines += ["", ""]
            elif position and kind == "class" and isinstance(stmt, ast.FunctionDef):
                lines.append("")
            lines += self.one(stmt, indent)
        return lines

    def one(self, stmt: ast.stmt, indent: str) -> list[str]:
        lines = self.statement(stmt, indent)
        comment = getattr(stmt, "trailing_comment", None)
        if comment:
            lines[-1] += f"  # {comment}"
        return lines

    def statement(self, stmt: ast.stmt, indent: str) -> list[str]:
        inner = indent + _STEP
        match stmt:
            case Comment(text=text):
                return [f"{indent}# {line}".rstrip() for line in text.split("\n")]
            case Blank():
                return [""]
            case Verbatim(source=source):
                return [f"{indent}{line}" if line else "" for line in source.split("\n")]
            case ast.FunctionDef():
                return self.function(stmt, indent)
            case ast.ClassDef():
                bases = ", ".join(map(unparse, stmt.bases))
                head = [
                    f"{indent}class {stmt.name}({bases}):"
                    if bases
                    else f"{indent}class {stmt.name}:"
                ]
                docstring, body = self.docstring(stmt.body, inner)
                if docstring and body:
                    docstring.append("")
                return head + docstring + self.block(body, inner, "class")
            case ast.For():
                head = self.expression(stmt.iter, indent, f"for {unparse(stmt.target)} in ", ":")
                return head + self.block(stmt.body, inner)
            case ast.If():
                lines = self.expression(stmt.test, indent, "if ", ":") + self.block(
                    stmt.body, inner
                )
                if stmt.orelse:
                    lines += [f"{indent}else:", *self.block(stmt.orelse, inner)]
                return lines
            case ast.Assign(targets=[ast.Tuple(elts=targets)], value=ast.Tuple(elts=values)):
                # `a, b = 1, 2`, as written by hand (ast.unparse adds parentheses)
                text = f"{', '.join(map(unparse, targets))} = {', '.join(map(unparse, values))}"
                return [indent + text]
            case ast.Assign(targets=[target], value=assigned):
                return self.expression(assigned, indent, f"{unparse(target)} = ")
            case ast.Return(value=returned) if returned is not None:
                if isinstance(returned, ast.Tuple):  # `return a, b`, as written by hand
                    line = f"{indent}return {', '.join(map(unparse, returned.elts))}"
                    if len(line) <= self.width:
                        return [line]
                return self.expression(returned, indent, "return ")
            case ast.Expr(value=evaluated):
                return self.expression(evaluated, indent)
        return [indent + line for line in unparse(stmt).split("\n")]

    def docstring(
        self, body: Sequence[ast.stmt], indent: str
    ) -> tuple[list[str], Sequence[ast.stmt]]:
        """A leading docstring's lines, and the statements after it. Its text's lines are
        kept where each fits within `PROSE_WIDTH` with the quotes, else each paragraph's
        words are wrapped there (long names stay whole); lines after the first are
        indented."""
        match body:
            case [ast.Expr(value=ast.Constant(value=str(text))), *rest]:
                quoted = f'"""{_escaped(text)}"""'
                paragraphs = [_prose(p.split("\n"), indent) for p in quoted.split("\n\n")]
                printed = "\n\n".join(paragraphs)
                # wrapping and indenting change a docstring's whitespace, never its words
                if ast.literal_eval(printed).split() != text.split():
                    raise _misprinted()
                lines = printed.split("\n")
                return [indent + lines[0], *(line and indent + line for line in lines[1:])], rest
        return [], body

    def function(self, function: ast.FunctionDef, indent: str) -> list[str]:
        lines = [line for d in function.decorator_list for line in self.expression(d, indent, "@")]
        pieces = _parameters(function.args)
        head = f"{indent}def {function.name}({', '.join(pieces)}):"
        if len(head) <= self.width and not getattr(function, "one_parameter_a_line", False):
            lines.append(head)
        else:
            lines += [
                f"{indent}def {function.name}(",
                *(f"{indent}{_STEP}{piece}," for piece in pieces),
                f"{indent}):",
            ]
        docstring, body = self.docstring(function.body, indent + _STEP)
        return lines + docstring + self.block(body, indent + _STEP)

    # -- expressions --
    def expression(
        self, node: ast.expr, indent: str, prefix: str = "", suffix: str = ""
    ) -> list[str]:
        """`prefix node suffix` on one line within the width where it fits, else broken;
        broken lines are parsed back (in parentheses, without the prefix and suffix) and
        must be the expression they were printed from."""
        lines = self.laid_out(node, indent, prefix, suffix)
        if len(lines) > 1:
            text = "\n".join(lines)
            start, end = len(indent) + len(prefix), len(text) - len(suffix)
            parsed = ast.parse(f"(\n{text[start:end]}\n)", mode="eval").body
            if not _same(node, parsed):
                raise _misprinted()
        return lines

    def laid_out(
        self, node: ast.expr, indent: str, prefix: str = "", suffix: str = "", broken: bool = False
    ) -> list[str]:
        """`expression`'s lines, unchecked (its parts are laid out by this recursively)."""
        line = f"{indent}{prefix}{unparse(node)}{suffix}"
        if len(line) <= self.width and not broken:
            return [line]
        inner = indent + _STEP
        if isinstance(node, ast.Call):
            items = [("", argument) for argument in node.args]
            items += [(f"{k.arg}=" if k.arg else "**", k.value) for k in node.keywords]
            function = node.func
            head = [f"{indent}{prefix}{unparse(function)}("]
            chained = isinstance(function, ast.Attribute) and isinstance(function.value, ast.Call)
            if chained and len(head[0]) > self.width:  # `f(...).contiguous()`: f(...) broken
                method = f".{function.attr}("
                if not items:
                    return self.laid_out(function.value, indent, prefix, f"{method}){suffix}")
                head = self.laid_out(function.value, indent, prefix, method)
            return [
                *head,
                *(
                    line
                    for keyword, argument in items
                    for line in self.laid_out(argument, inner, keyword, ",")
                ),
                f"{indent}){suffix}",
            ]
        if isinstance(node, ast.BinOp):
            lines = [f"{indent}{prefix}("]
            for position, (op, operand) in enumerate(_chain(node)):
                symbol = f"{_SYMBOLS[type(op)]} " if position else ""
                lines += self.operand(operand, _binary_place(op, position), inner, symbol)
            return lines + [f"{indent}){suffix}"]
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            (comparison,), (right,) = node.ops, node.comparators
            symbol = _COMPARISONS[type(comparison)]
            lines = [f"{indent}{prefix}("]
            for position, operand in enumerate((node.left, right)):
                place = _compare_place(comparison, position)
                lines += self.operand(operand, place, inner, f"{symbol} " if position else "")
            return lines + [f"{indent}){suffix}"]
        if isinstance(node, ast.List | ast.Tuple) and node.elts:
            opening, closing = ("[", "]") if isinstance(node, ast.List) else ("(", ")")
            return [
                f"{indent}{prefix}{opening}",
                *(line for e in node.elts for line in self.laid_out(e, inner, "", ",")),
                f"{indent}{closing}{suffix}",
            ]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value:
            return self.string(node.value, indent, prefix, suffix)
        return [line]

    def operand(
        self, operand: ast.expr, place: Callable[[ast.expr], ast.expr], indent: str, operator: str
    ) -> list[str]:
        """One operand of a broken chain, `place(x)` putting an operand where this one
        stands: in parentheses exactly where `ast.unparse` puts them there (an operand
        that binds looser than the chain, or as loose on the right of `-`, `/`, `**`)."""
        placeholder = "_operand_"
        before, after = unparse(place(ast.Name(placeholder, ast.Load()))).split(placeholder)
        text = unparse(place(operand))[len(before) : -len(after) or None]
        if text == unparse(operand):
            return self.laid_out(operand, indent, operator)
        line = f"{indent}{operator}{text}"
        if len(line) <= self.width or not isinstance(operand, ast.BinOp | ast.Compare):
            return [line]
        # broken, a chain brings its own parentheses
        return self.laid_out(operand, indent, operator, broken=True)

    def string(self, text: str, indent: str, prefix: str, suffix: str) -> list[str]:
        """A long string as adjacent literals split after spaces (it parses back as one)."""
        inner = indent + _STEP
        room = self.width - len(inner) - 2
        words = re.findall(r"\S*\s*", text)
        pieces, current = [], ""
        for word in words:
            if current and len(unparse(ast.Constant(current + word))) > room:
                pieces.append(current)
                current = ""
            current += word
        pieces.append(current)
        literals = [f"{inner}{unparse(ast.Constant(piece))}" for piece in pieces if piece]
        return [f"{indent}{prefix}(", *literals, f"{indent}){suffix}"]


def _escaped(text: str) -> str:
    """A docstring's text as source: backslashes and control characters escaped, and a
    quote beside a quote like it or at the very end (a file name in the text cannot end
    the docstring, or the raw string a KernelBench answer embeds the module in)."""

    def escape(position: int, character: str) -> str:
        if character == "\\":
            return "\\\\"
        if character in "\"'":
            neighbours = text[max(position - 1, 0) : position] + text[position + 1 : position + 2]
            if character in neighbours or position == len(text) - 1:
                return "\\" + character
        if character != "\n" and not character.isprintable():
            return character.encode("unicode_escape").decode("ascii")
        return character

    return "".join(escape(position, character) for position, character in enumerate(text))


def _prose(lines: list[str], indent: str) -> str:
    """A paragraph's lines as given when each fits within `PROSE_WIDTH` after `indent`,
    else its words wrapped there at spaces only."""
    if all(len(indent + line) <= PROSE_WIDTH for line in lines):
        return "\n".join(lines)
    closing = lines[-1] == '"""'  # closing quotes on a line of their own stay there
    words = " ".join(line.strip() for line in lines[: -1 if closing else None]).split()
    wrapped = textwrap.wrap(
        " ".join(words),
        width=PROSE_WIDTH - len(indent),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(wrapped + (['"""'] if closing else []))
