"""The zoo's catalogue: each model's schema and hyper-parameters at both sizes, its training
budget, and which exporter and opset its committed ONNX file (and its export variants) use.

Exporter coverage of the committed `tiny` models (together: both exporters, opsets 13, 17, 18):
    dlrm_dot          torchscript  opset 13   nn.EmbeddingBag tables, int64 ids
    dlrm_dcnv2        dynamo       opset 18   nn.EmbeddingBag tables, int32 ids (214 per sample)
    wukong            torchscript  opset 17   LayerNormalization as one op
    dhen              dynamo       opset 17   (exported at 18, version-converted by the exporter)
    attention_ranker  torchscript  opset 13   LayerNorm decomposed (ReduceMean/Sub/Pow/Sqrt/Div)
Variants under exports/ re-export the same trained weights with the other exporter and opsets.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, List, Tuple

from torch import nn

from .attention_ranker import AttentionRanker, AttentionRankerConfig
from .dhen import DHEN, DHENConfig
from .dlrm import DLRM, DLRMConfig
from .schema import FeatureSchema, criteo_schema
from .wukong import Wukong, WukongConfig

DHEN_MODULES = ["dot", "cross", "attention", "linear", "mlp"]


@dataclasses.dataclass
class TrainPlan:
    steps: int
    batch_size: int
    lr: float


@dataclasses.dataclass
class ModelSpec:
    name: str
    summary: str
    schema: FeatureSchema
    config: object
    build: Callable[[FeatureSchema, object], nn.Module]
    train: TrainPlan
    exporter: str                       # "torchscript" or "dynamo" (the committed model.onnx)
    opset: int
    variants: List[Tuple[str, int]]     # other (exporter, opset) pairs written to exports/


def _tiny(name: str) -> ModelSpec:
    rows = 64  # tables stay tiny so each committed folder (model + data) is under 3 MB
    train = TrainPlan(steps=300, batch_size=512, lr=3e-3)
    if name == "dlrm_dot":
        return ModelSpec(name, "DLRM, dot interaction, nn.EmbeddingBag tables",
                         criteo_schema(rows, 3, "int64"),
                         DLRMConfig(8, [32, 16, 8], [64, 32, 1], "dot", use_embedding_bag=True),
                         DLRM, train, "torchscript", 13, [("dynamo", 18)])
    if name == "dlrm_dcnv2":
        return ModelSpec(name, "DLRM-DCNv2, MLPerf structure (13 dense, 26 tables with MLPerf multi-hot sizes, "
                               "3 low-rank cross layers), narrow",
                         # 214 ids per sample dominate the folder's bytes: smaller tables and rank pay for them.
                         criteo_schema(rows // 2, None, "int32"),
                         DLRMConfig(8, [32, 16, 8], [32, 32, 16, 8, 1], "dcnv2", cross_layers=3, cross_rank=6,
                                    use_embedding_bag=True),
                         DLRM, train, "dynamo", 18, [("torchscript", 13), ("torchscript", 17), ("torchscript", 18)])
    if name == "wukong":
        return ModelSpec(name, "Wukong: FM and linear-compress blocks, LayerNorm and residual",
                         criteo_schema(rows, 3, "int64"),
                         WukongConfig(8, dense_tokens=2, layers=2, fm_tokens=8, lc_tokens=8, fm_rank=4,
                                      fm_mlp=[32], top_mlp=[32, 1]),
                         Wukong, train, "torchscript", 17, [("dynamo", 18)])
    if name == "dhen":
        return ModelSpec(name, "DHEN: per-layer ensemble of dot/cross/attention/linear/MLP modules, "
                               "LayerNorm and residual",
                         criteo_schema(rows, 3, "int64"),
                         DHENConfig(8, dense_tokens=2, layers=2, modules=DHEN_MODULES, cross_rank=8, top_mlp=[32, 1]),
                         DHEN, train, "dynamo", 17, [("torchscript", 13)])
    if name == "attention_ranker":
        return ModelSpec(name, "Attention ranker: pre-LN transformer blocks over feature tokens",
                         criteo_schema(rows, 3, "int64"),
                         AttentionRankerConfig(16, heads=2, blocks=2, ffn_dim=32, head_mlp=[16, 1]),
                         AttentionRanker, train, "torchscript", 13,
                         [("dynamo", 18), ("dynamo", 17), ("torchscript", 18)])
    raise KeyError(name)


def _full(name: str, rows: int) -> ModelSpec:
    """Benchmark sizes (generated on the GPU machine); tables have min(MLPerf rows, `rows`) rows."""
    spec = _tiny(name)
    train = TrainPlan(steps=1000, batch_size=4096, lr=1e-3)
    hot_cap = None if name == "dlrm_dcnv2" else 3
    schema = criteo_schema(rows, hot_cap, spec.schema.id_dtype)
    if name == "dlrm_dot":
        cfg = DLRMConfig(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dot", use_embedding_bag=True)
    elif name == "dlrm_dcnv2":  # the MLPerf DLRMv2 configuration
        cfg = DLRMConfig(128, [512, 256, 128], [1024, 1024, 512, 256, 1], "dcnv2", cross_layers=3, cross_rank=512,
                         use_embedding_bag=True)
    elif name == "wukong":
        cfg = WukongConfig(128, dense_tokens=8, layers=4, fm_tokens=32, lc_tokens=32, fm_rank=24,
                           fm_mlp=[2048, 2048], top_mlp=[1024, 512, 1])
    elif name == "dhen":
        cfg = DHENConfig(128, dense_tokens=8, layers=3, modules=DHEN_MODULES, cross_rank=512, top_mlp=[1024, 512, 1])
    else:
        cfg = AttentionRankerConfig(128, heads=8, blocks=4, ffn_dim=512, head_mlp=[256, 1])
    return dataclasses.replace(spec, schema=schema, config=cfg, train=train)


MODEL_NAMES = ["dlrm_dot", "dlrm_dcnv2", "wukong", "dhen", "attention_ranker"]


def get_spec(name: str, size: str, full_rows: int = 100000) -> ModelSpec:
    if size == "tiny":
        return _tiny(name)
    if size == "full":
        return _full(name, full_rows)
    raise ValueError(f"unknown size {size!r}")
