# KernelBench level 2 #81 (v0 shapes), written for ptodsl's tests.
# Linear, Swish, halved, clamp to [-1, 1], tanh, clamp to [-1, 1] again (a no-op after tanh).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gemm(x)
        h = h * torch.sigmoid(h) / 2.0
        h = torch.tanh(torch.clamp(h, min=-1.0, max=1.0))
        return torch.clamp(h, min=-1.0, max=1.0)


batch_size = 128
in_features = 1024
out_features = 512


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
