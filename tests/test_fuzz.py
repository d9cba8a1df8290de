"""Fuzzing the front end: whatever the text, `ptodsl.compile` either returns a module whose
source is valid Python or raises a `SpecError` located inside the text. Anything else (a
traceback, a hang, a module Python cannot parse) is a bug.

CI runs the deterministic "ci" hypothesis profile (tests/conftest.py). A long session:

    PTODSL_FUZZ_PROFILE=long .venv/bin/python -m pytest tests/test_fuzz.py -x \
        --hypothesis-show-statistics
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptodsl
from ptodsl.frontend.diagnostics import SpecError

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "examples").rglob("*.pto"))


def assert_compiles_or_located_error(text: str) -> None:
    try:
        compiled = ptodsl.compile(text, name="fuzz.pto")
    except SpecError as error:
        assert_located(error, text)
        return
    compile(compiled.source, "fuzz_kernel.py", "exec")
    compile(compiled.reference_source, "fuzz_reference.py", "exec")


def assert_located(error: SpecError, text: str) -> None:
    # Lark counts lines at "\n" only; parse() appends one when the text lacks it.
    lines = (text if text.endswith("\n") else text + "\n").split("\n")
    span = error.span
    assert 1 <= span.line <= len(lines), (span, error.message)
    assert 1 <= span.column <= len(lines[span.line - 1]) + 1, (span, error.message)
    rendered = error.render()
    assert f"fuzz.pto:{span.line}:{span.column}: error: " in rendered, rendered


# ---- (a) random text ---------------------------------------------------------------------


@given(st.text(max_size=300))
def test_random_text(text):
    assert_compiles_or_located_error(text)


@given(st.text(max_size=200))
def test_random_text_after_a_header(text):
    assert_compiles_or_located_error("kernel k\ndims M = 4, N = 8\ninput x: f32[M, N]\n" + text)


# ---- (b) token soup from the grammar's terminals -------------------------------------------

KEYWORDS = ["kernel", "dims", "param", "input", "weight", "output", "let", "in", "true", "false"]
NAMES = [
    "k", "x", "y", "z", "M", "N", "K", "a", "b", "t", "f32", "f16", "bf16", "f64", "int",
    "positive", "unit", "sign", "softmax", "real", "ones", "zeros", "exp", "log", "sqrt",
    "rsqrt", "abs", "sigmoid", "tanh", "relu", "reciprocal", "log1p", "expm1", "max", "min",
    "pow", "clamp", "where", "sum", "mean", "var", "prod", "batchmean", "log_softmax",
    "logsumexp", "axis", "keepdim", "correction", "T", "print", "class", "_x", "x_chunk",
    "cumsum", "reverse", "exclusive", "triu", "tril", "diagonal",
]  # fmt: skip
NUMBERS = [
    "0", "1", "2", "4", "8", "7", "16384", "0.0", "1.0", "0.5", "1e-5", "3.14", "1e38",
    "5e-324", "1e400", "1e-400", "99999999999999999999", "2147483648", "65536", ".5", "1.",
    "-1", "9" * 30, "1e308",
]  # fmt: skip
SYMBOLS = [
    "+", "-", "*", "/", "**", "@", ".T", ".", "=", ",", ":", "(", ")", "[", "]",
    "<", "<=", ">", ">=", "==", "!=", "#", "\n", "\n", "\n", "axis=", "keepdim=", "axis=[",
]  # fmt: skip
TOKENS = KEYWORDS + NAMES + NUMBERS + SYMBOLS


@st.composite
def token_soup(draw):
    tokens = draw(st.lists(st.sampled_from(TOKENS), max_size=60))
    separators = draw(st.lists(st.sampled_from([" ", " ", "", "\n"]), min_size=len(tokens)))
    body = "".join(t + s for t, s in zip(tokens, separators, strict=False))
    header = draw(st.sampled_from(["", "kernel k\n", "kernel k\ndims M = 4, N = 8\n"]))
    return header + body


@given(token_soup())
def test_token_soup(text):
    assert_compiles_or_located_error(text)


STATEMENT_HEAD = "kernel k\ndims M = 3, N = 8\ninput x: f32[M, N] in positive\n"


@st.composite
def expressions(draw, depth=3):
    """Well-bracketed but loosely typed expressions: shape, type and domain errors."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["x", "M", "N", "1.0", "0.0", "2", "1e-5", "1e38", "-3.5"]))
    inner = draw(expressions(depth - 1))
    other = draw(expressions(depth - 1))
    return draw(
        st.sampled_from(
            [
                f"({inner} + {other})",
                f"({inner} - {other})",
                f"{inner} * {other}",
                f"{inner} / {other}",
                f"{inner} ** {other}",
                f"-{inner}",
                f"{inner} @ {other}",
                f"{inner}.T",
                f"exp({inner})",
                f"log({inner})",
                f"sqrt({inner})",
                f"tanh({inner})",
                f"max({inner}, {other})",
                f"min({inner})",
                f"sum({inner}, axis=1)",
                f"mean({inner}, axis=[0, 1], keepdim=true)",
                f"max({inner}, axis=-1, keepdim=false)",
                f"var({inner}, axis=0, correction=1)",
                f"softmax({inner}, axis=1)",
                f"logsumexp({inner}, axis=0, keepdim=true)",
                f"cumsum({inner}, axis=1)",
                f"cumsum({inner}, axis=0, reverse=true, exclusive=true)",
                f"triu({inner}, diagonal=-1)",
                f"tril({inner})",
                f"flip({inner}, axis=[0, -1])",
                f"flip({inner}, axis=1)",
                f"clamp({inner}, min={other})",
                f"clamp({inner}, {other}, 1.0)",
                f"where({inner} > {other}, {inner}, {other})",
                f"pow({inner}, 2.0)",
                f"batchmean({inner})",
            ]
        )
    )


