# KernelBench level 2 #42 (v0 shapes), written for ptodsl's tests.
# ConvTranspose2d, spatial mean, per-channel bias, logsumexp over channels, a sum over the two
# remaining size-1 spatial axes (-> (N, 1)), times 10.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gap = torch.mean(self.conv_transpose(x), dim=(2, 3), keepdim=True)
        lse = torch.logsumexp(gap + self.bias, dim=1, keepdim=True)  # (N, 1, 1, 1)
        return torch.sum(lse, dim=(2, 3)) * 10.0


batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
