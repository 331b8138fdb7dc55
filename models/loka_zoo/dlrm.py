"""DLRM with dot interaction (Naumov et al. 2019) and DLRM-DCNv2 (MLPerf Inference/Training v3+).

Both: a bottom MLP maps the dense features to one embedding-sized vector, the tables give one
pooled vector each, an interaction mixes them, a top MLP gives the click logit.
  * dot: the pairwise dot products of the F = 1 + tables vectors (strict lower triangle, picked
    with a constant Gather on the flattened F x F matrix), concatenated with the bottom output;
  * DCNv2: the F vectors concatenated (F * dim wide) through low-rank cross layers
    x_{l+1} = x_0 * (U (V x_l) + b) + x_l (TorchRec's LowRankCrossNet, rank 512 in MLPerf).
Outputs are click probabilities [B, 1] (sigmoid of the logit).
"""
from __future__ import annotations

import dataclasses
from typing import List

import torch
from torch import nn

from .layers import MLP, PooledEmbeddings
from .schema import FeatureSchema


@dataclasses.dataclass
class DLRMConfig:
    embedding_dim: int
    bottom_mlp: List[int]  # the last width must equal embedding_dim
    top_mlp: List[int]     # the last width is 1 (the logit)
    interaction: str       # "dot" or "dcnv2"
    cross_layers: int = 0
    cross_rank: int = 0
    use_embedding_bag: bool = True


class DLRM(nn.Module):
    def __init__(self, schema: FeatureSchema, cfg: DLRMConfig):
        super().__init__()
        assert cfg.bottom_mlp[-1] == cfg.embedding_dim and cfg.top_mlp[-1] == 1
        self.cfg = cfg
        self.bottom = MLP(schema.num_dense, cfg.bottom_mlp)
        self.embeddings = PooledEmbeddings(schema, cfg.embedding_dim, cfg.use_embedding_bag)
        num_vectors = schema.num_tables + 1
        d = cfg.embedding_dim
        if cfg.interaction == "dot":
            rows, cols = torch.tril_indices(num_vectors, num_vectors, offset=-1)
            self.register_buffer("pair_index", rows * num_vectors + cols, persistent=False)
            top_in = d + rows.numel()
        elif cfg.interaction == "dcnv2":
            width = num_vectors * d
            self.cross_down = nn.ModuleList(nn.Linear(width, cfg.cross_rank, bias=False) for _ in range(cfg.cross_layers))
            self.cross_up = nn.ModuleList(nn.Linear(cfg.cross_rank, width) for _ in range(cfg.cross_layers))
            top_in = width
        else:
            raise ValueError(f"unknown interaction {cfg.interaction!r}")
        self.top = MLP(top_in, cfg.top_mlp, last_relu=False)

    def logit(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        vectors = torch.cat([x.unsqueeze(1), self.embeddings(sparse)], dim=1)  # [B, F, d]
        if self.cfg.interaction == "dot":
            z = torch.bmm(vectors, vectors.transpose(1, 2))
            pairs = z.flatten(1).index_select(1, self.pair_index)
            features = torch.cat([x, pairs], dim=1)
        else:
            x0 = vectors.flatten(1)
            xl = x0
            for down, up in zip(self.cross_down, self.cross_up):
                xl = x0 * up(down(xl)) + xl
            features = xl
        return self.top(features)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logit(dense, sparse))
