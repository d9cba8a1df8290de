# KernelBench level 2 #98 (v0 shapes), written for ptodsl's tests.
# Linear, AvgPool1d(4) along the features, GELU, times a scalar, row max.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, pool_kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.avg_pool = nn.AvgPool1d(kernel_size=pool_kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Pool each row as a one-channel signal.
        pooled = self.avg_pool(self.matmul(x).unsqueeze(1)).squeeze(1)
        scaled = F.gelu(pooled) * self.scale_factor
        return scaled.max(dim=1).values


batch_size = 128
in_features = 512
out_features = 256
pool_kernel_size = 4
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pool_kernel_size, scale_factor]
