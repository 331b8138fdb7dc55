"""An attention ranker over feature tokens (in the style of AutoInt / FT-Transformer rankers).

Tokens: a learned [CLS] token, one token per dense feature (value * w_j + b_j, so every dense
feature gets its own embedding) and one pooled embedding per table: [B, 1 + dense + tables, d].
Pre-LN transformer blocks (multi-head self-attention, GELU feed-forward, residuals), a final
LayerNorm on [CLS], and an MLP head give the click logit.

Written out by hand (no nn.MultiheadAttention, no scaled_dot_product_attention) so both
exporters emit plain MatMul/Softmax/Reshape/Transpose, and so that every projection is an
nn.Linear the FP8 simulation sees. Heads are split with reshapes that read the batch size from the
input, which exports as the Shape -> Gather -> Concat -> Reshape chains real exports contain.
"""
from __future__ import annotations

import dataclasses
from typing import List

import torch
from torch import nn

from .layers import MLP, PooledEmbeddings
from .schema import FeatureSchema


@dataclasses.dataclass
class AttentionRankerConfig:
    embedding_dim: int
    heads: int
    blocks: int
    ffn_dim: int
    head_mlp: List[int]  # last width 1
    use_embedding_bag: bool = False


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        assert d % heads == 0
        self.heads, self.head_dim = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape[0], x.shape[1], x.shape[2]
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [B, H, n, hd]
        scores = torch.matmul(q, k.transpose(-2, -1)) * (self.head_dim ** -0.5)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(b, n, d))


class TransformerBlock(nn.Module):
    def __init__(self, d: int, heads: int, ffn_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads)
        self.norm2 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, ffn_dim), nn.GELU(), nn.Linear(ffn_dim, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class AttentionRanker(nn.Module):
    def __init__(self, schema: FeatureSchema, cfg: AttentionRankerConfig):
        super().__init__()
        d = cfg.embedding_dim
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.dense_weight = nn.Parameter(torch.randn(schema.num_dense, d) * 0.1)
        self.dense_bias = nn.Parameter(torch.zeros(schema.num_dense, d))
        self.embeddings = PooledEmbeddings(schema, d, cfg.use_embedding_bag)
        self.blocks = nn.ModuleList(TransformerBlock(d, cfg.heads, cfg.ffn_dim) for _ in range(cfg.blocks))
        self.norm = nn.LayerNorm(d)
        self.head = MLP(d, cfg.head_mlp, last_relu=False)

    def logit(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        dense_tokens = dense.unsqueeze(-1) * self.dense_weight + self.dense_bias
        cls = self.cls.expand(dense.shape[0], -1, -1)
        x = torch.cat([cls, dense_tokens, self.embeddings(sparse)], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logit(dense, sparse))
