# KernelBench level 3 #50 (v0 shapes), written for ptodsl's tests.
# minGPT's masked multi-head self-attention with ReLU in place of softmax and no output
# projection: queries, keys and values from one Linear, each head's scaled scores masked
# to the positions up to its own (-inf, which ReLU turns to 0), times the values, the heads
# joined side by side.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)  # created, as the original does, never used
        causal = torch.tril(torch.ones(max_seqlen, max_seqlen))
        self.register_buffer("bias", causal.view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        batch, steps, channels = x.size()
        head_size = channels // self.n_head
        queries, keys, values = self.c_attn(x).split(self.n_embd, dim=2)

        def by_head(t):
            return t.view(batch, steps, self.n_head, head_size).transpose(1, 2)

        queries, keys, values = by_head(queries), by_head(keys), by_head(values)
        scores = (queries @ keys.transpose(-2, -1)) * (1.0 / math.sqrt(head_size))
        scores = scores.masked_fill(self.bias[:, :, :steps, :steps] == 0, float("-inf"))
        return (F.relu(scores) @ values).transpose(1, 2).contiguous().view(batch, steps, channels)


batch_size = 16
max_seqlen = 1024
n_embd = 768
n_head = 12


def get_inputs():
    return [torch.randn(batch_size, max_seqlen, n_embd)]


def get_init_inputs():
    return [n_embd, n_head, max_seqlen]
