# KernelBench level 3 #1 (v0 shapes), written for ptodsl's tests.
# A multi-layer perceptron: a Linear and a ReLU per hidden size, then a Linear to the output,
# held in one nn.Sequential.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        modules = []
        width = input_size
        for size in layer_sizes:
            modules += [nn.Linear(width, size), nn.ReLU()]
            width = size
        modules.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*modules)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 1
input_size = 1000
layer_sizes = [400, 800]
output_size = 500


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
