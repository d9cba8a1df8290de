"""Weights that start as the replaced torch module starts them. A KernelBench harness seeds
the RNG, builds `Model` and `ModelNew` one after the other and never copies weights between
them: ModelNew must draw the same parameters, in the same order, and then compute the
same outputs. These tests do exactly that with the emitted answers of the fused examples
(a linear layer followed by activations, norms, reductions, residuals, softmax)."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import CI_DIMS, ROOT, TINY_TILES, ci_resize

import ptodsl
from ptodsl.checking.check import problem_case, run_check
from ptodsl.checking.draws import seeded_draw
from ptodsl.checking.problems import ProblemError
from ptodsl.emission.codegen import emit_kernelbench
from ptodsl.ir import nodes as ir
from ptodsl.runtime.files import import_file
from ptodsl.runtime.simulator import SimulationError

SPECS = ROOT / "examples" / "fused"
PROBLEMS = ROOT / "tests" / "problems" / "fused"
FUSED = sorted(p.stem for p in SPECS.glob("*.pto"))
SEED = 42


def problem_path(name: str):
    return PROBLEMS / f"{name}.py"


def compile_spec(name: str, text: str | None = None) -> ptodsl.Compiled:
    spec = SPECS / f"{name}.pto"
    return ptodsl.compile(text or spec.read_text(encoding="utf-8"), name=spec.name)


def harness(name: str):
    """As a harness does it: exec the answer's text, then seed before each model."""
    compiled = compile_spec(name)
    namespace: dict = {}
    exec(emit_kernelbench(compiled.program, f"{name}.pto"), namespace)  # noqa: S102
    problem = import_file(problem_path(name), f"fused_{name}")
    torch.manual_seed(SEED)
    init_inputs = problem.get_init_inputs()
    torch.manual_seed(SEED)
    model = problem.Model(*init_inputs)
    torch.manual_seed(SEED)
    model_new = namespace["ModelNew"](*init_inputs)
    return problem, model, model_new


def test_every_fused_problem_has_a_spec():
    assert len(FUSED) >= 12
    assert sorted(p.stem for p in PROBLEMS.glob("*.py")) == FUSED


@pytest.mark.parametrize("name", FUSED)
def test_model_new_draws_the_models_parameters(name):
    _, model, model_new = harness(name)
    expected = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    assert [(n, tuple(p.shape)) for n, p in model_new.named_parameters()] == expected
    for (n, p), q in zip(model.named_parameters(), model_new.parameters(), strict=True):
        assert torch.equal(p, q), f"{name}: {n} starts at other values"
    # a drop-in: the Model's state dict loads as it is (buffers included)
    assert model_new.state_dict().keys() == model.state_dict().keys()
    model_new.load_state_dict(model.state_dict())


@pytest.mark.parametrize("name", FUSED)
def test_model_new_computes_the_models_outputs_without_copying_weights(name):
    """The forward runs in pypto's SIM, its outputs computed by ptodsl's interpreter."""
    problem, model, model_new = harness(name)
    torch.manual_seed(SEED)
    inputs = problem.get_inputs()
    with torch.no_grad():
        expected = model(*inputs)
        got = model_new(*inputs)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)
    assert not torch.equal(got, torch.zeros_like(got))


@pytest.mark.parametrize("name", FUSED)
def test_check_against_the_problem_passes(name):
    """`ptodsl check --against`: the drop-in draws, then the kernel in SIM with pypto's pass
    verification against the Model's float64 output, both on seeded random weights."""
    report = run_check(compile_spec(name), against=problem_path(name))
    assert report.ok, report.to_json()
    assert report.sim_time_us > 0


def test_a_harness_would_catch_a_model_new_drawing_in_another_order():
    """The control for the tests above: the same specs with two draws swapped differ."""
    name = "12_gemm_params_around_module"
    text = (SPECS / f"{name}.pto").read_text(encoding="utf-8")
    swapped = text.replace("weight shift: f32[N] = randn\n", "").replace(
        "weight gain: f32[N] = rand\n", "weight gain: f32[N] = rand\nweight shift: f32[N] = randn\n"
    )
    assert swapped != text
    compiled = compile_spec(name, swapped)
    namespace: dict = {}
    exec(emit_kernelbench(compiled.program, f"{name}.pto"), namespace)  # noqa: S102
    problem = import_file(problem_path(name), "fused_swapped")
    torch.manual_seed(SEED)
    model = problem.Model(*problem.get_init_inputs())
    torch.manual_seed(SEED)
    model_new = namespace["ModelNew"](*problem.get_init_inputs())
    assert not torch.equal(model.shift, model_new.shift)


