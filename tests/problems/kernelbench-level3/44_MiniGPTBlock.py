# KernelBench level 3 #44 (v0 shapes), written for ptodsl's tests.
# One transformer block of minGPT: LayerNorm, masked multi-head self-attention (as in #43)
# added to its input, then LayerNorm, an MLP (Linear to four times the width, the tanh
# approximation of GELU, Linear back, dropout) added to its input.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class TanhGELU(nn.Module):
    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.resid_dropout = nn.Dropout(resid_pdrop)
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
        weights = self.attn_dropout(F.softmax(scores, dim=-1))
        joined = (weights @ values).transpose(1, 2).contiguous().view(batch, steps, channels)
        return self.resid_dropout(self.c_proj(joined))


class Model(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(
            dict(
                c_fc=nn.Linear(n_embd, 4 * n_embd),
                c_proj=nn.Linear(4 * n_embd, n_embd),
                act=TanhGELU(),
                dropout=nn.Dropout(resid_pdrop),
            )
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        mlp = self.mlp
        return x + mlp.dropout(mlp.c_proj(mlp.act(mlp.c_fc(self.ln_2(x)))))


batch_size = 128
max_seqlen = 1024
seq_len = 512
n_embd = 768
n_head = 8
attn_pdrop = 0.0
resid_pdrop = 0.0


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]


def get_init_inputs():
    return [n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen]
