"""The IR verifier holds after every pass for every example, every tuning candidate and
random specs, and it catches IR that breaks an invariant (as a bug in a pass would)."""

from __future__ import annotations

import attrs
import pytest
from conftest import EXAMPLES
from hypothesis import given
from specgen import specs

from ptodsl import cli, ir, pipeline
from ptodsl.diagnostics import Source, SpecError
from ptodsl.pipeline import PASS_NAMES, lower
from ptodsl.target import PYPTO_0_2_0
from ptodsl.tuning import candidates
from ptodsl.verify import VerifyError, verify


def source_of(path):
    return Source(path.read_text(encoding="utf-8"), path.name)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_verifies_after_every_pass(path):
    lower(source_of(path), verify_each=True)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_tuning_candidate_verifies(path):
    source = source_of(path)
    for plan in candidates(source, None, PYPTO_0_2_0)[1:]:
        lower(source, tuning=plan.tuning, verify_each=True)


@given(specs())
def test_random_specs_verify_after_every_pass(spec):
    try:
        lower(Source(spec.text, "random.pto"), verify_each=True)
    except SpecError:
        pass  # a legal rejection (e.g. a plan PyPTO cannot take); the verifier ran before it


ELU = Source(
    "kernel k\ndims M = 64, N = 512\ninput x: f32[M, N]\noutput y: f32[M, N]\n"
    "y = where(x > 0.0, x, exp(x) - 1.0)\n",
    "k.pto",
)
SUM = Source("kernel s\ninput x: f32[8, 16]\noutput y: f32[8]\ny = sum(x, axis=1)\n", "s.pto")


def broken(kernel: ir.Kernel, stage: str, message: str) -> None:
    with pytest.raises(VerifyError, match=message):
        verify(kernel, stage, PYPTO_0_2_0, PASS_NAMES)


def test_the_verifier_catches_broken_ir():
    checked = lower(ELU, until="check").checked
    (store,) = checked.body
    undefined = attrs.evolve(store, value=ir.Ref("z", store.value.type, store.span))
    broken(attrs.evolve(checked, body=(undefined,)), "check", "reads `z` before it is defined")
    broken(attrs.evolve(checked, body=()), "check", "output `y` is never stored")
    unknown = checked.map_body(lambda n: attrs.evolve(n, op="cumsum") if n is store.value else n)
    broken(unknown, "check", "no op `cumsum`")
    reshaped = attrs.evolve(store.value, type=ir.TensorType((64, 1), ir.DType.F32))
    broken(attrs.evolve(checked, body=(attrs.evolve(store, value=reshaped),)), "check", "shape")
    # a form the target lacks, after legalize
    tanh = lower(Source(ELU.text.replace("exp(x) - 1.0", "tanh(x)"), "t.pto"), until="check")
    broken(tanh.checked, "legalize", "`tanh.t.` is not a pypto-0.2.0 form")

    summed = lower(SUM, until="check").checked
    (total,) = summed.body
    wrong_axes = attrs.evolve(total.value, attrs=ir.Reduce((0,), keepdim=False))
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=wrong_axes),)), "check", "axes")
    # attributes of another op family, or none where the entry names a class
    untyped = attrs.evolve(total.value, attrs=ir.Along(0))
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=untyped),)), "check", "not Reduce")
    bare = attrs.evolve(total.value, attrs=None)
    broken(attrs.evolve(summed, body=(attrs.evolve(total, value=bare),)), "check", "not Reduce")

    looped = lower(ELU).kernel
    (phase,) = looped.schedule.phases
    too_big = attrs.evolve(phase, tile=(64, 512))
    broken(attrs.evolve(looped, schedule=ir.Schedule((too_big,))), "loops", "tile budget")
    short = attrs.evolve(phase, loop=ir.Loop(count=1, chunk=16, tail=0))
    broken(attrs.evolve(looped, schedule=ir.Schedule((short,))), "loops", "loop covers 16")


def test_verify_each_makes_a_broken_pass_an_internal_error(monkeypatch, tmp_path, capsys):
    def drops_the_body(kernel, ctx):
        return attrs.evolve(kernel, body=())

    passes = (*pipeline.PASSES[:3], ("cse", drops_the_body), *pipeline.PASSES[4:])
    monkeypatch.setattr(pipeline, "PASSES", passes)
    spec = tmp_path / "k.pto"
    spec.write_text(ELU.text, encoding="utf-8")
    assert cli.main(["compile", str(spec), "--verify-each", "--emit", "ir"]) == 0
    capsys.readouterr()
    assert cli.main(["compile", str(spec), "--verify-each"]) == cli.EXIT_INTERNAL
    assert "the IR after `cse` is invalid" in capsys.readouterr().err
