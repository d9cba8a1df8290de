# KernelBench level 3 #31 (v0 shapes), written for ptodsl's tests.
# Self-attention over the pixels of an image: the [B, C, H, W] input read as a sequence of
# H * W positions, each a C-channel embedding ([positions, batch, channels], the layout
# nn.MultiheadAttention takes by default), attended to by itself, the result added to the
# sequence and layer-normalised over the channels, then laid out as an image again.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        batch, channels, rows, columns = x.shape
        sequence = x.view(batch, channels, rows * columns).permute(2, 0, 1)
        attended, _ = self.attn(sequence, sequence, sequence)
        normalised = self.norm(attended + sequence)
        return normalised.permute(1, 2, 0).view(batch, channels, rows, columns)


embed_dim = 128
num_heads = 4
batch_size = 2
num_channels = embed_dim
image_height = 128
image_width = 128


def get_inputs():
    return [torch.rand(batch_size, num_channels, image_height, image_width)]


def get_init_inputs():
    return [embed_dim, num_heads]
