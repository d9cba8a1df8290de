"""Syntax highlighting of ptodsl specs (`.pto` files) for Pygments: `PtoLexer` marks the
declaration keywords, the names they declare, dtypes, domains, constants, numbers, calls and
keyword arguments. With ptodsl installed through its `pygments.lexers` entry point,
`pygmentize -l pto file.pto` highlights a spec on a terminal (`-f html` for a page); from
Python, `pygments.highlight(text, PtoLexer(), formatter)` after
`from ptodsl.frontend.highlight import PtoLexer`. Only this module imports Pygments, so the rest of
ptodsl runs without it. `grammar/pto.tmLanguage.json` is the same highlighting for editors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pygments.lexer import RegexLexer, bygroups, include
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, Whitespace

from ptodsl.frontend import typecheck
from ptodsl.grammar import GRAMMAR_TEXT
from ptodsl.ir.nodes import DType

# The grammar's keywords (tests/test_highlight.py checks them against grammar/ptodsl.lark).
NAMING_KEYWORDS = (
    "param",
    "input",
    "weight",
    "state",
    "buffer",
    "output",
    "let",
    "for",
)  # each declares the next name (`for t in range(T)`: the step)
DECLARATION_KEYWORDS = ("kernel", "block", "dims", *NAMING_KEYWORDS)
BLOCK_KEYWORDS = ("forward", "return", "end")  # the lines of a block after its state
DOMAIN_KEYWORD = "in"
CONSTANT_NAMES = ("true", "false", *typecheck.CONSTANTS)
# The dtypes, and the types of a param fixed at construction (`param dim: int = 1`).
_FIXED_PARAM_TYPES = {typecheck.FIXED_PARAM_TYPE, typecheck.FIXED_FLAG_TYPE}
TYPE_NAMES = tuple(sorted({dtype.value for dtype in DType} | _FIXED_PARAM_TYPES))
DOMAIN_NAMES = tuple(typecheck.DOMAINS)


def _terminal(name: str) -> str:
    """The regex of one of the grammar's terminals, so that text splits as the parser splits it."""
    return re.search(rf"^{name}: /(.+)/$", GRAMMAR_TEXT, re.MULTILINE).group(1)


def _one_of(names: Iterable[str]) -> str:
    """A regex for any one of `names` as a whole word."""
    return r"\b(?:" + "|".join(map(re.escape, names)) + r")\b"


_NAME = _terminal("NAME")
_BLANKS = r"[ \t]"  # never a line break: a declaration is a keyword at a line's start


class PtoLexer(RegexLexer):
    """Tokens of a ptodsl spec, in the states the parser is in: at a line's start a keyword
    declares, inside brackets (where line breaks are dropped) `name=` is a keyword argument."""

    name = "ptodsl"
    aliases = ["pto", "ptodsl"]
    filenames = ["*.pto"]

    tokens = {
        "root": [
            (
                rf"^({_BLANKS}*)(kernel|block)\b(?:({_BLANKS}+)({_NAME}))?",
                bygroups(Whitespace, Keyword.Declaration, Whitespace, Name.Function),
            ),
            (
                rf"^({_BLANKS}*)({_one_of(BLOCK_KEYWORDS)})",
                bygroups(Whitespace, Keyword.Declaration),
            ),
            (
                rf"^({_BLANKS}*)({_one_of(NAMING_KEYWORDS)})(?:({_BLANKS}+)({_NAME}))?",
                bygroups(Whitespace, Keyword.Declaration, Whitespace, Name.Variable),
            ),
            (rf"^({_BLANKS}*)(dims)\b", bygroups(Whitespace, Keyword.Declaration), "dims"),
            include("expression"),
        ],
        "dims": [
            (r"\n", Whitespace, "#pop"),
            (rf"({_NAME})({_BLANKS}*)(=)", bygroups(Name.Variable, Whitespace, Operator)),
            include("expression"),
        ],
        "group": [
            (rf"({_NAME})({_BLANKS}*)(=)(?!=)", bygroups(Name.Attribute, Whitespace, Operator)),
            (r"[)\]]", Punctuation, "#pop"),
            include("expression"),
        ],
        "expression": [
            (_terminal("COMMENT"), Comment.Single),
            (r"\n|[ \t\f\r]+", Whitespace),
            (r"[(\[]", Punctuation, "group"),
            (
                rf"({DOMAIN_KEYWORD})\b(?:({_BLANKS}+)({_one_of(DOMAIN_NAMES)}))?",
                bygroups(Keyword, Whitespace, Name.Constant),
            ),
            (_one_of(TYPE_NAMES), Keyword.Type),
            (_one_of(CONSTANT_NAMES), Keyword.Constant),
            # Any call: the functions are ptodsl.ir.ops' registry and torch's modules, too many
            # and too changeable to list here.
            (rf"{_NAME}(?={_BLANKS}*\()", Name.Builtin),
            (_NAME, Name),
            (_terminal("FLOAT"), Number.Float),
            (_terminal("INT"), Number.Integer),
            (r"\*\*|[<>=!]=|[-+*/@<>=]", Operator),
            (r"\.\.\.|[.,:]", Punctuation),
        ],
    }
