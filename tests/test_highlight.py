"""Highlighting of specs: the Pygments lexer (ptodsl.frontend.highlight) splits every example as the
parser does, the TextMate grammar (grammar/pto.tmLanguage.json) colours the same text the
same way, and both know every keyword of grammar/ptodsl.lark."""

from __future__ import annotations

import functools
import json
import re

import pytest
from conftest import EXAMPLES, ROOT
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, Token, Whitespace

from ptodsl.frontend.highlight import (
    BLOCK_KEYWORDS,
    CONSTANT_NAMES,
    DECLARATION_KEYWORDS,
    DOMAIN_KEYWORD,
    DOMAIN_NAMES,
    TYPE_NAMES,
    PtoLexer,
)

GRAMMAR = (ROOT / "grammar" / "ptodsl.lark").read_text(encoding="utf-8")
TEXTMATE = json.loads((ROOT / "grammar" / "pto.tmLanguage.json").read_text(encoding="utf-8"))
IDS = [str(path.relative_to(ROOT / "examples")) for path in EXAMPLES]

# The Pygments token each TextMate scope stands for.
TOKEN_OF_SCOPE = {
    "comment.line.number-sign.pto": Comment.Single,
    "keyword.other.declaration.pto": Keyword.Declaration,
    "entity.name.function.pto": Name.Function,
    "entity.name.variable.pto": Name.Variable,
    "keyword.other.domain.pto": Keyword,
    "support.constant.domain.pto": Name.Constant,
    "storage.type.dtype.pto": Keyword.Type,
    "constant.language.pto": Keyword.Constant,
    "support.function.pto": Name.Builtin,
    "variable.parameter.pto": Name.Attribute,
    "constant.numeric.float.pto": Number.Float,
    "constant.numeric.integer.pto": Number.Integer,
    "keyword.operator.comparison.pto": Operator,
    "keyword.operator.arithmetic.pto": Operator,
    "keyword.operator.assignment.pto": Operator,
    "punctuation.section.group.begin.pto": Punctuation,
    "punctuation.section.group.end.pto": Punctuation,
    "punctuation.separator.ellipsis.pto": Punctuation,
    "punctuation.accessor.pto": Punctuation,
    "punctuation.separator.comma.pto": Punctuation,
    "punctuation.separator.colon.pto": Punctuation,
}


def lexed(text: str) -> list[tuple[int, object, str]]:
    return list(PtoLexer().get_tokens_unprocessed(text))


def coloured(tokens: list[tuple[int, object, str]]) -> list[tuple[int, object, str]]:
    """The tokens a colour scheme marks: not blanks, not plain names (TextMate leaves both
    unscoped)."""
    return [
        (start, token, value) for start, token, value in tokens if token not in {Whitespace, Name}
    ]


# ---- the Pygments lexer ------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_lexer_splits_every_example_without_errors(path):
    text = path.read_text(encoding="utf-8")
    tokens = lexed(text)
    assert [value for _, token, value in tokens if token in Token.Error] == []
    assert "".join(value for _, _, value in tokens) == text


