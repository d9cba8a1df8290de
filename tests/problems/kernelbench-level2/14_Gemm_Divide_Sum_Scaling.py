# KernelBench level 2 #14 (v0 shapes), written for ptodsl's tests.
# x @ W^T with a raw randn weight (no bias), halve, row sum (kept as a column), scale.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        prod = torch.matmul(x, self.weight.T) / 2
        total = torch.sum(prod, dim=1, keepdim=True)
        return total * self.factor


batch_size = 128
input_size = 10
hidden_size = 20
scaling_factor = 1.5


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
