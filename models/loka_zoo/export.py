"""ONNX export with either PyTorch exporter, normalised to plain standard ONNX.

  * "torchscript": torch.onnx.export(..., dynamo=False) — the tracing exporter; at opset < 17 it
    decomposes LayerNorm, and it spells every dynamic reshape as Shape/Gather/Unsqueeze/Concat
    chains with Constant nodes.
  * "dynamo": torch.onnx.export(..., dynamo=True) — torch.export + onnxscript; it writes opset 18
    and version-converts to lower opsets (which fails when an op has no earlier version, e.g.
    LayerNormalization below 17: then we refuse rather than ship the wrong opset).
After export: local functions are inlined, per-node doc strings and metadata (stack traces) dropped, nodes outside the default ONNX domain are refused, the
model is checked with full shape inference, and the batch dimension is named "batch" on every
graph input and output. Embedding bags are exported as Gather + ReduceSum (see layers.py).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from typing import Dict, Tuple

import numpy as np
import onnx
import onnx.inliner
import torch
from torch import nn

from .layers import PooledEmbeddings

INPUT_NAMES = ["dense", "sparse"]
OUTPUT_NAMES = ["prob"]
BATCH_DIM = "batch"
EXTERNAL_DATA_THRESHOLD = 1_800_000_000  # protobuf cannot hold a 2 GB model in one message


@contextlib.contextmanager
def export_mode(model: nn.Module):
    """Embedding bags as Gather + ReduceSum for the duration of the export."""
    bags = [m for m in model.modules() if isinstance(m, PooledEmbeddings)]
    for b in bags:
        b.export_mode = True
    try:
        yield
    finally:
        for b in bags:
            b.export_mode = False


@contextlib.contextmanager
def _quiet():
    """The exporters print progress and warnings by the page; keep the zoo log readable."""
    logging.disable(logging.WARNING)
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            yield sink
    finally:
        logging.disable(logging.NOTSET)


def _torchscript(model: nn.Module, args: Tuple[torch.Tensor, ...], opset: int, path: str) -> None:
    axes = {name: {0: BATCH_DIM} for name in INPUT_NAMES + OUTPUT_NAMES}
    torch.onnx.export(model, args, path, dynamo=False, opset_version=opset, input_names=INPUT_NAMES,
                      output_names=OUTPUT_NAMES, dynamic_axes=axes, do_constant_folding=True)


def _dynamo(model: nn.Module, args: Tuple[torch.Tensor, ...], opset: int, path: str) -> None:
    batch = torch.export.Dim(BATCH_DIM, min=1, max=1 << 20)
    program = torch.onnx.export(model, args, dynamo=True, opset_version=opset, input_names=INPUT_NAMES,
                                output_names=OUTPUT_NAMES, dynamic_shapes=({0: batch}, {0: batch}),
                                optimize=True, verbose=False)
    program.save(path)


def _name_batch_dim(graph: onnx.GraphProto) -> None:
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = BATCH_DIM


def _normalise(proto: onnx.ModelProto, opset: int, where: str) -> onnx.ModelProto:
    if proto.functions:
        proto = onnx.inliner.inline_local_functions(proto)
    del proto.functions[:]
    default = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    if default != [opset]:
        raise RuntimeError(f"{where}: exported default-domain opset {default}, wanted {opset}")
    others = sorted({n.domain for n in proto.graph.node if n.domain not in ("", "ai.onnx")})
    if others:
        raise RuntimeError(f"{where}: nodes outside the standard ONNX domain remain: {others}")
    keep = [o for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    del proto.opset_import[:]
    proto.opset_import.extend(keep)
    _name_batch_dim(proto.graph)
    for node in proto.graph.node:  # source locations and stack traces: bulk, no meaning at run time
        node.doc_string = ""
        del node.metadata_props[:]
    for value in list(proto.graph.value_info) + list(proto.graph.input) + list(proto.graph.output):
        del value.metadata_props[:]
    onnx.checker.check_model(proto, full_check=True)
    return proto


def export_model(model: nn.Module, args: Tuple[torch.Tensor, ...], exporter: str, opset: int, path: str,
                 metadata: Dict[str, str]) -> onnx.ModelProto:
    """Exports `model` (in eval mode, on the CPU) to `path` and returns the normalised proto."""
    model = model.cpu().eval()
    # The raw export (and any external data file it writes) lives in a scratch folder.
    with tempfile.TemporaryDirectory() as scratch:
        tmp = os.path.join(scratch, "raw.onnx")
        with export_mode(model), _quiet() as log, torch.no_grad():
            try:
                if exporter == "torchscript":
                    _torchscript(model, args, opset, tmp)
                elif exporter == "dynamo":
                    _dynamo(model, args, opset, tmp)
                else:
                    raise ValueError(f"unknown exporter {exporter!r}")
            except Exception:
                print(log.getvalue()[-4000:])
                raise
        proto = onnx.load(tmp, load_external_data=True)
    proto = _normalise(proto, opset, f"{exporter} opset {opset}")
    del proto.metadata_props[:]
    for k, v in metadata.items():
        proto.metadata_props.add(key=k, value=v)
    large = proto.ByteSize() > EXTERNAL_DATA_THRESHOLD
    onnx.save_model(proto, path, save_as_external_data=large, all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data")
    return proto


def op_histogram(proto: onnx.ModelProto) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for n in proto.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


def ort_session(path: str, threads: int = 1):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_run(session, dense: np.ndarray, sparse: np.ndarray) -> np.ndarray:
    return session.run(OUTPUT_NAMES, {"dense": dense, "sparse": sparse})[0]
