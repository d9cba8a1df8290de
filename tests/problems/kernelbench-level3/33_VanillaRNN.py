# KernelBench level 3 #33 (v0 shapes), written for ptodsl's tests.
# One step of a vanilla RNN whose hidden state lives on the module: the input joined with
# the hidden state, a Linear and tanh give the new hidden state (kept for the next call),
# and a Linear of it is the output.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.hidden = self.hidden.to(x.device)
        joined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(joined))
        return self.h2o(self.hidden)


batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128
sequence_length = 256


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
