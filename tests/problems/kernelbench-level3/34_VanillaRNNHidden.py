# KernelBench level 3 #34 (v0 shapes), written for ptodsl's tests.
# A vanilla RNN run over a whole sequence from a given first hidden state: at each time
# step the step's input joined with the hidden state goes through a Linear and tanh to
# become the next hidden state, and a second Linear of it is that step's output; the
# outputs of all steps come back stacked along the time axis.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        steps = x.size(0)
        hidden = h0.to(x.device)
        per_step = []
        for step in range(steps):
            hidden = self.tanh(self.i2h(torch.cat((x[step], hidden), dim=1)))
            per_step.append(self.h2o(hidden))
        return torch.stack(per_step, dim=0)


batch_size = 8
input_size = 1024
hidden_size = 256
output_size = 128
sequence_length = 256


def get_inputs():
    return [
        torch.rand(sequence_length, batch_size, input_size),
        torch.rand(batch_size, hidden_size),
    ]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