@given(expressions(), st.sampled_from(["[M, N]", "[M]", "[N]", "[]", "[M, 1]", "[1, N]"]))
def test_random_expressions(expression, shape):
    text = f"{STATEMENT_HEAD}output y: f32{shape}\ny = {expression}\n"
    assert_compiles_or_located_error(text)


# ---- (c) mutations of every example spec --------------------------------------------------

TOKEN = re.compile(r"\s+|[A-Za-z_][A-Za-z0-9_]*|[0-9.]+(?:[eE][+-]?[0-9]+)?|\*\*|.", re.S)
HUGE = ["99999999999999999999", "1e400", "0", "2147483648", "4294967296", "1" + "0" * 40]
LOOK_ALIKES = ["\u0430", "\u0435", "\u043e", "\uff58", "\u0131", "\u00e9", "\u200b", "\ufeff"]


@st.composite
def mutated_example(draw):
    path = draw(st.sampled_from(SPECS))
    text = path.read_text(encoding="utf-8")
    mode = draw(st.sampled_from(["tokens", "lines"]))
    parts = TOKEN.findall(text) if mode == "tokens" else text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not parts:
            break
        i = draw(st.integers(0, len(parts) - 1))
        j = draw(st.integers(0, len(parts) - 1))
        kind = draw(
            st.sampled_from(
                ["delete", "duplicate", "swap", "huge", "nest", "unicode", "replace", "insert"]
            )
        )
        if kind == "delete":
            del parts[i]
        elif kind == "duplicate":
            parts.insert(i, parts[i])
        elif kind == "swap":
            parts[i], parts[j] = parts[j], parts[i]
        elif kind == "huge":
            numbers = [k for k, p in enumerate(parts) if re.fullmatch(r"[0-9.]+\S*", p)]
            if numbers:
                parts[draw(st.sampled_from(numbers))] = draw(st.sampled_from(HUGE))
        elif kind == "nest":
            depth = draw(st.sampled_from([40, 60, 100, 300, 5000]))
            opener = draw(st.sampled_from(["(", "exp(", "-(", "x * ("]))
            parts.insert(i, opener * depth + "x" + ")" * depth)
        elif kind == "unicode":
            part = parts[i]
            k = draw(st.integers(0, len(part)))
            parts[i] = part[:k] + draw(st.sampled_from(LOOK_ALIKES)) + part[k:]
        elif kind == "replace":
            parts[i] = draw(st.sampled_from(TOKENS))
        else:
            parts.insert(i, draw(st.sampled_from(TOKENS)) + " ")
    return "".join(parts)


@given(mutated_example())
def test_mutated_examples(text):
    assert_compiles_or_located_error(text)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_examples_compile_to_python(path):
    assert_compiles_or_located_error(path.read_text(encoding="utf-8"))


# ---- regressions: inputs the fuzzers found -------------------------------------------------

H = "kernel k\ndims M = 4\ninput x: f32[M]\noutput y: f32[M]\n"
REGRESSIONS = {
    # each compiled to a traceback, a hang or unparsable Python before it was fixed
    "complex_power": H + "y = x * ((-8.0) ** 0.5)\n",
    "scalar_where_condition": H + "y = where(1.0 > 2.0, x, x)\n",
    "param_where_condition": "kernel k\ndims M = 4\nparam a: f32 = 1.0\ninput x: f32[M]\n"
    "output y: f32[M]\ny = where(a > 0.0, x, x)\n",
    "huge_dim": "kernel k\ndims M = 99999999999999999999\ninput x: f32[M]\noutput y: f32[M]\n"
    "y = x\n",
    "too_many_elements": "kernel k\ndims M = 65536\ninput x: f32[M, M]\noutput y: f32[M, M]\n"
    "y = x\n",
    "broadcast_too_many_elements": "kernel k\ndims M = 65536\ninput x: f32[M, 1]\n"
    "input v: f32[M]\noutput y: f32[M, M]\ny = x + v\n",
    "five_thousand_digit_dim": "kernel k\ndims M = " + "9" * 5000 + "\n",
    "five_thousand_digit_shape": "kernel k\ninput x: f32[" + "9" * 5000 + "]\n",
    "deep_right_nesting": H + "y = x" + " * (x" * 250 + ")" * 250 + "\n",
    "deep_call_nesting": H + "y = " + "exp(" * 120 + "x" + ")" * 120 + "\n",
    "long_chain_of_parentheses": H + "y = x" + " - (x" * 600 + ")" * 600 + "\n",
    "carriage_return_in_comment": "#\r0",
    "unbiased_var_of_one_element": "kernel k\ninput x: f32[1, 5]\noutput y: f32[1, 5]\n"
    "y = var(x, axis=0, keepdim=true)\n",
}


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
def test_regression_is_a_located_error(case):
    with pytest.raises(SpecError) as raised:
        ptodsl.compile(REGRESSIONS[case], name="fuzz.pto")
    assert_located(raised.value, REGRESSIONS[case])


@pytest.mark.parametrize(
    "filename", ['a"""b.pto', "C:\\x.pto", "a\\N.pto", 'x\n"""\nimport os\n#.pto', "back\\"]
)
def test_any_file_name_gives_valid_python(filename):
    compiled = ptodsl.compile(H + "y = x\n", name=filename)
    compile(compiled.source, "kernel.py", "exec")
    compile(compiled.reference_source, "reference.py", "exec")