SAMPLES = {
    "kernel sample  # the header": [
        (Keyword.Declaration, "kernel"),
        (Name.Function, "sample"),
        (Comment.Single, "# the header"),
    ],
    "dims M = 64, N = 1024": [
        (Keyword.Declaration, "dims"),
        (Name.Variable, "M"),
        (Operator, "="),
        (Number.Integer, "64"),
        (Punctuation, ","),
        (Name.Variable, "N"),
        (Operator, "="),
        (Number.Integer, "1024"),
    ],
    "param eps: f32 = 1e-5": [
        (Keyword.Declaration, "param"),
        (Name.Variable, "eps"),
        (Punctuation, ":"),
        (Keyword.Type, "f32"),
        (Operator, "="),
        (Number.Float, "1e-5"),
    ],
    "input t: i64[N] in range(C)": [
        (Keyword.Declaration, "input"),
        (Name.Variable, "t"),
        (Punctuation, ":"),
        (Keyword.Type, "i64"),
        (Punctuation, "["),
        (Name, "N"),
        (Punctuation, "]"),
        (Keyword, "in"),
        (Name.Constant, "range"),
        (Punctuation, "("),
        (Name, "C"),
        (Punctuation, ")"),
    ],
    # A declaration keyword is one only where a line starts: the parser's contextual lexer
    # reads the second `weight` as a name.
    "weight weight: bf16[N] = ones": [
        (Keyword.Declaration, "weight"),
        (Name.Variable, "weight"),
        (Punctuation, ":"),
        (Keyword.Type, "bf16"),
        (Punctuation, "["),
        (Name, "N"),
        (Punctuation, "]"),
        (Operator, "="),
        (Name, "ones"),
    ],
    "weight fc: linear(K, N, bias=false)": [
        (Keyword.Declaration, "weight"),
        (Name.Variable, "fc"),
        (Punctuation, ":"),
        (Name.Builtin, "linear"),
        (Punctuation, "("),
        (Name, "K"),
        (Punctuation, ","),
        (Name, "N"),
        (Punctuation, ","),
        (Name.Attribute, "bias"),
        (Operator, "="),
        (Keyword.Constant, "false"),
        (Punctuation, ")"),
    ],
    "let h = cast(x1, f16) ** 2 / .5e3 - pi": [
        (Keyword.Declaration, "let"),
        (Name.Variable, "h"),
        (Operator, "="),
        (Name.Builtin, "cast"),
        (Punctuation, "("),
        (Name, "x1"),
        (Punctuation, ","),
        (Keyword.Type, "f16"),
        (Punctuation, ")"),
        (Operator, "**"),
        (Number.Integer, "2"),
        (Operator, "/"),
        (Number.Float, ".5e3"),
        (Operator, "-"),
        (Keyword.Constant, "pi"),
    ],
    # Inside brackets the parser drops line breaks: `weight` starting a line is a name and
    # `min=` a keyword argument; a comparison's `==` is no keyword argument.
    "y = clamp(\n    weight,  # wrapped\n    min=-1.0)[..., ::2] @ h.reshape(B, C) == 0": [
        (Name, "y"),
        (Operator, "="),
        (Name.Builtin, "clamp"),
        (Punctuation, "("),
        (Name, "weight"),
        (Punctuation, ","),
        (Comment.Single, "# wrapped"),
        (Name.Attribute, "min"),
        (Operator, "="),
        (Operator, "-"),
        (Number.Float, "1.0"),
        (Punctuation, ")"),
        (Punctuation, "["),
        (Punctuation, "..."),
        (Punctuation, ","),
        (Punctuation, ":"),
        (Punctuation, ":"),
        (Number.Integer, "2"),
        (Punctuation, "]"),
        (Operator, "@"),
        (Name, "h"),
        (Punctuation, "."),
        (Name.Builtin, "reshape"),
        (Punctuation, "("),
        (Name, "B"),
        (Punctuation, ","),
        (Name, "C"),
        (Punctuation, ")"),
        (Operator, "=="),
        (Number.Integer, "0"),
    ],
}


@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_lexer_marks_each_kind_of_word(text):
    tokens = [(token, value) for _, token, value in lexed(text + "\n") if token is not Whitespace]
    assert tokens == SAMPLES[text]


# ---- the TextMate grammar ----------------------------------------------------------------


def textmate_regexes(rule) -> list[str]:
    if isinstance(rule, dict):
        own = [rule[key] for key in ("match", "begin", "end") if key in rule]
        return own + [regex for value in rule.values() for regex in textmate_regexes(value)]
    if isinstance(rule, list):
        return [regex for value in rule for regex in textmate_regexes(value)]
    return []


@functools.cache
def compiled(regex: str) -> re.Pattern:
    # TextMate matches line by line: `^` and `$` are a line's start and end.
    return re.compile(regex, re.MULTILINE)


def test_textmate_grammar_is_valid_for_python_re():
    assert TEXTMATE["scopeName"] == "source.pto"
    assert TEXTMATE["fileTypes"] == ["pto"]
    regexes = textmate_regexes(TEXTMATE)
    assert len(regexes) > 10
    for regex in regexes:
        compiled(regex)


def leaf_rules(rules: list[dict]):
    """The rules that match text, in the order TextMate tries them, includes expanded."""
    for rule in rules:
        if "include" in rule:
            rule = TEXTMATE["repository"][rule["include"].removeprefix("#")]
        if "match" in rule or "begin" in rule:
            yield rule
        else:
            yield from leaf_rules(rule["patterns"])


