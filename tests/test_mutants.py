"""Mutation test of `ptodsl check`: one-token mutants of every example's generated kernel
(an operator, a PyPTO function, a scan's axis or a float constant changed) must all fail
the check.

CI runs one mutant per example, picked by a fixed seed: about half the examples get one that
changes an operator or a function, the others one that changes a constant (where the kernel
has one); the feature tests of test_check_rejects add the wrong kernels each feature could
produce.
`PTODSL_MUTANTS=all` runs every mutant of every example (about an hour on 2 cores).
"""

from __future__ import annotations

import os
import random
import re

import pytest
from conftest import CI_DIMS, EXAMPLES

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.runtime.simulator import SimulationError

# Swaps that change what an expression computes for the inputs `check` draws.
OPERATORS = {" + ": " - ", " - ": " + ", " * ": " / ", " / ": " * "}
FUNCTIONS = {
    "pypto.exp(": "pypto.sigmoid(",
    "pypto.sigmoid(": "pypto.exp(",
    "pypto.log(": "pypto.sqrt(",
    "pypto.sqrt(": "pypto.rsqrt(",
    "pypto.rsqrt(": "pypto.sqrt(",
    "pypto.maximum(": "pypto.minimum(",
    "pypto.minimum(": "pypto.maximum(",
    "pypto.sum(": "pypto.amax(",
    "pypto.amax(": "pypto.amin(",
    "pypto.amin(": "pypto.amax(",
    "pypto.relu(": "pypto.abs(",
    "a_trans=False": "a_trans=True",
    "a_trans=True": "a_trans=False",
    "b_trans=False": "b_trans=True",
    "b_trans=True": "b_trans=False",
}
# The shift inside softmax's exp (x - max) is a numerical choice: any shift gives the same
# result, so swapping its max for a min is not a wrong kernel.
SHIFT_INVARIANT = ("pypto.amax(", "pypto.amin(")
LOOP_OFFSET = re.compile(r"^(\s*offset = i \* )(\d+)$")
UNIT = re.compile(r"-?1\.0(?![\d.e])")
FLOAT = re.compile(r"(?<![\w.])(\d+\.\d*(?:e-?\d+)?)")
# Lines of the kernel body that only lay out work (tiles, loops, a loop block's views) are
# not mutated: changing them leaves the computation the same or stops it from compiling. A
# crop inside an expression (`pypto.view` of a value) is computation, and mutated.
# A window's padding (`pypto.full`) is layout too: a max pool's fill is any value no element
# beats, and the rows a split needs past the last window are read by no tap, so a 1% change
# of its constant is the same kernel; test_check_rejects' window tests change it to values
# that matter (0 in a max pool, 1 in an average).
LAYOUT = ("set_vec_tile_shapes", "set_cube_tile_shapes", "pypto.loop(", "offset", "pypto.full(")
BLOCK_VIEW = re.compile(r"^\s*\w+ = pypto\.view\(")
# The smallest constant change a dtype can show: 1% in f32, 10% in f16 and bf16.
CONSTANT_CHANGE = {"f32": 0.01, "f16": 0.1, "bf16": 0.1}


