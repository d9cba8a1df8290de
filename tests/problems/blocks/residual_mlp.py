# A network of residual MLP blocks in an nn.Sequential, then a LayerNorm: the torch module
# examples/blocks/residual_mlp.pto replaces.
import torch
import torch.nn as nn


class Residual(nn.Module):
    def __init__(self, features, expansion):
        super().__init__()
        self.fc1 = nn.Linear(features, expansion)
        self.fc2 = nn.Linear(expansion, features)
        self.gain = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x))) * self.gain


class Model(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.blocks = nn.Sequential(*(Residual(width, hidden) for _ in range(3)))
        self.head = nn.LayerNorm(width)

    def forward(self, x):
        return self.head(self.blocks(x))


batch_size = 8
width = 32
hidden = 64


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width, hidden]
