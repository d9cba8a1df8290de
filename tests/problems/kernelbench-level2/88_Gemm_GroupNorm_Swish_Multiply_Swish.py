# KernelBench level 2 #88 (v0 shapes), written for ptodsl's tests.
# Linear, GroupNorm, Swish, times a learned per-feature weight, Swish again.
import torch
import torch.nn as nn


def _swish(t: torch.Tensor) -> torch.Tensor:
    return t * torch.sigmoid(t)


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, multiply_weight_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiply_weight = nn.Parameter(torch.randn(multiply_weight_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _swish(self.group_norm(self.gemm(x)))
        return _swish(y * self.multiply_weight)


batch_size = 128
in_features = 512
out_features = 1024
num_groups = 16
multiply_weight_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, multiply_weight_shape]
