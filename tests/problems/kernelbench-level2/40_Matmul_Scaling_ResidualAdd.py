# KernelBench level 2 #40 (v0 shapes), written for ptodsl's tests.
# Linear output h, then h * s + (a detached copy of h).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.matmul(x)
        skip = h.clone().detach()  # residual term carries no gradient
        return h * self.factor + skip


batch_size = 128
in_features = 64
out_features = 128
scaling_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
