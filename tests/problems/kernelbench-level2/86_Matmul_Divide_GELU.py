# KernelBench level 2 #86 (v0 shapes), written for ptodsl's tests.
# Linear, divided by a constant, GELU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x) / self.divisor)


batch_size = 128
input_size = 512
output_size = 1024
divisor = 10.0


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, output_size, divisor]
