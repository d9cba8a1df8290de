# KernelBench level 2 #9 (v0 shapes), written for ptodsl's tests.
# Linear, subtract a constant, multiply by a constant, ReLU.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.offset = subtract_value
        self.gain = multiply_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (self.linear(x) - self.offset) * self.gain
        return torch.relu(h)


batch_size = 128
in_features = 10
out_features = 5
subtract_value = 2.0
multiply_value = 1.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, subtract_value, multiply_value]
