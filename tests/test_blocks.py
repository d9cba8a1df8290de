"""Blocks and containers: a torch module defined once in a spec and instantiated several
times, `sequential(...)` and `module_dict(...)`. Each instance owns its weights under torch's
path for them, ModelNew builds the same module tree (so a seeded build draws what the torch
network draws, and state_dicts load strictly both ways), and `check` rejects a program whose
instances share weights."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import ROOT

import ptodsl
from ptodsl.checking.check import run_check
from ptodsl.checking.problems import ProblemError
from ptodsl.ir import nodes as ir
from ptodsl.runtime.files import import_file

SPEC = ROOT / "examples" / "blocks" / "residual_mlp.pto"
PROBLEM = ROOT / "tests" / "problems" / "blocks" / "residual_mlp.py"


@pytest.fixture(scope="module")
def compiled():
    return ptodsl.compile(SPEC.read_text(encoding="utf-8"), name=SPEC.name)


@pytest.fixture(scope="module")
def problem():
    return import_file(PROBLEM, "blocks_residual_mlp")


def test_instances_own_their_weights_under_torchs_paths(compiled, problem):
    """The same state_dict, in the same order; parameters() in torch's order; and under one
    seed the same values, so the module tree is built in torch's order."""
    torch.manual_seed(3)
    model = problem.Model(*problem.get_init_inputs())
    torch.manual_seed(3)
    model_new = compiled.ModelNew(*problem.get_init_inputs())
    theirs, ours = model.state_dict(), model_new.state_dict()
    assert list(ours) == list(theirs)
    assert "blocks.2.fc1.weight" in ours and "blocks.1.gain" in ours
    for name, value in theirs.items():
        assert torch.equal(ours[name], value), name
    assert [n for n, _ in model_new.named_parameters()] == [n for n, _ in model.named_parameters()]
    model_new.load_state_dict(theirs, strict=True)
    model.load_state_dict(ours, strict=True)
    # the tree a user sees: a Sequential of modules, indexable as torch's
    assert isinstance(model_new.blocks, torch.nn.Sequential) and len(model_new.blocks) == 3
    assert isinstance(model_new.blocks[1].fc2, torch.nn.Linear)


def test_a_block_instance_reads_its_own_weights(compiled):
    """Each instance's lets are its own (renamed apart), and so are its weights."""
    names = {stmt.name for stmt in compiled.lowered.checked.body if isinstance(stmt, ir.Let)}
    assert {"blocks_0_h", "blocks_1_h", "blocks_2_h"} <= names
    text = ir.format_kernel(compiled.lowered.checked)
    for index in range(3):
        assert f"blocks_{index}_fc1_weight" in text


def test_blocks_pass_check_against_the_torch_network(compiled):
    report = run_check(compiled, against=PROBLEM, passes="graph")
    assert report.ok, report.to_json()


def test_check_rejects_instances_sharing_weights(compiled, tmp_path):
    """The wrong program a block compiler could emit: the second instance reading the
    first's weights (its own `blocks[1]` never read). The generated module is edited so."""
    source = compiled.source
    shared = re.sub(r"self\.blocks\[1\]\.(fc1|fc2)\.", r"self.blocks[0].\1.", source)
    assert shared != source
    module = tmp_path / "shared.py"
    module.write_text(shared, encoding="utf-8")
    report = run_check(compiled, against=PROBLEM, kernel_path=module, passes="graph")
    assert not report.ok


NETWORK = """kernel network
dims   B = 4, C = 8
input  x: f32[B, C]

block layer(features: int)
    weight fc: linear(features, features)
    forward(x)
    return relu(fc(x))
end

block encoder(features: int, scale: f32 = 2.0)
    weight layers: sequential(layer(features), layer(features), identity())
    weight mlp: module_dict(
        c_fc=linear(features, 2 * features),
        c_proj=linear(2 * features, features),
    )
    forward(x, y)
    let h = layers(x) * scale
    return mlp.c_proj(relu(mlp.c_fc(h))) + y
end

weight enc: encoder(C)
output z: f32[B, C]
z = enc(x, x) + enc(x * 2.0, x)
"""


