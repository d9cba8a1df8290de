"""Official-pattern baseline for `half_gate` (examples/half_gate.pto): bf16_gate's kernel
(after pypto r0.2.0's SwiGLU example: vec tile (32, 32), one pass, no loop) in f16."""

import torch

from benchmarks.baselines.official.bf16_gate import gate


class ModelNew(torch.nn.Module):
    def forward(self, x, w):
        return gate(x, w, torch.float16)
