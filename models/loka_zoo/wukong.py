"""Wukong (Zang et al. 2024, "Wukong: Towards a Scaling Law for Large-Scale Recommendation").

Feature tokens X [B, n, d] (dense features through an MLP into a few tokens, plus one pooled
embedding per table) pass through a stack of Wukong layers, each
    FMB(X) = MLP(LN(flatten(X (X^T Y))))  reshaped to [B, n_fm, d]   (optimised factorisation
             machine: X^T Y first, Y a learned [n, k] projection, so cost is linear in n)
    LCB(X) = W_L X                        [B, n_lc, d]               (linear compression)
    X'     = LN(concat(FMB, LCB) + residual(X))   (residual projected over tokens when n changes)
then the flattened tokens go through a top MLP to the click logit. Everything is MatMul, so the
export holds no Einsum.
"""
from __future__ import annotations

import dataclasses
from typing import List

import torch
from torch import nn

from .layers import MLP, TokenLayerRanker
from .schema import FeatureSchema


@dataclasses.dataclass
class WukongConfig:
    embedding_dim: int
    dense_tokens: int
    layers: int
    fm_tokens: int       # n_fm
    lc_tokens: int       # n_lc
    fm_rank: int         # k
    fm_mlp: List[int]    # hidden widths of the FMB MLP
    top_mlp: List[int]   # last width 1
    use_embedding_bag: bool = False


class WukongLayer(nn.Module):
    def __init__(self, n_in: int, d: int, cfg: WukongConfig):
        super().__init__()
        n_out = cfg.fm_tokens + cfg.lc_tokens
        self.fm_tokens, self.d = cfg.fm_tokens, d
        self.fm_proj = nn.Parameter(torch.randn(n_in, cfg.fm_rank) / n_in ** 0.5)
        self.fm_norm = nn.LayerNorm(n_in * cfg.fm_rank)
        self.fm_mlp = MLP(n_in * cfg.fm_rank, cfg.fm_mlp + [cfg.fm_tokens * d], last_relu=False)
        self.lc = nn.Parameter(torch.randn(cfg.lc_tokens, n_in) / n_in ** 0.5)
        self.residual = nn.Parameter(torch.randn(n_out, n_in) / n_in ** 0.5) if n_in != n_out else None
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fm = torch.matmul(x, torch.matmul(x.transpose(1, 2), self.fm_proj))  # [B, n, k]
        fmb = self.fm_mlp(self.fm_norm(fm.flatten(1))).reshape(x.shape[0], self.fm_tokens, self.d)
        lcb = torch.matmul(self.lc, x)
        res = x if self.residual is None else torch.matmul(self.residual, x)
        return self.norm(torch.cat([fmb, lcb], dim=1) + res)


class Wukong(TokenLayerRanker):
    def __init__(self, schema: FeatureSchema, cfg: WukongConfig):
        super().__init__(schema, cfg.embedding_dim, cfg.dense_tokens, cfg.use_embedding_bag)
        n = self.num_input_tokens
        layers = []
        for _ in range(cfg.layers):
            layers.append(WukongLayer(n, self.d, cfg))
            n = cfg.fm_tokens + cfg.lc_tokens
        self.set_layers(layers, n, cfg.top_mlp)
