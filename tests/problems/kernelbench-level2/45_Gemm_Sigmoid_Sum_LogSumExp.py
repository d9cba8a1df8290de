# KernelBench level 2 #45 (v0 shapes), written for ptodsl's tests.
# Linear, sigmoid, row sums -> (N,), then one logsumexp over the batch -> a 0-d scalar.
# `linear2` is created (and drawn from the RNG) but never used.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        row_sums = torch.sum(torch.sigmoid(self.linear1(x)), dim=1)
        return torch.logsumexp(row_sums, dim=0)


batch_size = 128
input_size = 10
hidden_size = 20
output_size = 5


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
