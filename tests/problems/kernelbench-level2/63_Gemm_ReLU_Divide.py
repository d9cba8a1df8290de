# KernelBench level 2 #63 (v0 shapes), written for ptodsl's tests.
# Linear, ReLU, divided by a constant.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) / self.divisor


batch_size = 128
in_features = 1024
out_features = 512
divisor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