def scoped(found: re.Match, captures: dict, scope: str | None = None):
    if not captures:
        return [(found.start(), TOKEN_OF_SCOPE[scope], found.group())] if scope else []
    return [
        (found.start(int(group)), TOKEN_OF_SCOPE[capture["name"]], found.group(int(group)))
        for group, capture in captures.items()
        if found.group(int(group))
    ]


def textmate_tokens(text: str) -> list[tuple[int, object, str]]:
    """What an editor colours, as Pygments tokens. TextMate searches for the leftmost match
    of the open rule's end and patterns; trying them at each position in turn finds the same
    (ties go to the end, then to the first pattern)."""
    tokens = []
    open_rules = [TEXTMATE]
    position = 0
    while position < len(text):
        rule = open_rules[-1]
        end = "end" in rule and compiled(rule["end"]).match(text, position)
        if end:
            tokens += scoped(end, rule.get("endCaptures", {}))
            open_rules.pop()
            position = end.end()
            continue
        for pattern in leaf_rules(rule["patterns"]):
            found = compiled(pattern.get("match") or pattern["begin"]).match(text, position)
            if found and found.end() > position:
                if "match" in pattern:
                    tokens += scoped(found, pattern.get("captures", {}), pattern.get("name"))
                else:
                    tokens += scoped(found, pattern.get("beginCaptures", {}))
                    open_rules.append(pattern)
                position = found.end()
                break
        else:
            position += 1
    return tokens


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_textmate_grammar_colours_examples_as_the_lexer(path):
    text = path.read_text(encoding="utf-8")
    assert textmate_tokens(text) == coloured(lexed(text))


def every_word_spec() -> str:
    """Every dtype, domain, constant and declaration keyword the lexer takes from ptodsl, in
    the places they are written (not a spec that checks: only its words matter)."""
    lines = [f"{keyword} name{index}" for index, keyword in enumerate(DECLARATION_KEYWORDS)]
    lines += [f"input t{index}: {dtype}[N]" for index, dtype in enumerate(TYPE_NAMES)]
    lines += [f"input d{index}: f32[N] in {domain}" for index, domain in enumerate(DOMAIN_NAMES)]
    lines += [f"let c{index} = {constant}" for index, constant in enumerate(CONSTANT_NAMES)]
    return "\n".join(lines) + "\n"


def test_textmate_grammar_knows_every_word_of_ptodsl():
    text = every_word_spec()
    tokens = coloured(lexed(text))
    words = {value: token for _, token, value in tokens}
    assert {keyword: words[keyword] for keyword in DECLARATION_KEYWORDS} == dict.fromkeys(
        DECLARATION_KEYWORDS, Keyword.Declaration
    )
    assert {dtype: words[dtype] for dtype in TYPE_NAMES} == dict.fromkeys(TYPE_NAMES, Keyword.Type)
    assert {domain: words[domain] for domain in DOMAIN_NAMES} == dict.fromkeys(
        DOMAIN_NAMES, Name.Constant
    )
    assert textmate_tokens(text) == tokens


# ---- both against the grammar ------------------------------------------------------------


def grammar_declaration_keywords() -> set[str]:
    """The keyword each kind of line starts with: the kernel header's and each item's."""
    items = re.search(r"^\?item:(.*?)\n\n", GRAMMAR, re.MULTILINE | re.DOTALL).group(1)
    rules = ["kernel_header", *re.findall(r"\w+", items)]
    firsts = (re.search(rf'^{rule}: "(\w+)"', GRAMMAR, re.MULTILINE) for rule in rules)
    return {first.group(1) for first in firsts if first}


def test_declaration_keywords_are_the_grammars():
    keywords = grammar_declaration_keywords()
    assert len(keywords) >= 7
    assert set(DECLARATION_KEYWORDS) == keywords
    for keyword in keywords:
        declaration = f"{keyword} name\n"
        assert coloured(lexed(declaration))[:1] == [(0, Keyword.Declaration, keyword)]
        assert textmate_tokens(declaration)[:1] == [(0, Keyword.Declaration, keyword)]


def test_every_word_of_the_grammar_is_highlighted():
    words = set(re.findall(r'"([a-z]+)"', GRAMMAR))
    assert words <= {*DECLARATION_KEYWORDS, *BLOCK_KEYWORDS, DOMAIN_KEYWORD, *CONSTANT_NAMES}