def kernel_body(source: str) -> range:
    """Line indexes of the body of the generated `@pypto.frontend.jit` function."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if "@pypto.frontend.jit" in line)
    body = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("):"))
    end = next(i for i in range(body, len(lines)) if lines[i].startswith("    return "))
    return range(body + 1, end)


def kernel_lines(source: str) -> list[int]:
    """Indexes of the compute lines of the kernel body."""
    lines = source.splitlines()
    return [
        i
        for i in kernel_body(source)
        if lines[i].strip()
        and not any(marker in lines[i] for marker in LAYOUT)
        and not BLOCK_VIEW.match(lines[i])
    ]


def softmax_shifts(lines: list[str]) -> set[str]:
    """Names of max reductions that later lines only subtract, or add back to a log: the
    shift of softmax, log-softmax (x - max) and logsumexp (log(sum(exp(x - max))) + max),
    which any other shift, a min or -max, leaves the result of."""
    shifts = set()
    for index, line in enumerate(lines):
        if not any(reduction in line for reduction in SHIFT_INVARIANT):
            continue
        target = line.split("=")[0].strip()
        uses = [later for later in lines[index + 1 :] if re.search(rf"\b{target}\b", later)]
        if uses and all(
            len(re.findall(rf"\b{target}\b", use))
            == use.count(f" - {target}") + ("pypto.log(" in use) * use.count(f" + {target}")
            for use in uses
        ):
            shifts.add(target)
    return shifts


# A constant this small added to values of order 1 (triplet loss's `a - p + eps`, eps 1e-6,
# about 8 f32 ulps at 1.0) changes nothing a sum of their squares keeps: adding it or
# subtracting it is the same kernel within f32 resolution, not a mutant a check can see.
TINY = 1e-5
OPERAND = re.compile(r"[\w.]+(?:e-?\d+)?")
CONSTANT_NAME = re.compile(r"^\s+(\w+) = (-?\d[\d.]*(?:e-?\d+)?)$", re.MULTILINE)


def tiny_terms(source: str) -> set[str]:
    """The literals and the factory's constant names whose value is at most TINY."""
    values = {name: float(value) for name, value in CONSTANT_NAME.findall(source)}
    values |= {text: float(text) for text in FLOAT.findall(source)}
    return {text for text, value in values.items() if 0 < abs(value) <= TINY}


def scan_axes(line: str) -> list[tuple[int, int]]:
    """(start, end) of the axis argument of every `pypto.cumsum(value, axis)` call."""
    spans = []
    for match in re.finditer(re.escape("pypto.cumsum("), line):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(line[end], 0)
            end += 1
        comma = line.rindex(", ", match.end(), end - 1)
        spans.append((comma + 2, end - 1))
    return spans


LOOP_HEADER = re.compile(r"pypto\.loop\(\s*0,\s*(\d+),")


def loop_count(lines: list[str], offset_line: int) -> int:
    """The iterations of the loop whose offset is set on `offset_line` (the header just
    above it): a loop of one iteration has no step to be off by."""
    header = max(i for i in range(offset_line) if "pypto.loop(" in lines[i])
    match = LOOP_HEADER.search("".join(lines[header:offset_line]))
    assert match, f"no loop header above line {offset_line + 1}"
    return int(match.group(1))


def replaced(lines: list[str], index: int, start: int, end: int, new: str) -> str:
    line = lines[index]
    return "".join([*lines[:index], line[:start] + new + line[end:], *lines[index + 1 :]])


def unit_valued(compiled) -> frozenset[str]:
    """The kernel's names whose every value is +1 or -1 as the check runs it: inputs `in
    sign` (hinge loss's targets) and params that default to 1.0 or -1.0 (ELU's alpha,
    Huber's beta). Multiplying by one of them is dividing by it: not a mutant."""
    checked = compiled.lowered.checked
    signs = {t.name for t in checked.inputs if t.domain == "sign"}
    return frozenset(signs | {p.name for p in checked.params if p.default in (1.0, -1.0)})


