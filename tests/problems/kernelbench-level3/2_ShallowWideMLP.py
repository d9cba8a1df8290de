# KernelBench level 3 #2 (v0 shapes), written for ptodsl's tests.
# A multi-layer perceptron in one nn.Sequential: Linear and ReLU per hidden size, then a
# Linear to the output.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        stack = []
        width = input_size
        for hidden in hidden_layer_sizes:
            stack.append(nn.Linear(width, hidden))
            stack.append(nn.ReLU())
            width = hidden
        stack.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*stack)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 1
input_size = 1000
hidden_layer_sizes = [2000, 2000]
output_size = 10


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_layer_sizes, output_size]
