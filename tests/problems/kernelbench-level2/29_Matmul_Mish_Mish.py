# KernelBench level 2 #29 (v0 shapes), written for ptodsl's tests.
# Linear followed by Mish applied twice.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        for _ in range(2):
            h = F.mish(h)
        return h


batch_size = 128
in_features = 10
out_features = 20


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
