# KernelBench level 2 #62 (v0 shapes), written for ptodsl's tests.
# Linear, GroupNorm over the features, LeakyReLU, then the result added to itself.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        super().__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=hidden_size, eps=eps)
        self.leaky_relu = nn.LeakyReLU(negative_slope=negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.leaky_relu(self.gn(self.fc(x)))
        return a + a


batch_size = 128
input_size = 512
hidden_size = 256
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_groups]
