# KernelBench level 2 #37 (v0 shapes), written for ptodsl's tests.
# Linear, swish written as sigmoid(h) * h, per-feature bias, GroupNorm over the features.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.matmul(x)
        h = torch.sigmoid(h) * h
        return self.group_norm(h + self.bias)


batch_size = 128
in_features = 512
out_features = 1024
num_groups = 32
bias_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
