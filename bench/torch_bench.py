#!/usr/bin/env python3
"""PyTorch's side of the benchmark for one zoo model: latency, throughput and peak memory of each
baseline (bench/torch_impls.py) at each batch, quality on the held-out labelled eval data, and the
model's physical floor (GEMM FLOPs and FP8 bytes per sample, the device's measured peaks).

    torch_bench.py --model-dir ZOO/NAME --out OUT.json [--batches 512,4096,16384] [--runs 50]
                   [--budget-s 120] [--device cuda|cpu] [--dry-run] [--peaks PEAKS.json] [--resume]

The model folder is make_zoo.py's (with --save-state: model.pt holds the trained weights, so
PyTorch and LoKA run the same weights on the same inputs). The JSON is written after every
measurement, so a model that fails or runs out of time still leaves its finished rows; every row
that did not run says why in `status`; --resume takes up such a file later, measuring only the rows
a budget cut skipped (the benchmark's leftover time at its end). --dry-run: CPU, tiny batch, 3
timed runs (a smoke test of the whole path on a machine without a GPU).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from onnx import numpy_helper, TensorProto  # noqa: E402

import torch_impls as impls  # noqa: E402
from loka_zoo.metrics import quality  # noqa: E402
from loka_zoo.registry import get_spec  # noqa: E402

WARMUP_RUNS = 10


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True, help="zoo folder of one model (model.pt, facts.json, eval/)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--batches", default="512,4096,16384")
    p.add_argument("--runs", type=int, default=50, help="timed runs per implementation and batch")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting measurements after this (0: none)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--impls", default=",".join(impls.ALL_IMPLS))
    p.add_argument("--peaks", help="device peaks JSON: read if present, else measured and written")
    p.add_argument("--fp32-probs", help="also save the FP32 eval predictions here (.npy, eval sets in order)")
    p.add_argument("--dry-run", action="store_true", help="CPU, batch 8, 3 timed runs")
    p.add_argument("--resume", action="store_true",
                   help="take up an earlier call's OUT (which must exist): measure only its rows skipped or stopped "
                        "for time, keep the rest")
    args = p.parse_args(argv)
    if args.dry_run:
        args.device, args.batches, args.runs = "cpu", "8", 3
        torch.set_num_threads(1)  # small models; threads only contend on a shared machine
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.impls = [i for i in args.impls.split(",") if i]
    bad = [i for i in args.impls if i not in impls.ALL_IMPLS]
    if bad:
        p.error(f"unknown implementation(s) {bad}; known: {list(impls.ALL_IMPLS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but PyTorch sees no GPU (use --dry-run on a CPU machine)")
    return args


def read_tensor(path: str) -> np.ndarray:
    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)


def read_eval(model_dir: str):
    """The eval sets in order: (dense, sparse, labels), concatenated."""
    root = os.path.join(model_dir, "eval")
    sets = sorted((d for d in os.listdir(root) if d.startswith("test_data_set_")), key=lambda d: int(d.rsplit("_", 1)[1]))
    if not sets:
        raise RuntimeError(f"{root}: no test_data_set_<k> folders")
    parts = [[read_tensor(os.path.join(root, d, f)) for f in ("input_0.pb", "input_1.pb", "labels.pb")] for d in sets]
    return [np.concatenate([p[i] for p in parts]) for i in range(3)], [len(p[0]) for p in parts]


def load_model(model_dir: str) -> tuple[torch.nn.Module, dict]:
    with open(os.path.join(model_dir, "facts.json")) as f:
        facts = json.load(f)
    cap = max(facts["schema"]["table_rows"])
    spec = get_spec(facts["model"], facts["size"], cap)
    model = spec.build(spec.schema, spec.config)
    state = torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.eval(), facts


def fill(array: np.ndarray, batch: int) -> np.ndarray:
    reps = -(-batch // len(array))
    return np.concatenate([array] * reps)[:batch]


class Timer:
    """Median/p90 per-run latency: CUDA events on the GPU, the wall clock on the CPU."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def measure(self, run, runs: int) -> tuple[float, float]:
        for _ in range(WARMUP_RUNS if self.cuda else 1):
            run()
        self.sync()
        times = []
        for _ in range(runs):
            if self.cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop))
            else:
                t0 = time.perf_counter()
                run()
                times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        return statistics.median(times), times[min(len(times) - 1, len(times) * 9 // 10)]


def measure_peaks(device: str) -> dict:
    """Dense BF16/FP8 GEMM rates (8192^3) and device copy bandwidth, measured here."""
    if device != "cuda":
        return {"bf16_tflops": None, "fp8_tflops": None, "copy_gbps": None, "note": "not measured off the GPU"}
    timer = Timer("cuda")
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    bf16_ms, _ = timer.measure(lambda: a @ b, 20)
    out = {"bf16_tflops": 2 * n ** 3 / bf16_ms / 1e9}
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    try:
        fp8_ms, _ = timer.measure(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                                           out_dtype=torch.bfloat16), 20)
        out["fp8_tflops"] = 2 * n ** 3 / fp8_ms / 1e9
    except Exception as e:  # noqa: BLE001
        out["fp8_tflops"], out["fp8_error"] = None, str(e).splitlines()[0][:200]
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms, _ = timer.measure(lambda: dst.copy_(src), 20)
    out["copy_gbps"] = 2 * src.numel() / copy_ms / 1e6  # read + write
    del a, b, a8, b8, src, dst
    torch.cuda.empty_cache()
    return out


def model_floor(model, facts: dict, dense: torch.Tensor, sparse: torch.Tensor) -> dict:
    """Per-sample GEMM FLOPs and the bytes an FP8 engine must move at least."""
    rows = len(dense)
    flops = impls.gemm_flops(model, dense, sparse) / rows
    d = facts["config"]["embedding_dim"]
    total_hot = facts["schema"]["total_hot"]
    id_bytes = 4 if facts["schema"]["id_dtype"] == "int32" else 8
    return {
        "gemm_flops_per_sample": flops,
        # FP8 embedding rows read, the inputs and the output; weights once per batch.
        "bytes_per_sample_fp8": total_hot * d * 1 + facts["schema"]["num_dense"] * 4 + total_hot * id_bytes + 4,
        "weight_bytes_fp8": impls.linear_weight_bytes(model),
    }


class Writer:
    """Keeps the document and rewrites the file after every change (partial results survive)."""

    def __init__(self, path: str, doc: dict):
        self.path, self.doc = path, doc
        self.flush()

    def flush(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)


BUDGET_SKIP = "skipped: the model's time budget"


def read_resumable(path: str, name: str) -> dict:
    """An earlier run's document for this model, to take up."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot --resume it: {e}") from None
    if (not isinstance(doc, dict) or doc.get("model") != name or "quality" not in doc or "rows" not in doc
            or not all(isinstance(r, dict) and isinstance(r.get("status"), str) for r in doc["rows"])):
        raise ValueError(f"{path}: not a torch_bench.py result of {name} with its quality pass; cannot --resume it")
    return doc


def pending_rows(doc: dict, schedule: list) -> list:
    """What a resume measures, in schedule order: the rows skipped for time, and any the schedule
    has that the file lacks (a row started just before the stage was stopped)."""
    status = {(r["batch"], r["impl"]): r["status"] for r in doc["rows"]}
    return [key for key in schedule if key not in status or status[key].startswith(BUDGET_SKIP)]


def schedule_of(args) -> list:
    """(batch, impl) in measuring order: the batch that matters most first, and the slow paths after
    every other path at every batch, so a budget cut loses the least. Those go largest batch next:
    compiled code beat the CUDA graph at 4096 and lost to it at 512 on every model (H100, 2026-11-27)."""
    fast = [i for i in args.impls if i not in impls.SLOW_IMPLS]
    slow = [i for i in args.impls if i in impls.SLOW_IMPLS]
    schedule = [(b, i) for b in sorted(args.batches, key=lambda b: (b != 4096, b)) for i in fast]
    return schedule + [(b, i) for b in sorted(args.batches, key=lambda b: (b != 4096, -b)) for i in slow]


def prepare_models(args, model) -> tuple[dict, str | None]:
    """The FP32 model on the device, its BF16 copy and, where the device runs it, the naive FP8 copy."""
    dev = args.device
    models = {"fp32": model.to(dev)}
    models["bf16"] = impls.bf16_copy(models["fp32"])
    fp8_reason = impls.fp8_reference_check(dev)
    if fp8_reason is None:
        models["fp8"], n8, kept = impls.fp8_naive_copy(models["fp32"])
        models["fp8_note"] = f"{n8} Linears FP8, {kept} bf16 (K or N not a multiple of 16)"
    return models, fp8_reason


def record_peaks(args, out: Writer):
    if args.peaks and os.path.exists(args.peaks):
        with open(args.peaks) as f:
            out.doc["peaks"] = json.load(f)
        return
    try:
        out.doc["peaks"] = measure_peaks(args.device)
    except Exception as e:  # noqa: BLE001 - the floors are then reported as unavailable
        out.doc["peaks"] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    if args.peaks:
        with open(args.peaks, "w") as f:
            json.dump(out.doc["peaks"], f, indent=1)


def record_quality(args, out: Writer, models: dict, facts: dict, dense_np, sparse_np, labels):
    """The model's floor, and quality on the held-out eval data per precision, in eval-set-sized chunks."""
    dev = args.device
    probe_rows = min(len(dense_np), 512)
    with torch.no_grad():
        out.doc["floor"] = model_floor(models["fp32"], facts, torch.from_numpy(dense_np[:probe_rows]).to(dev),
                                       torch.from_numpy(sparse_np[:probe_rows]).to(dev))
    out.flush()
    chunk = 4096
    probs = {}
    with torch.no_grad():
        for precision in ("fp32", "bf16", "fp8"):
            if precision not in models:
                continue
            fn = impls.predict_fn(precision, models)
            parts = [fn(torch.from_numpy(dense_np[s:s + chunk]).to(dev),
                        torch.from_numpy(sparse_np[s:s + chunk]).to(dev)).float().cpu().numpy()
                     for s in range(0, len(dense_np), chunk)]
            probs[precision] = np.concatenate(parts)
    if args.fp32_probs:
        np.save(args.fp32_probs, probs["fp32"])
    out.doc["quality"] = {p: quality(v, labels) for p, v in probs.items()}
    out.flush()


def row_of(out: Writer, name: str, batch: int, impl_name: str) -> dict:
    """A row's identity and its precision's quality (drift against FP32), before any timing."""
    row = {"model": name, "batch": batch, "impl": impl_name, "device": out.doc["device"]}
    q = out.doc["quality"]
    precision = impls.QUALITY_OF[impl_name]
    if precision in q:
        row["logloss"], row["auc"] = q[precision]["logloss"], q[precision]["auc"]
        row["logloss_drift_rel"] = (q[precision]["logloss"] - q["fp32"]["logloss"]) / q["fp32"]["logloss"]
        row["auc_drift"] = q[precision]["auc"] - q["fp32"]["auc"]
    return row


def put_row(out: Writer, row: dict):
    """Writes the row in place of an earlier one of the same batch and implementation, else after the rest."""
    rows = out.doc["rows"]
    at = next((i for i, r in enumerate(rows) if (r["batch"], r["impl"]) == (row["batch"], row["impl"])), None)
    if at is None:
        rows.append(row)
    else:
        rows[at] = row
    out.flush()


# What a row says until it is measured: should the stage be stopped (its time limit) while a row
# runs, the file still accounts for it and every row after it, and --resume takes them up.
STOPPED = f"{BUDGET_SKIP} ran out before this row was measured (its stage was stopped)"


def measure(args, out: Writer, name: str, models: dict, fp8_reason, schedule: list, dense_np, sparse_np,
            start: float, resuming: bool = False):
    """Times each (batch, impl) of the schedule and writes its row; rows past the budget say so (a
    resumed row that again does not fit keeps what the first call wrote)."""
    dev = args.device
    if not resuming:
        for batch, impl_name in schedule:
            put_row(out, dict(row_of(out, name, batch, impl_name), status=STOPPED))
    timer = Timer(dev)
    inputs = {}  # a batch's device inputs, freed after its last entry in the schedule
    last_use = {b: i for i, (b, _) in enumerate(schedule)}
    for at, (batch, impl_name) in enumerate(schedule):
        if batch not in inputs:
            inputs[batch] = (torch.from_numpy(fill(dense_np, batch)).to(dev),
                             torch.from_numpy(fill(sparse_np, batch)).to(dev))
        dense, sparse = inputs[batch] if last_use[batch] != at else inputs.pop(batch)
        row = row_of(out, name, batch, impl_name)
        precision = impls.QUALITY_OF[impl_name]
        why_not = impls.needs_cuda(impl_name) if dev != "cuda" else None
        if why_not is None and precision == "fp8" and fp8_reason:
            why_not = fp8_reason
        if why_not is None and args.budget_s and time.time() - start > args.budget_s:
            if resuming:
                continue
            why_not = f"{BUDGET_SKIP} ({args.budget_s:.0f} s) was spent"
        if why_not:
            row["status"] = why_not
            put_row(out, row)
            continue
        t0 = time.time()
        try:
            if dev == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            with torch.no_grad():
                impl = impls.build(impl_name, models, dense, sparse)
                median, p90 = timer.measure(impl.run, args.runs)
            row.update({"latency_ms": median, "p90_ms": p90, "samples_per_s": batch / (median / 1e3),
                        "status": "ok", "setup_and_timing_s": round(time.time() - t0, 2)})
            if impl.note:
                row["note"] = impl.note
            if dev == "cuda":
                # Everything the measurement added beyond the shared FP32/BF16/FP8 models and inputs:
                # activations, workspaces, graph pools, compiled buffers.
                # Peak beyond the inputs and the other precisions' models, plus this precision's weights
                # (LoKA's figure includes its weights too).
                weights = impls.weight_bytes(models[precision])
                row["peak_mem_mb"] = (torch.cuda.max_memory_allocated() - base + weights) / 2 ** 20
                row["weights_mem_mb"] = weights / 2 ** 20
            del impl
        except Exception as e:  # noqa: BLE001 - recorded in the row; the other rows go on
            row["status"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            out.doc["errors"].append({"impl": impl_name, "batch": batch, "trace": traceback.format_exc()[-2000:]})
        put_row(out, row)
        print(f"[torch {name}] batch {batch} {impl_name}: {row.get('latency_ms', float('nan')):.4f} ms "
              f"({row['status']})", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.time()
    torch.manual_seed(0)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu (dry run)"
    name = os.path.basename(os.path.normpath(args.model_dir))
    try:
        previous = read_resumable(args.out, name) if args.resume else None
    except ValueError as e:
        print(f"torch_bench.py: {e}", file=sys.stderr)
        return 2
    if previous is not None:
        # Take up only what an earlier call's budget cut skipped; every other row stays as it was.
        # (Each skipped row stays in the file until its new one replaces it: a call killed midway
        # still leaves every cell saying what happened to it.)
        schedule = pending_rows(previous, schedule_of(args))
        out = Writer(args.out, previous)
        if not schedule:
            print(f"[torch {name}] nothing to resume: no row was skipped for time", flush=True)
            return 0
    else:
        schedule = schedule_of(args)
        out = Writer(args.out, {"model": name, "device": device_name, "date": datetime.date.today().isoformat(),
                                "torch": torch.__version__, "rows": [], "errors": []})
    try:
        model, facts = load_model(args.model_dir)
        (dense_np, sparse_np, labels), _ = read_eval(args.model_dir)
        if previous is None:
            out.doc["eval_samples"] = int(len(labels))
            record_peaks(args, out)  # before the models take device memory
            out.flush()
        models, fp8_reason = prepare_models(args, model)
        if previous is None:
            record_quality(args, out, models, facts, dense_np, sparse_np, labels)
        measure(args, out, name, models, fp8_reason, schedule, dense_np, sparse_np, start, resuming=previous is not None)
        out.doc["weight_mb"] = {p: impls.weight_bytes(models[p]) / 2 ** 20 for p in ("fp32", "bf16", "fp8") if p in models}
    except Exception as e:  # noqa: BLE001 - the file says what failed
        what = "resume: " if previous is not None else ""
        out.doc["errors"].append({"fatal": f"{what}{type(e).__name__}: {e}", "trace": traceback.format_exc()[-4000:]})
        out.flush()
        print(f"[torch {name}] failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    seconds = round(time.time() - start, 1)
    if previous is not None:
        out.doc["resumed_seconds"] = seconds
    else:
        out.doc["seconds"] = seconds
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
