# KernelBench level 2 #34 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, LayerNorm(out_channels) applied to the LAST axis (the output width, which
# happens to be 64 = out_channels), GELU, scale.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        bias=True,
        eps=1e-5,
        scaling_factor=1.0,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias
        )
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.layer_norm(self.conv_transpose(x)))
        return h * self.factor


batch_size = 128
in_channels = 32
out_channels = 64
D, H, W = 16, 32, 32
kernel_size = 4
stride = 2
padding = 1
bias = True
eps = 1e-5
scaling_factor = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, D, H, W)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias, eps, scaling_factor]
