# KernelBench level 2 #66 (v0 shapes), written for ptodsl's tests.
# Linear, Dropout(0.2), row mean, softmax over that length-1 axis (so the output is all ones).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.dropout(self.matmul(x)).mean(dim=1, keepdim=True)
        return torch.softmax(m, dim=1)


batch_size = 128
in_features = 100
out_features = 50
dropout_p = 0.2


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
