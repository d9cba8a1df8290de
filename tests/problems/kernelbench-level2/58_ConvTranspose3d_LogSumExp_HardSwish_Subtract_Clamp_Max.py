# KernelBench level 2 #58 (v0 shapes), written for ptodsl's tests.
# ConvTranspose3d, logsumexp over channels, y * sigmoid(y + 3) / 6, minus a per-channel bias
# (which broadcasts the single channel back out to all of them), clamp to [-1, 1], max over
# channels.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.logsumexp(self.conv_transpose(x), dim=1, keepdim=True)  # (B, 1, D, H, W)
        y = y * torch.sigmoid(y + 3) / 6
        y = torch.clamp(y - self.bias, min=-1, max=1)  # (B, C, D, H, W)
        return y.max(dim=1, keepdim=True).values


batch_size = 128
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
bias_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias_shape]
