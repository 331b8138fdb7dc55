"""Builds one zoo folder: train the model, measure FP32/BF16/naive-FP8 quality, export, and write
the calibration and evaluation data with onnxruntime's FP32 outputs, then the export variants.

Folder written for model NAME (relative to the zoo root):
    NAME/model.onnx
    NAME/calib/test_data_set_<k>/{input_0.pb, input_1.pb, labels.pb}
    NAME/eval/test_data_set_<k>/{input_0.pb, input_1.pb, output_0.pb, labels.pb}
    NAME/facts.json
    NAME/model.pt                      (with save_state: the trained PyTorch state_dict, for benchmarks)
    exports/NAME_<exporter>_op<opset>/{model.onnx, eval/test_data_set_0/..., facts.json} (unless variants=False)
Every random draw comes from numpy/torch generators seeded from (seed, model index, purpose).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import time
from typing import List

import numpy as np
import onnx
import onnxruntime
import torch

from . import export as ex
from .data import Batch, ClickWorld
from .datasets import folder_bytes, write_data_set
from .metrics import drift, quality
from .precision import predict, predict_bf16, predict_naive_fp8
from .registry import ModelSpec
from .train import train

# onnxruntime must reproduce PyTorch's FP32 output this closely, or the export is wrong.
ORT_TORCH_TOLERANCE = 1e-4


@dataclasses.dataclass
class DataPlan:
    calib_batches: int
    calib_batch_size: int
    eval_batches: int
    eval_batch_size: int
    metric_samples: int
    variant_rows: int  # rows of eval batch 0 kept with each export variant


def _draw(world: ClickWorld, n: int, size: int, rng: np.random.Generator) -> List[Batch]:
    return [world.sample(size, rng) for _ in range(n)]


def _ids(spec: ModelSpec, sparse: np.ndarray) -> np.ndarray:
    return sparse.astype(np.dtype(spec.schema.id_dtype))


def _inputs(spec: ModelSpec, batch: Batch, rows: int = -1):
    rows = len(batch.dense) if rows < 0 else rows
    return [("dense", batch.dense[:rows]), ("sparse", _ids(spec, batch.sparse[:rows]))]


def _write_json(path: str, doc: dict) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def _export_and_check(model, spec: ModelSpec, exporter: str, opset: int, folder: str, size: str,
                      example: Batch, eval_sets: List[Batch], torch_probs: List[np.ndarray], rows: int,
                      ort_threads: int = 1) -> dict:
    """Exports into `folder`, writes eval data with onnxruntime outputs, returns facts about it."""
    os.makedirs(folder, exist_ok=True)
    args = (torch.from_numpy(example.dense[:4]), torch.from_numpy(_ids(spec, example.sparse[:4])))
    path = os.path.join(folder, "model.onnx")
    start = time.time()
    proto = ex.export_model(model, args, exporter, opset, path,
                            {"zoo.model": spec.name, "zoo.size": size, "zoo.exporter": exporter})
    seconds = time.time() - start
    session = ex.ort_session(path, ort_threads)
    worst = 0.0
    ort_probs = []
    for k, (batch, ref) in enumerate(zip(eval_sets, torch_probs)):
        inputs = _inputs(spec, batch, rows)
        out = ex.ort_run(session, inputs[0][1], inputs[1][1])
        worst = max(worst, float(np.abs(out - ref[:len(out)]).max()))
        ort_probs.append(out)
        write_data_set(os.path.join(folder, "eval", f"test_data_set_{k}"), inputs, [(ex.OUTPUT_NAMES[0], out)],
                       batch.labels[:len(out)])
    if worst > ORT_TORCH_TOLERANCE:
        raise RuntimeError(f"{spec.name} ({exporter} opset {opset}): onnxruntime differs from PyTorch by {worst:g}")
    return {
        "exporter": exporter,
        "opset": opset,
        "export_seconds": round(seconds, 2),
        "onnx_nodes": len(proto.graph.node),
        "onnx_ops": ex.op_histogram(proto),
        "ort_vs_torch_max_abs_diff": worst,
        "ort_probs": ort_probs,
    }


def build_model(spec: ModelSpec, index: int, size: str, out: str, data: DataPlan, seed: int, device: str,
                log_every: int = 0, variants: bool = True, save_state: bool = False, ort_threads: int = 1) -> dict:
    t0 = time.time()
    folder = os.path.join(out, spec.name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    world = ClickWorld(spec.schema, seed * 1000 + index)
    torch.manual_seed(seed * 1000 + index)
    model = spec.build(spec.schema, spec.config).to(device)
    params = sum(p.numel() for p in model.parameters())
    emb_params = sum(p.numel() for p in model.embeddings.parameters())

    print(f"  training {spec.name} ({params} parameters, {spec.train.steps} steps)", flush=True)
    train_facts = train(model, world, spec.train, np.random.default_rng([seed, index, 1]), device, log_every)

    calib = _draw(world, data.calib_batches, data.calib_batch_size, np.random.default_rng([seed, index, 2]))
    evals = _draw(world, data.eval_batches, data.eval_batch_size, np.random.default_rng([seed, index, 3]))
    metric_set = world.sample(data.metric_samples, np.random.default_rng([seed, index, 4]))

    # Quality in PyTorch: FP32, BF16, naive FP8 (and the teacher, the best any model can do).
    print(f"  measuring {spec.name} in FP32 / BF16 / naive FP8", flush=True)
    ids = _ids(spec, metric_set.sparse)
    p32 = predict(model, metric_set.dense, ids, device)
    pbf = predict_bf16(model, metric_set.dense, ids, device)
    p8 = predict_naive_fp8(model, metric_set.dense, ids, device)
    q32 = quality(p32, metric_set.labels)
    quality_facts = {
        "samples": data.metric_samples,
        "label_ctr": float(metric_set.labels.mean()),
        "teacher": quality(metric_set.teacher_prob, metric_set.labels),
        "fp32": q32,
        "bf16": drift(q32, p32, quality(pbf, metric_set.labels), pbf),
        "fp8_naive": drift(q32, p32, quality(p8, metric_set.labels), p8),
    }

    cpu_model = copy.deepcopy(model).cpu().eval()
    torch_eval = [predict(cpu_model, b.dense, _ids(spec, b.sparse), "cpu") for b in evals]
    print(f"  exporting {spec.name} ({spec.exporter}, opset {spec.opset})", flush=True)
    main = _export_and_check(cpu_model, spec, spec.exporter, spec.opset, folder, size, calib[0], evals,
                             torch_eval, -1, ort_threads)
    state_bytes = 0
    if save_state:  # the same weights for PyTorch-side benchmarks (bench/torch_bench.py)
        state_path = os.path.join(folder, "model.pt")
        torch.save(cpu_model.state_dict(), state_path)
        state_bytes = os.path.getsize(state_path)  # not part of the committed folder's size
    ort_probs = np.concatenate(main.pop("ort_probs"))
    eval_labels = np.concatenate([b.labels for b in evals])
    for k, batch in enumerate(calib):
        write_data_set(os.path.join(folder, "calib", f"test_data_set_{k}"), _inputs(spec, batch), (), batch.labels)

    variants = []
    for exporter, opset in (spec.variants if variants else []):
        vname = f"{spec.name}_{exporter}_op{opset}"
        vfolder = os.path.join(out, "exports", vname)
        shutil.rmtree(vfolder, ignore_errors=True)
        print(f"  exporting variant {vname}", flush=True)
        vfacts = _export_and_check(cpu_model, spec, exporter, opset, vfolder, size, calib[0], evals[:1],
                                   torch_eval[:1], data.variant_rows, ort_threads)
        vfacts.pop("ort_probs")
        vfacts = {"model": spec.name, "variant_of": f"../../{spec.name}", "size": size, **vfacts,
                  "eval": {"batches": 1, "batch_size": data.variant_rows},
                  "bytes": folder_bytes(vfolder) + 4096}
        _write_json(os.path.join(vfolder, "facts.json"), vfacts)
        variants.append(vname)

    facts = {
        "model": spec.name,
        "summary": spec.summary,
        "size": size,
        "seed": seed,
        **main,
        "inputs": [
            {"name": "dense", "dtype": "float32", "shape": ["batch", spec.schema.num_dense]},
            {"name": "sparse", "dtype": spec.schema.id_dtype, "shape": ["batch", spec.schema.total_hot]},
        ],
        "outputs": [{"name": ex.OUTPUT_NAMES[0], "dtype": "float32", "shape": ["batch", 1],
                     "meaning": "click probability"}],
        "embedding_bags": ("nn.EmbeddingBag(mode='sum') in PyTorch" if getattr(spec.config, "use_embedding_bag", False)
                           else "nn.Embedding + sum in PyTorch") + "; exported as Slice + Gather + ReduceSum",
        "schema": spec.schema.to_json(),
        "config": dataclasses.asdict(spec.config),
        "parameters": params,
        "embedding_parameters": emb_params,
        "data": {
            "world": world.describe(),
            "calib": {"batches": data.calib_batches, "batch_size": data.calib_batch_size},
            "eval": {"batches": data.eval_batches, "batch_size": data.eval_batch_size},
        },
        "train": train_facts,
        "quality": quality_facts,
        "eval_quality_onnxruntime_fp32": quality(ort_probs, eval_labels),
        "variants": variants,
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__},
        "build_seconds": None,
        "bytes": None,
    }
    facts["build_seconds"] = round(time.time() - t0, 2)
    facts["bytes"] = folder_bytes(folder) - state_bytes + 8192  # + facts.json itself (an upper bound)
    _write_json(os.path.join(folder, "facts.json"), facts)
    return facts
