# KernelBench level 2 #97 (v0 shapes), written for ptodsl's tests.
# Linear, BatchNorm1d, plus a learned scalar bias, divided by a constant (1.0), Swish.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(
        self,
        in_features,
        out_features,
        bn_eps=1e-5,
        bn_momentum=0.1,
        bias_shape=(1,),
        divide_value=1.0,
    ):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.divide_value = divide_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (self.bn(self.matmul(x)) + self.bias) / self.divide_value
        return y * torch.sigmoid(y)


batch_size = 128
in_features = 1024
out_features = 512
bn_eps = 1e-5
bn_momentum = 0.1
bias_shape = (1,)
divide_value = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bn_eps, bn_momentum, bias_shape, divide_value]
