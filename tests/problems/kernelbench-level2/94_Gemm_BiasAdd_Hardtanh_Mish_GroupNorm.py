# KernelBench level 2 #94 (v0 shapes), written for ptodsl's tests.
# Linear, plus a learned bias vector, Hardtanh(-1, 1), Mish, GroupNorm(32 groups).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, bias_shape, num_groups):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.hardtanh = nn.Hardtanh()
        self.mish = nn.Mish()
        self.groupnorm = nn.GroupNorm(num_groups=num_groups, num_channels=out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.hardtanh(self.gemm(x) + self.bias)
        return self.groupnorm(self.mish(y))


batch_size = 128
in_features = 512
out_features = 1024
bias_shape = (out_features,)
num_groups = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape, num_groups]
