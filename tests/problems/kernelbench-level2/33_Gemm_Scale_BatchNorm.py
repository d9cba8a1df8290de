# KernelBench level 2 #33 (v0 shapes), written for ptodsl's tests.
# Linear, multiply by a learned per-feature scale, BatchNorm1d (batch statistics in train mode).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale_shape, eps=1e-5, momentum=0.1):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.gemm(x) * self.scale)


batch_size = 128
in_features = 1024
out_features = 512
scale_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale_shape]
