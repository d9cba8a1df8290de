# KernelBench level 2 #56 (v0 shapes), written for ptodsl's tests.
# Linear, sigmoid, sum of each row kept as a (batch, 1) column.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


batch_size = 128
input_size = 10
hidden_size = 20


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