class _Layer(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.fc = torch.nn.Linear(features, features)


class _Encoder(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.layers = torch.nn.Sequential(_Layer(features), _Layer(features), torch.nn.Identity())
        self.mlp = torch.nn.ModuleDict(
            {
                "c_fc": torch.nn.Linear(features, 2 * features),
                "c_proj": torch.nn.Linear(2 * features, features),
            }
        )


def test_nested_blocks_and_containers_build_torchs_tree():
    """A block holding a Sequential of blocks and a ModuleDict: state paths three deep,
    the same as torch's nesting of the same modules, in its order."""
    compiled = ptodsl.compile(NETWORK)
    model_new = compiled.ModelNew()
    torch.manual_seed(0)
    reference = torch.nn.Module()
    reference.enc = _Encoder(8)
    assert list(model_new.state_dict()) == list(reference.state_dict())
    assert "enc.layers.1.fc.weight" in model_new.state_dict()
    assert "enc.mlp.c_proj.bias" in model_new.state_dict()


def test_an_instance_called_twice_binds_its_lets_apart():
    """`enc(x, x) + enc(x * 2.0, x)`: the second call's lets and arguments are `_2`."""
    text = ir.format_kernel(ptodsl.compile(NETWORK).lowered.checked)
    assert "enc_h_2" in text and "enc_x_2" in text


def test_nested_blocks_pass_check_against_their_torch_reference():
    """The spec's own torch reference (the module tree, each call inlined) in SIM."""
    report = run_check(ptodsl.compile(NETWORK), passes="graph")
    assert report.ok, report.to_json()


ERRORS = {
    "unknown member": (
        NETWORK.replace("mlp.c_proj(relu(", "mlp.c_out(relu("),
        "`enc.mlp` has no module `c_out`",
    ),
    "a module_dict called": (
        NETWORK.replace("mlp.c_proj(relu(mlp.c_fc(h)))", "mlp(h)"),
        "`enc.mlp` holds modules by name and is not called",
    ),
    "operand count": (NETWORK.replace("enc(x, x) +", "enc(x) +"), "`enc` takes 2 operands, not 1"),
    "a block reading the spec's tensor": (
        NETWORK.replace(
            "input  x: f32[B, C]\n", "input  x: f32[B, C]\ninput  z0: f32[B, C]\n"
        ).replace("+ y\nend", "+ y + z0\nend"),
        "block `encoder` does not see the spec's `z0`",
    ),
    "sequential by name": (
        NETWORK.replace("layer(features), identity())", "layer(features), last=identity())"),
        "`sequential` takes its modules in order, not by name",
    ),
    "a container holding an expression": (
        NETWORK.replace("identity())", "features)"),
        "`sequential` holds modules, not expressions",
    ),
    "missing argument": (NETWORK.replace("encoder(C)", "encoder()"), "`encoder` needs `features`"),
    "unknown argument": (
        NETWORK.replace("encoder(C)", "encoder(C, width=3)"),
        "`encoder` takes no argument `width`",
    ),
    "a block defined twice": (
        NETWORK.replace(
            "weight enc:", "block layer(n: int)\n    forward(x)\n    return x\nend\nweight enc:"
        ),
        "block `layer` is already defined",
    ),
    "unknown module in a block": (
        NETWORK.replace("linear(features, features)", "dense(features, features)"),
        "unknown module `dense`",
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_block_errors_point_at_the_spec(case):
    text, message = ERRORS[case]
    with pytest.raises(ptodsl.SpecError) as raised:
        ptodsl.compile(text, name="network.pto")
    assert message in str(raised.value)
    assert re.search(r"network\.pto:\d+:\d+: error: ", str(raised.value))


# Random networks: a Sequential of linear layers (each with or without its bias) and
# stateless activations, written both as a spec and as the torch network, then compared
# (state_dict names and order, the seeded draws, and `check --against` in pypto's SIM).
ACTIVATIONS = {"relu": "nn.ReLU()", "tanh": "nn.Tanh()", "sigmoid": "nn.Sigmoid()"}


def random_network(seed: int) -> tuple[str, str]:
    """A spec and the torch problem file of the same random Sequential."""
    import random

    chooser = random.Random(seed)
    batch, widths = chooser.choice([1, 2, 4, 8]), [chooser.choice([8, 16, 24, 40, 64])]
    spec_members, torch_members = [], []
    for _ in range(chooser.randint(1, 4)):
        width = chooser.choice([8, 16, 24, 40, 64])
        bias = chooser.random() < 0.8
        spec_members.append(f"linear({widths[-1]}, {width}, bias={str(bias).lower()})")
        torch_members.append(f"nn.Linear({widths[-1]}, {width}, bias={bias})")
        widths.append(width)
        if chooser.random() < 0.7:
            activation = chooser.choice(sorted(ACTIVATIONS))
            spec_members.append(f"{activation}()")
            torch_members.append(ACTIVATIONS[activation])
    spec = (
        f"kernel net{seed}\ndims B = {batch}\ninput x: f32[B, {widths[0]}]\n"
        f"weight layers: sequential({', '.join(spec_members)})\n"
        f"output y: f32[B, {widths[-1]}]\ny = layers(x)\n"
    )
    problem = (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        f"        self.layers = nn.Sequential({', '.join(torch_members)})\n\n"
        "    def forward(self, x):\n        return self.layers(x)\n\n\n"
        f"def get_inputs():\n    return [torch.randn({batch}, {widths[0]})]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return spec, problem


@pytest.mark.parametrize("seed", range(3))
def test_a_random_network_is_its_torch_network(seed, tmp_path):
    spec, problem = random_network(seed)
    path = tmp_path / f"net{seed}.py"
    path.write_text(problem, encoding="utf-8")
    compiled = ptodsl.compile(spec, name=f"net{seed}.pto")
    module = import_file(path, f"random_network_{seed}")
    torch.manual_seed(seed)
    model = module.Model()
    torch.manual_seed(seed)
    model_new = compiled.ModelNew()
    theirs, ours = model.state_dict(), model_new.state_dict()
    assert list(ours) == list(theirs), spec
    assert all(torch.equal(ours[name], value) for name, value in theirs.items()), spec
    report = run_check(compiled, against=path, passes="graph")
    assert report.ok, spec + str(report.to_json())


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 30))
def test_many_random_networks_are_their_torch_networks(seed, tmp_path):
    test_a_random_network_is_its_torch_network(seed, tmp_path)


CAUSAL_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width, length):
        super().__init__()
        self.proj = nn.Linear(width, length)
        self.register_buffer("mask", torch.tril(torch.ones(length, length)))

    def forward(self, x):
        scores = self.proj(x)
        return torch.softmax(scores.masked_fill(self.mask == 0, -1e9), dim=-1)


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return [8, 16]
"""
CAUSAL_SPEC = """kernel causal
dims   T = 16, C = 8
param  width: int = C
param  length: int = T
input  x: f32[T, C]
weight proj: linear(width, length)
buffer mask: f32[T, T] = tril(ones)
output y: f32[T, T]
y = softmax(where(mask == 0.0, -1e9, proj(x)), axis=1)
"""


def test_a_registered_buffer_is_the_models(tmp_path):
    """`buffer mask: f32[T, T] = tril(ones)` is `register_buffer("mask", torch.tril(...))`:
    in state_dict after the parameters, the same values, and the check passes."""
    problem = tmp_path / "causal.py"
    problem.write_text(CAUSAL_PROBLEM, encoding="utf-8")
    compiled = ptodsl.compile(CAUSAL_SPEC, name="causal.pto")
    module = import_file(problem, "causal_problem")
    model, model_new = module.Model(8, 16), compiled.ModelNew(8, 16)
    assert (
        list(model_new.state_dict())
        == list(model.state_dict())
        == [
            "mask",
            "proj.weight",
            "proj.bias",
        ]
    )
    assert torch.equal(model_new.mask, model.mask)
    assert [n for n, _ in model_new.named_parameters()] == ["proj.weight", "proj.bias"]
    assert run_check(compiled, against=problem, passes="graph").ok


@pytest.mark.parametrize("wrong", ["tril(ones, diagonal=1)", "triu(ones)", "ones"])
def test_check_rejects_a_mask_off_by_one(wrong, tmp_path):
    """A causal mask one diagonal off, the other triangle, or none: the check gives both
    models the spec's buffer, so it first holds ModelNew's to the Model's as built."""
    problem = tmp_path / "causal.py"
    problem.write_text(CAUSAL_PROBLEM, encoding="utf-8")
    compiled = ptodsl.compile(CAUSAL_SPEC.replace("tril(ones)", wrong), name="causal.pto")
    with pytest.raises(ProblemError, match="buffer `mask`: ModelNew builds it with other"):
        run_check(compiled, against=problem, passes="graph")


def test_a_block_registers_its_own_buffer():
    """GPT's attention block registers its causal mask: `attn.bias` in state_dict, held by
    the block's module, and read by the block's forward."""
    spec = (
        "kernel masked\ndims T = 8\ninput s: f32[T, T]\n\nblock masker(length: int)\n"
        "    buffer bias: f32[length, length] = tril(ones)\n    forward(x)\n"
        "    return where(bias == 0.0, -1e9, x)\nend\n\nweight attn: masker(T)\n"
        "output y: f32[T, T]\ny = softmax(attn(s), axis=1)\n"
    )
    compiled = ptodsl.compile(spec, name="masked.pto")
    model_new = compiled.ModelNew()
    assert list(model_new.state_dict()) == ["attn.bias"]
    assert torch.equal(model_new.attn.bias, torch.tril(torch.ones(8, 8)))
    assert run_check(compiled, passes="graph").ok


TWICE_SPEC = """kernel twice
dims B = 4, C = 8
input x: f32[B, C]
block layer(n: int)
    weight fc: linear(n, n)
    forward(x)
    return fc(x)
end
weight block: layer(C)
output y: f32[B, C]
y = block(relu(block(x)))
"""

TWICE_PROBLEM = """import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return self.fc(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Layer(8)

    def forward(self, x):
        return self.block(torch.relu(self.block(x)))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_a_module_called_twice_through_one_instance_computes_each_call(tmp_path):
    """The block's one `fc(x)`, inlined twice on other operands: two calls of the module,
    never the first one's value read twice (a cache of module calls by their place in the
    source would give `relu(fc(x))`'s operand to the second)."""
    problem = tmp_path / "twice.py"
    problem.write_text(TWICE_PROBLEM, encoding="utf-8")
    compiled = ptodsl.compile(TWICE_SPEC, name="twice.pto")
    matmuls = [
        node
        for stmt in compiled.lowered.checked.body
        for node in ir.walk(stmt.value)
        if isinstance(node, ir.Op) and node.op == "matmul"
    ]
    assert len(matmuls) == 2
    assert run_check(compiled, against=problem, passes="graph").ok
