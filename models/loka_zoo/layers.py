"""Building blocks shared by the zoo models: MLPs and the pooled-embedding front end.

`PooledEmbeddings` is where the ONNX idiom for embedding bags is decided. Both PyTorch exporters
lower `nn.EmbeddingBag` to an ONNX Loop over the batch (with SequenceEmpty/ConcatFromSequence),
which no inference runtime for recommendation models wants to execute. So a model may hold its
tables as `nn.EmbeddingBag` (sum mode, what DLRM and TorchRec use, and what trains fastest) or as
`nn.Embedding`; either way, in export mode each bag becomes Slice -> Gather -> ReduceSum over the
fixed multi-hot axis, numerically the same sum.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .schema import FeatureSchema


class MLP(nn.Sequential):
    """Linear layers with ReLU between them (and after the last one unless `last_relu` is False)."""

    def __init__(self, in_dim: int, widths: Sequence[int], last_relu: bool = True):
        layers: List[nn.Module] = []
        for i, w in enumerate(widths):
            layers.append(nn.Linear(in_dim, w))
            if i + 1 < len(widths) or last_relu:
                layers.append(nn.ReLU())
            in_dim = w
        super().__init__(*layers)


class PooledEmbeddings(nn.Module):
    """Sum-pools every table's fixed-size bag: sparse [B, total_hot] -> [B, num_tables, dim]."""

    def __init__(self, schema: FeatureSchema, dim: int, use_embedding_bag: bool):
        super().__init__()
        self.offsets = schema.offsets
        self.use_embedding_bag = use_embedding_bag
        self.export_mode = False  # set by export.py: bags become Gather + ReduceSum
        make = (lambda r: nn.EmbeddingBag(r, dim, mode="sum")) if use_embedding_bag else (lambda r: nn.Embedding(r, dim))
        self.tables = nn.ModuleList(make(r) for r in schema.table_rows)
        for table, rows in zip(self.tables, schema.table_rows):
            # DLRM's initialisation: uniform with bound sqrt(1 / rows).
            bound = (1.0 / rows) ** 0.5
            nn.init.uniform_(table.weight, -bound, bound)

    def forward(self, sparse: torch.Tensor) -> torch.Tensor:
        pooled = []
        for t, table in enumerate(self.tables):
            ids = sparse[:, self.offsets[t]:self.offsets[t + 1]]
            if self.use_embedding_bag and not self.export_mode:
                pooled.append(table(ids))
            else:
                pooled.append(F.embedding(ids, table.weight).sum(dim=1))
        return torch.stack(pooled, dim=1)


class TokenLayerRanker(nn.Module):
    """The frame Wukong and DHEN share: the dense features through an MLP into `dense_tokens`
    tokens, one pooled embedding token per table, a stack of token layers [B, n, d] -> [B, n', d],
    and a top MLP over the flattened tokens of the last layer giving the click logit."""

    def __init__(self, schema: FeatureSchema, d: int, dense_tokens: int, use_embedding_bag: bool):
        super().__init__()
        self.d, self.dense_tokens = d, dense_tokens
        self.dense_mlp = MLP(schema.num_dense, [4 * d, dense_tokens * d])
        self.embeddings = PooledEmbeddings(schema, d, use_embedding_bag)
        self.num_input_tokens = dense_tokens + schema.num_tables

    def set_layers(self, layers: Sequence[nn.Module], output_tokens: int, top_mlp: Sequence[int]) -> None:
        self.layers = nn.ModuleList(layers)
        self.top = MLP(output_tokens * self.d, top_mlp, last_relu=False)

    def logit(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        dense_tokens = self.dense_mlp(dense).reshape(dense.shape[0], self.dense_tokens, self.d)
        x = torch.cat([dense_tokens, self.embeddings(sparse)], dim=1)
        for layer in self.layers:
            x = layer(x)
        return self.top(x.flatten(1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logit(dense, sparse))