def mutants(
    source: str, dtype: str = "f32", units: frozenset[str] = frozenset()
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(description, mutated source): operator, function and loop-offset mutants; constant
    mutants. `units`: names of +-1 values (`unit_valued`)."""
    lines = source.splitlines(keepends=True)
    structural, constants = [], []
    for index in kernel_body(source):
        offset = LOOP_OFFSET.match(lines[index].rstrip("\n"))
        if offset and loop_count(lines, index) > 1:  # every chunk one row off
            step = int(offset.group(2))
            what = f"line {index + 1}: offset step {step} -> {step - 1}"
            structural.append((what, replaced(lines, index, *offset.span(2), str(step - 1))))
    shifts = softmax_shifts(lines)
    tiny = tiny_terms(source)
    for index in kernel_lines(source):
        line = lines[index]
        for start, end in scan_axes(line):  # the running total along another axis
            other = "1" if line[start:end] == "0" else "0"
            what = f"line {index + 1}: scan axis {line[start:end]} -> {other}"
            structural.append((what, replaced(lines, index, start, end, other)))
        if line.split("=")[0].strip() in shifts:
            continue
        for old, new in (*OPERATORS.items(), *FUNCTIONS.items()):
            for match in re.finditer(re.escape(old), line):
                if any(line[match.end() :].startswith(shift) for shift in shifts):
                    continue
                term = OPERAND.match(line, match.end())
                if old in (" * ", " / ") and UNIT.match(line, match.end()):
                    continue  # x * -1.0 is x / -1.0: the same kernel, not a mutant
                if old in (" * ", " / ") and term and term.group(0) in units:
                    continue  # x * s is x / s for an s of +-1 only (see unit_valued)
                if old in (" + ", " - ") and term and term.group(0) in tiny:
                    continue  # d + 1e-6 vs d - 1e-6: see TINY
                what = f"line {index + 1}:{match.start() + 1}: {old.strip()} -> {new.strip()}"
                structural.append((what, replaced(lines, index, *match.span(), new)))
        for match in FLOAT.finditer(line):
            value = float(match.group(1))
            if value.is_integer() and compares_positions(lines, index, match.start()):
                continue  # see POSITIONS_COMPARED
            change = CONSTANT_CHANGE[dtype]
            changed = repr(value * (1 + change) + change)
            what = f"line {index + 1}: {match.group(1)} -> {changed}"
            constants.append((what, replaced(lines, index, *match.span(1), changed)))
    return structural, constants


# Positions (`pypto.cumsum(pypto.full(...))`, triu's and tril's j - i) are whole numbers:
# compared with a whole number, a constant moved by a fraction (`>= 0.0` to `>= 0.01`) is an
# equivalent mutant. test_check_rejects moves the diagonal by whole positions.
POSITION_COUNT = "pypto.cumsum(pypto.full("
COMPARISON = re.compile(r"(<=|>=|<|>|==|!=)\s*$")


def compares_positions(lines: list[str], index: int, column: int) -> bool:
    """Whether the constant at `column` of line `index` is compared with positions, or is a
    term of positions compared (triu's `j - 1.0 - (i - 1.0) <= 0.0`, split over lines): a
    comparison operator just before it, or one in the lines after it, and a position
    count in its statement's lines."""
    statement = "".join(lines[max(0, index - 4) : index + 5])
    if POSITION_COUNT not in statement:
        return False
    return bool(COMPARISON.search(lines[index][:column])) or any(
        COMPARISON.search(line.split("#")[0].rstrip()) or line.strip().startswith(("<", ">"))
        for line in lines[index + 1 : index + 5]
    )


def chosen_mutants(
    stem: str,
    source: str,
    dtype: str,
    integer_output: bool = False,
    units: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    structural, constants = mutants(source, dtype, units)
    if integer_output:
        # Positions (argmax) are whole numbers rounded on conversion to i64, and the value
        # standing for "no hit" need only exceed every position: small constant changes
        # are equivalent mutants. test_check_rejects changes them by whole positions.
        constants = []
    if os.environ.get("PTODSL_MUTANTS") == "all":
        return structural + constants
    pick = random.Random(stem)
    groups = [group for group in (structural, constants) if group]
    return [pick.choice(pick.choice(groups))]


# Mutants run at CI's sizes, and the two large elementwise examples smaller still: a dropped
# element of a 67M-term sum is below f32 resolution of that sum, so at full size a loop
# offset one off would be a mutant no numeric check can see.
MUTANT_DIMS = {
    "bias_rows_tail": {"M": 99, "N": 200},
    "sum_of_squares": {"N": 2, "C": 4, "H": 32, "W": 32},
}


def compile_example(path):
    text = path.read_text(encoding="utf-8")
    dims = MUTANT_DIMS.get(path.stem) or CI_DIMS.get(path.stem)
    return ptodsl.compile(text, name=path.name, dims=dims, tuning=None)


# The fused examples' kernels are the KernelBench examples' codegen after a matmul; those
# that exercise codegen of their own (a matmul twin, a split product, a window of an
# intermediate) are mutated, the rest would add CI minutes and no new kind of kernel.
# KernelBench level 2's GEMM examples are the same kind of kernel again: left out (see
# issue 41 on the constants they would need inputs to reach).
# Networks of several kernels (LeNet-5, ResNet's block, the blocks example, attention) are
# mutated by the wrong-program tests of test_kernelbench_level3.py, test_blocks.py and
# test_partition.py: a one-token mutant here is of a one-kernel module.
SEVERAL_KERNELS = (
    "residual_mlp",
    "4_LeNet5",
    "8_ResNetBasicBlock",
    "31_VisionAttention",
    "43_MinGPTCausalAttention",
    "44_MiniGPTBlock",
    "50_ReLUSelfAttention",
)
MUTATED = [
    p
    for p in EXAMPLES
    if (
        p.parent.name not in ("fused", "kernelbench-level2")
        or p.stem in ("7_gemm_residual_relu", "13_gemm_group_norm", "14_gemm_avg_pool_gelu_max")
    )
    and p.stem not in SEVERAL_KERNELS
]


# Mutants that compute the same values on every input, found by PTODSL_MUTANTS=all and
# reasoned out one by one: prod's and cumprod's sign is (-1)^(negatives), +1 or -1, so
# multiplying the magnitude by it is dividing by it; and the parity floor(t * 0.5) of a
# count t of at most dim1 = 8 negatives is floor(t * 0.515) too (they differ from t = 34 on).
# One is wrong but below every f32 bound: Huber's branches meet with equal value and slope at
# |d| = 1, so moving the joint to 1.02 changes a term by at most 0.5 * 0.02^2 = 2e-4, and the
# mean of 2^19 terms by about 5e-7, under the bound of 1.4e-5 an f32 sum of them may round by (the
# check measured err/bound 0.038 on it, 0.0013 on the kernel itself).
EQUIVALENT = {
    "50_prod_dim": {"line 79:30: * -> /", "line 79: 0.5 -> 0.515"},
    "90_cumprod": {"line 80:12: * -> /"},
    "96_huber_loss": {"line 75: 1.0 -> 1.02"},
}


@pytest.mark.parametrize("path", MUTATED, ids=[p.stem for p in MUTATED])
def test_check_kills_one_token_mutants_of_the_kernel(path, tmp_path):
    compiled = compile_example(path)
    # the dtype the kernel computes in (an i64 output is computed in f32 and converted)
    output_dtype = compiled.kernel.outputs[0].type.dtype
    dtype = output_dtype.value if output_dtype.is_float else "f32"
    units = unit_valued(compiled)
    chosen = chosen_mutants(path.stem, compiled.source, dtype, not output_dtype.is_float, units)
    assert chosen, "every example's kernel has an operator or a function to mutate"
    survivors = []
    for what, source in chosen:
        if what in EQUIVALENT.get(path.stem, ()):
            continue
        module = tmp_path / "mutant.py"
        module.write_text(source, encoding="utf-8")
        try:
            report = run_check(compiled, kernel_path=module, passes="graph")
        except SimulationError:
            continue  # a mutant that does not run cannot pass either
        if report.ok:
            survivors.append(what)
    assert not survivors, f"check passed mutants of {path.stem}: {survivors}"


def test_mutants_change_one_token_and_keep_the_layout():
    compiled = compile_example(next(p for p in EXAMPLES if p.stem == "31_elu"))
    structural, constants = mutants(compiled.source)
    original = compiled.source.splitlines()
    for _, source in structural + constants:
        changed = [(a, b) for a, b in zip(original, source.splitlines(), strict=True) if a != b]
        assert len(changed) == 1
        assert not any(marker in changed[0][0] for marker in LAYOUT)
    assert len(structural) >= 4 and len(constants) >= 3