WRONG_WEIGHTS = {
    "declared out of __init__'s order": (
        "12_gemm_params_around_module",
        ("weight shift: f32[N] = randn\nweight fc: linear(in_features, out_features)\n"),
        "weight fc: linear(in_features, out_features)\nweight shift: f32[N] = randn\n",
        "`shift`: built under the same seed, ModelNew starts it as randn and the Model",
    ),
    "another distribution": (
        "12_gemm_params_around_module",
        "weight gain: f32[N] = rand\n",
        "weight gain: f32[N] = randn\n",
        "`gain`: built under the same seed",
    ),
    "ones for a draw": (
        "1_gemm_relu_scale",
        "weight scale: f32[N] = randn\n",
        "weight scale: f32[N] = ones\n",
        "ModelNew starts it as ones",
    ),
    "another scale": (
        "10_gemm_noisy_bias_swish",
        "= randn * 0.02\n",
        "= randn * 0.05\n",
        "starts it as randn * 0.05",
    ),
    "another constant": ("8_gemm_scalar_hardtanh", "= 2.0\n", "= 3.0\n", "starts it at 3.0"),
    "a linear layer without its bias": (
        "3_gemm_sigmoid_sum",
        "linear(in_features, out_features)",
        "linear(in_features, out_features, bias=false)",
        "the Model has `fc.bias` float32 [256], ModelNew does not",
    ),
    "a missing own parameter": (
        "1_gemm_relu_scale",
        "weight scale: f32[N] = randn\noutput y: f32[B, N]\ny = relu(fc(x)) * scale",
        "output y: f32[B, N]\ny = relu(fc(x))",
        "the Model has `scale` float32 [256], ModelNew does not",
    ),
}


@pytest.mark.parametrize("case", WRONG_WEIGHTS, ids=list(WRONG_WEIGHTS))
def test_check_against_rejects_weights_a_harness_would_see_differ(case):
    name, old, new, message = WRONG_WEIGHTS[case]
    text = (SPECS / f"{name}.pto").read_text(encoding="utf-8")
    assert old in text
    compiled = compile_spec(name, text.replace(old, new))
    with pytest.raises(ProblemError) as raised:
        problem_case(compiled, problem_path(name), seeded_draw(SEED))
    assert message in str(raised.value)


def test_a_param_may_be_a_product_of_dims():
    text = """kernel grouped
dims G = 4, CG = 8, B = 2
param out_features: int = G * CG
input x: f32[B, G * CG]
output y: f32[B, G * CG]
y = x * out_features
"""
    kernel = ptodsl.compile(text, name="grouped.pto").lowered.checked
    assert kernel.params[0].default == 32


SQUARE_LINEAR = """dims B = 8, F = 32
param features: int = F
input x: f32[B, F]
weight fc: linear(features, features)
output y: f32[B, F]
"""


def test_a_tensor_read_by_a_matmul_and_elementwise_is_passed_twice():
    """A residual reads `x` as the matmul's operand (its declared layout) and in the frame
    of the elementwise ops: the kernel takes a twin, and forward passes the same tensor."""
    text = "kernel twins\n" + SQUARE_LINEAR + "y = fc(x) * x + x\n"
    compiled = ptodsl.compile(text, name="twins.pto")
    names = [t.name for t in compiled.kernel.inputs]
    assert names == ["x", "_operand_x", "fc_weight", "fc_bias"]
    assert "_kernel__operand_x = x.contiguous()" in compiled.source
    assert "pypto.matmul(_operand_x, fc_weight" in compiled.source
    assert [t.name for t in compiled.kernel.tensor_arguments] == ["x"]
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_a_weight_read_by_a_matmul_and_elementwise_is_passed_twice():
    """`sum(fc.weight, axis=1)` puts the weight's input axis into the kernel's frame: the
    product, which lacks it, is reshaped into the frame (it was a 2-D tensor among 3-D
    tiles, which pypto refused: "A_MUL_B tile shape not set")."""
    text = "kernel weight_twin\n" + SQUARE_LINEAR + "y = fc(x) + x + sum(fc.weight, axis=1)\n"
    compiled = ptodsl.compile(text, name="weight_twin.pto")
    assert "_kernel__operand_fc_weight = self.fc.weight.detach()" in compiled.source
    assert "_m0 = pypto.reshape(" in compiled.source
    report = run_check(compiled)
    assert report.ok, report.to_json()


