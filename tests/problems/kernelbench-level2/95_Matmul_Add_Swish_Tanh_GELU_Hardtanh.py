# KernelBench level 2 #95 (v0 shapes), written for ptodsl's tests.
# Linear, plus a learned vector, Swish, tanh, GELU, Hardtanh(-1, 1).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.matmul(x) + self.add_value
        y = torch.tanh(torch.sigmoid(y) * y)
        return F.hardtanh(F.gelu(y), min_val=-1, max_val=1)


batch_size = 128
in_features = 1024
out_features = 512
add_value_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, add_value_shape]
