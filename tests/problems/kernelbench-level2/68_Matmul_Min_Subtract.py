# KernelBench level 2 #68 (v0 shapes), written for ptodsl's tests.
# Linear, elementwise minimum with a learned scalar, minus the same scalar.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        capped = torch.minimum(self.linear(x), self.constant)
        return capped - self.constant


batch_size = 128
in_features = 10
out_features = 5
constant = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, constant]