def test_check_rejects_group_statistics_over_the_wrong_axis():
    """GroupNorm of a linear layer's output reduces each group's features (axis 2 of the
    split product); the same spec reducing across groups (axis 1) must fail against the
    problem, as must one whose product is not split at all (a LayerNorm)."""
    name = "13_gemm_group_norm"
    text = (SPECS / f"{name}.pto").read_text(encoding="utf-8")
    across_groups = text.replace("axis=2", "axis=1")
    assert across_groups != text
    with pytest.raises(ProblemError, match="computes something else than the problem's Model"):
        run_check(compile_spec(name, across_groups), against=problem_path(name))
    unsplit = text.replace("param  out_features: int = G * CG", "param  out_features: int = 256")
    unsplit = unsplit.replace("axis=2", "axis=[1, 2]")
    with pytest.raises(ptodsl.SpecError):  # the product is [B, 256]: no axis 2
        compile_spec(name, unsplit)


@pytest.mark.parametrize(
    ("natural", "shape", "expected"),
    [
        ((128, 256), (128, 8, 32), True),
        ((128, 256), (128, 256, 1), True),
        ((128, 256), (1, 128, 1, 256), True),
        ((128, 256), (128, 32, 8), True),
        ((128, 256), (64, 2, 256), True),
        ((128, 256), (256, 128), False),
        ((128, 256), (128, 8, 16), False),
        ((128, 256), (16, 16, 128), False),
    ],
)
def test_splits_into(natural, shape, expected):
    assert ir.splits_into(natural, shape) is expected


GROUPS = "13_gemm_group_norm"
# Wrong kernels the drop-in codegen could produce: each still runs, with the right shapes.
WRONG_CODEGEN = {
    # forward fills the matmul's twin from other rows of the same tensor
    "twin_from_other_rows": (
        "7_gemm_residual_relu",
        "_kernel__operand_x = x.contiguous()",
        "_kernel__operand_x = x.flip(0).contiguous()",
    ),
    # the product's channels split as [B, CG, G] and transposed back: groups interleaved
    "channels_split_group_minor": (
        GROUPS,
        "        h = _m0 + fc_bias\n",
        "        h = pypto.transpose(pypto.reshape(_m0, [128, 32, 8]), 1, 2) + fc_bias\n",
    ),
    # the bias added in the layer's natural [C] order, not split as the product is
    "bias_split_other_way": (
        GROUPS,
        "_kernel_fc_bias = self.fc.bias.detach().contiguous().reshape(1, 8, 32)",
        "_kernel_fc_bias = self.fc.bias.detach().reshape(32, 8).T.contiguous().reshape(1, 8, 32)",
    ),
}


@pytest.mark.parametrize("case", WRONG_CODEGEN.values(), ids=WRONG_CODEGEN.keys())
def test_check_against_rejects_wrong_drop_in_codegen(case, tmp_path):
    name, old, new = case
    compiled = compile_spec(name)
    assert compiled.source.count(old) == 1, old
    wrong = tmp_path / f"{name}.py"
    wrong.write_text(compiled.source.replace(old, new), encoding="utf-8")
    try:
        report = run_check(compiled, kernel_path=wrong, against=problem_path(name))
    except SimulationError as error:  # pypto's own per-pass comparison stopped the run
        assert "Verify" in str(error) and "FAILED" in str(error), error
        return
    assert not report.ok
    assert report.outputs and report.outputs[0].mismatched > 0, report.to_json()


