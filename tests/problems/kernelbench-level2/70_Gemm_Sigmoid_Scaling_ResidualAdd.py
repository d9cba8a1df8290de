# KernelBench level 2 #70 (v0 shapes), written for ptodsl's tests.
# Linear output h, then sigmoid(h) * scale + h.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.gemm(x)
        return torch.sigmoid(h) * self.scaling_factor + h


batch_size = 128
input_size = 1024
hidden_size = 512
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
