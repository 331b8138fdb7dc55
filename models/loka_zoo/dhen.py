"""DHEN (Zhang et al. 2022, "DHEN: A Deep and Hierarchical Ensemble Network for Large-Scale
Click-Through Rate Prediction").

Feature tokens X [B, n, d] pass through layers that each run an ensemble of heterogeneous
interaction modules side by side on the same input, combine them, and add a residual:
    X' = LN(W_c concat_m(M_m(X)) + X)      (W_c: Linear(len(modules) * d -> d) per token)
Modules (each [B, n, d] -> [B, n, d]):
    dot        pairwise dot products X X^T, mapped back to tokens by a learned [n, d] matrix
    cross      a low-rank DCN cross on the flattened tokens: x * (U (V x) + b)
    attention  one-head self-attention over the tokens
    linear     token mixing W X with a learned [n, n] matrix
    mlp        a per-token two-layer MLP
The top MLP reads the flattened tokens of the last layer.
"""
from __future__ import annotations

import dataclasses
from typing import List

import torch
from torch import nn

from .layers import MLP, TokenLayerRanker
from .schema import FeatureSchema


@dataclasses.dataclass
class DHENConfig:
    embedding_dim: int
    dense_tokens: int
    layers: int
    modules: List[str]
    cross_rank: int
    top_mlp: List[int]
    use_embedding_bag: bool = False


class DotModule(nn.Module):
    def __init__(self, n: int, d: int):
        super().__init__()
        self.back = nn.Parameter(torch.randn(n, d) / n ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.matmul(x, x.transpose(1, 2)), self.back)


class CrossModule(nn.Module):
    def __init__(self, n: int, d: int, rank: int):
        super().__init__()
        self.down = nn.Linear(n * d, rank, bias=False)
        self.up = nn.Linear(rank, n * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.flatten(1)
        return (flat * self.up(self.down(flat))).reshape(x.shape)


class AttentionModule(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.scale = d ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(self.q(x), self.k(x).transpose(1, 2)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), self.v(x))


class LinearModule(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.mix = nn.Parameter(torch.eye(n) + torch.randn(n, n) / n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(self.mix, x)


def _make_module(kind: str, n: int, d: int, cfg: DHENConfig) -> nn.Module:
    if kind == "dot":
        return DotModule(n, d)
    if kind == "cross":
        return CrossModule(n, d, cfg.cross_rank)
    if kind == "attention":
        return AttentionModule(d)
    if kind == "linear":
        return LinearModule(n)
    if kind == "mlp":
        return MLP(d, [2 * d, d], last_relu=False)
    raise ValueError(f"unknown DHEN module {kind!r}")


class DHENLayer(nn.Module):
    def __init__(self, n: int, d: int, cfg: DHENConfig):
        super().__init__()
        self.ensemble = nn.ModuleList(_make_module(k, n, d, cfg) for k in cfg.modules)
        self.combine = nn.Linear(len(cfg.modules) * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.combine(torch.cat([m(x) for m in self.ensemble], dim=-1))
        return self.norm(mixed + x)


class DHEN(TokenLayerRanker):
    def __init__(self, schema: FeatureSchema, cfg: DHENConfig):
        super().__init__(schema, cfg.embedding_dim, cfg.dense_tokens, cfg.use_embedding_bag)
        n = self.num_input_tokens
        self.set_layers([DHENLayer(n, self.d, cfg) for _ in range(cfg.layers)], n, cfg.top_mlp)