@pytest.mark.parametrize(
    "dims",
    [{"B": 23}, {"B": 1}, {"B": 23, "G": 3, "CG": 5}],
    ids=["rows_looped_with_a_tail", "one_row", "odd_groups"],
)
def test_a_split_product_computes_right_looped_with_a_tail_and_tiny(dims):
    """GroupNorm of a linear layer's split product, on a target with tiny tiles (the norm's
    phase loops over rows, 2 blocks of 10 and a tail of 3), one row, and odd group sizes."""
    compiled = ptodsl.compile(
        (SPECS / f"{GROUPS}.pto").read_text(), name="groups.pto", dims=dims, target=TINY_TILES
    )
    loops = [p["loop"] for p in compiled.plan["kernels"][0]["phases"] if p["loop"]]
    if dims == {"B": 23}:
        assert loops and loops[0]["tail"] == 3, loops
    report = run_check(compiled)
    assert report.ok, report.to_json()


SHADOWED = """kernel shadowed
dims   N = 2, C = 4, L = 8
param  scale: int = 2
param  channels: int = C
input  x: f32[N, C, L]
weight scale: f32[C, 1] = randn
output y: f32[N, C, L]
y = x * scale + channels
"""


def test_a_weight_may_shadow_a_construction_argument_of_its_name():
    """Level 2 #48 takes `scaling_factor` and creates a parameter of that name: an int
    construction argument and a weight may share a name; expressions read the weight,
    ModelNew checks the argument and holds the weight under the name."""
    compiled = ptodsl.compile(SHADOWED)
    assert '_expect_argument("scale", scale, 2)' in compiled.source
    assert "self.scale = torch.nn.Parameter(" in compiled.source
    torch.manual_seed(0)
    model = compiled.reference.Model(2, 4)
    x = torch.randn(2, 4, 8)
    torch.testing.assert_close(model(x), x * model.scale + 4)


def test_only_a_weight_shadows_a_construction_argument():
    with pytest.raises(ptodsl.SpecError, match="`scale` is already defined"):
        ptodsl.compile(
            SHADOWED.replace("weight scale: f32[C, 1] = randn", "input scale: f32[C, 1]")
        )
    forward_scalar = SHADOWED.replace("param  scale: int = 2", "input  scale: f32 = 2.0")
    with pytest.raises(ptodsl.SpecError, match="`scale` is already defined"):
        ptodsl.compile(forward_scalar)


CONSTANT = """kernel constant_weights
dims   N = 2, C = 4
param  constant: f32 = 2.0
param  init: f32 = 0.5
input  x: f32[N, C]
weight constant: f32 = constant
weight scale: f32[C] = ones * init
output y: f32[N, C]
y = min(x * scale, constant) - constant
"""


def test_a_weight_starts_at_the_constructors_value_under_the_params_name():
    """Level 2 #68 keeps `nn.Parameter(torch.tensor(constant))` under the argument's name;
    `torch.ones(shape) * init` starts at another argument. ModelNew follows the value it
    is given, holds the weight under the Model's name, and the kernel reads the weight, not
    the argument (which no longer reaches the kernel)."""
    compiled = ptodsl.compile(CONSTANT)
    assert "shadowed param constant = 2" in ir.format_kernel(compiled.lowered.checked)
    assert [p.name for p in compiled.lowered.checked.kernel_params] == ["init"]
    model = compiled.ModelNew(constant=3.5, init=-0.25)
    assert model.state_dict().keys() == {"constant", "scale"}
    assert model.constant.item() == 3.5 and model.constant.shape == ()
    assert torch.equal(model.scale.detach(), torch.full((4,), -0.25))
    reference = compiled.reference.Model(constant=3.5, init=-0.25)
    x = torch.randn(2, 4)
    torch.testing.assert_close(reference(x), torch.clamp(x * -0.25, max=3.5) - 3.5)


@pytest.mark.parametrize(
    "declaration, message",
    [
        ("weight scale: f32[C] = zeros * init", "only `ones` is scaled by a param"),
        ("weight scale: f32[C] = randn * init", "only `ones` is scaled by a param"),
        ("weight scale: f32[C] = ones * N", "`N` is not a param of the constructor"),
        ("weight scale: f32[C] = ones * width", "`width` is an int param"),
        ("weight scale: f32[C] = width", "`width` is an int param"),
        ("weight scale: f32[C] = s", "`s` is a forward param"),
    ],
)
def test_a_weight_starts_at_a_float_param_of_the_constructor_only(declaration, message):
    spec = CONSTANT.replace("weight scale: f32[C] = ones * init", declaration).replace(
        "input  x", "param  width: int = C\ninput  s: f32 = 1.0\ninput  x"
    )
    with pytest.raises(ptodsl.SpecError, match=message):
        ptodsl.compile(spec)


