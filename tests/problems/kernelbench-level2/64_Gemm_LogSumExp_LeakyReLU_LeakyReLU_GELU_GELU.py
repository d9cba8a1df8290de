# KernelBench level 2 #64 (v0 shapes), written for ptodsl's tests.
# Linear, logsumexp of each row to a (batch, 1) column, LeakyReLU twice, GELU twice.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.logsumexp(self.linear(x), dim=1, keepdim=True)
        for _ in range(2):
            z = F.leaky_relu(z, negative_slope=0.01)
        for _ in range(2):
            z = F.gelu(z)
        return z


batch_size = 128
in_features = 1024
out_features = 512


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
