# KernelBench level 2 #75 (v0 shapes), written for ptodsl's tests.
# Linear, GroupNorm, row minimum (batch, 1), plus a (1, C, 1, 1) bias: the broadcast gives a
# (1, C, batch, 1) result.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = self.group_norm(self.gemm(x))
        lowest = normed.min(dim=1, keepdim=True).values
        return lowest + self.bias


batch_size = 128
in_features = 512
out_features = 256
num_groups = 8
bias_shape = (1, out_features, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