def test_a_modules_numeric_argument_may_be_a_param():
    """`group_norm(G, C, eps=eps)`, `batch_norm1d(C, eps=bn_eps, momentum=m)`: a param of
    the constructor gives its value, as the problem's `nn.GroupNorm(..., eps=eps)` does; a
    scalar input (known only when forward runs) cannot build a module."""
    spec = (
        "kernel norms\ndims N = 4, C = 8\nparam eps: f32 = 1e-3\nparam m: f32 = 0.2\n"
        "input x: f32[N, C]\nweight gn: group_norm(2, C, eps=eps)\n"
        "weight bn: batch_norm1d(C, eps=eps, momentum=m)\noutput y: f32[N, C]\n"
        "y = x * gn.weight + bn.bias\n"
    )
    model = ptodsl.compile(spec).ModelNew()
    assert (model.gn.eps, model.bn.eps, model.bn.momentum) == (1e-3, 1e-3, pytest.approx(0.2))
    forward = spec.replace("param eps: f32 = 1e-3", "input eps: f32 = 1e-3")
    with pytest.raises(ptodsl.SpecError, match="`eps` is a number"):
        ptodsl.compile(forward)


NORMS = """kernel norms
dims   N = 3, C = 4, D = 2, H = 5, W = 8
input  x: f32[N, C{shape}]
weight norm: {module}
output y: f32[N, C{shape}]
y = norm(x)
"""


@pytest.mark.parametrize(
    ("shape", "module", "torch_module"),
    [
        (", H, W", "layer_norm([H, W])", lambda: torch.nn.LayerNorm([5, 8])),
        (
            ", H, W",
            "layer_norm(W, eps=0.1, bias=false)",
            lambda: torch.nn.LayerNorm(8, 0.1, bias=False),
        ),
        (
            ", W",
            "layer_norm(W, elementwise_affine=false)",
            lambda: torch.nn.LayerNorm(8, elementwise_affine=False),
        ),
        (", W", "instance_norm1d(C, affine=true)", lambda: torch.nn.InstanceNorm1d(4, affine=True)),
        (", H, W", "instance_norm2d(C, eps=0.01)", lambda: torch.nn.InstanceNorm2d(4, eps=0.01)),
        (
            ", D, H, W",
            "instance_norm3d(C, affine=true)",
            lambda: torch.nn.InstanceNorm3d(4, affine=True),
        ),
        ("", "group_norm(2, C)", lambda: torch.nn.GroupNorm(2, 4)),
        (", H, W", "group_norm(2, C, eps=0.01)", lambda: torch.nn.GroupNorm(2, 4, eps=0.01)),
        (
            ", D, H, W",
            "group_norm(4, C, affine=false)",
            lambda: torch.nn.GroupNorm(4, 4, affine=False),
        ),
        (
            ", H, W",
            "batch_norm2d(C, track_running_stats=false)",
            lambda: torch.nn.BatchNorm2d(4, track_running_stats=False),
        ),
        (
            "",
            "batch_norm1d(C, eps=0.01, affine=false, track_running_stats=false)",
            lambda: torch.nn.BatchNorm1d(4, eps=0.01, affine=False, track_running_stats=False),
        ),
    ],
)
def test_a_called_norm_module_computes_torchs_norm(shape, module, torch_module):
    """`ln(x)`, `inorm(x)` and `gn(x)` (no running statistics: the same in training and
    eval mode) are torch's LayerNorm, InstanceNorm1d/2d/3d and GroupNorm (over [N, C] and
    [N, C, *spatial]): the spec's torch reference, built from
    the checked spec, matches the torch module given the same random affine parameters, and
    misses it when the eps is another."""
    compiled = ptodsl.compile(NORMS.format(shape=shape, module=module))
    torch.manual_seed(0)
    reference, expected = compiled.reference.Model(), torch_module()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.copy_(torch.randn_like(parameter))
    # a norm without parameters holds no state, and ModelNew builds no module for it
    state = reference.norm.state_dict() if hasattr(reference, "norm") else {}
    expected.load_state_dict(state, strict=True)
    x = torch.randn(compiled.lowered.checked.input("x").type.shape) * 3 + 1
    torch.testing.assert_close(reference(x), expected(x), rtol=1e-5, atol=1e-5)
    expected.eps *= 100
    assert not torch.allclose(reference(x), expected(x), rtol=1e-5, atol=1e-5)


