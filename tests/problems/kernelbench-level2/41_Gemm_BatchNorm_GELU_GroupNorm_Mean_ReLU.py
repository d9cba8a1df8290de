# KernelBench level 2 #41 (v0 shapes), written for ptodsl's tests.
# Linear, BatchNorm1d, GELU, GroupNorm, row mean -> (N, 1), ReLU. With GroupNorm's initial
# weight 1 and bias 0 every group has mean ~0, so the row mean is rounding noise around 0.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.batch_norm = nn.BatchNorm1d(out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.batch_norm(self.gemm(x)))
        h = self.group_norm(h)
        return torch.relu(torch.mean(h, dim=1, keepdim=True))


batch_size = 128
in_features = 512
out_features = 1024
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