def test_called_norm_modules_run_in_the_simulator():
    """The norms, composed and reused, as a kernel pypto's simulator runs and the check
    compares with the reference."""
    spec = (
        "kernel norms\ndims N = 2, C = 4, H = 3, W = 16\ninput x: f32[N, C, H, W]\n"
        "weight ln: layer_norm([H, W])\nweight inorm: instance_norm2d(C, affine=true)\n"
        "weight gn: group_norm(2, C)\noutput y: f32[N, C, H, W]\n"
        "y = gn(inorm(ln(x)) + ln(x))\n"
    )
    assert run_check(ptodsl.compile(spec)).ok


def test_group_norm_of_a_3d_convolution_is_one_call():
    """Level 2 #23 as the problem writes it, `gn(conv(x))`: the convolution is bound once
    (a norm reads its operand three times) and computed by a kernel of its own, as in the
    spec that writes the groups out; the check against the problem passes."""
    stem = "23_Conv3d_GroupNorm_Mean"
    written_out = (ROOT / f"examples/kernelbench-level2/{stem}.pto").read_text()
    body = written_out[written_out.index("let g = ") :]
    called = written_out.replace(body, "y = mean(group_norm(conv(x)), axis=[1, 2, 3, 4])\n")
    compiled = ptodsl.compile(called, name=f"{stem}.pto", dims=CI_DIMS[stem])
    assert [c.writes for c in compiled.program.calls] == [("conv_value",), ("y",)]
    problem = ROOT / f"tests/problems/kernelbench-level2/{stem}.py"
    assert run_check(compiled, against=problem, resize=ci_resize(stem)).ok


def test_group_norm_of_a_split_channel_axis_is_one_call():
    """Level 2 #30 splits the GEMM's features into groups (`G * CG`): `group_norm(gemm(x))`
    sees them as one channel axis, as torch does, and gives the written-out spec's plan
    (the same phases and tiles); it passes the check against the problem."""
    stem = "30_Gemm_GroupNorm_Hardtanh"
    written_out = (ROOT / f"examples/kernelbench-level2/{stem}.pto").read_text()
    body = written_out[written_out.index("let h = ") :]
    called = written_out.replace(
        body, "y = clamp(group_norm(gemm(x)), hardtanh_min, hardtanh_max)\n"
    )
    compiled = ptodsl.compile(called, name=f"{stem}.pto", dims=CI_DIMS[stem])
    original = ptodsl.compile(written_out, name=f"{stem}.pto", dims=CI_DIMS[stem])
    phases = [(p.shape, p.tile) for p in compiled.kernel.schedule.phases]
    assert phases == [(p.shape, p.tile) for p in original.kernel.schedule.phases]
    problem = ROOT / f"tests/problems/kernelbench-level2/{stem}.py"
    assert run_check(compiled, against=problem, resize=ci_resize(stem)).ok
    with pytest.raises(ptodsl.SpecError, match=re.escape("cannot take a [128, 8, 64] tensor")):
        ptodsl.compile(called.replace("group_norm(num_groups, out_features)", "group_norm(8, 256)"))


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("group_norm(2, 6)", "axis 1 holds the channels, num_channels = 6"),
        ("group_norm(3, C)", "3 groups do not divide num_channels = 4"),
        ("instance_norm1d(C)", "it takes rank-3 tensors"),
        ("batch_norm1d(C, track_running_stats=false)", "it takes rank-2 or 3 tensors"),
        ("layer_norm([C, W])", "its trailing axes are not normalized_shape [4, 8]"),
    ],
)
def test_a_called_norm_refuses_an_operand_torch_refuses(module, message):
    with pytest.raises(ptodsl.SpecError, match=re.escape(message)):
        ptodsl.compile(NORMS.format(shape=", H, W", module=module))
