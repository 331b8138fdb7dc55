#!/usr/bin/env python3
"""Turns one benchmark run's result folder into the table: rows per (model, batch, implementation),
LoKA's speed-up over the best BF16 PyTorch path, quality drift against FP32, the share of GEMM
FLOPs LoKA runs in FP8, and, wherever LoKA falls short of the target speed-up, why (its per-kernel
time against the model's FLOP and byte floor), and of the memory target, why (each side's peak as
its weights plus what serving the batch adds, and what LoKA's activation arena holds at its peak).

    bench_report.py RESULTS_DIR --zoo ZOO [--md docs/benchmarks.md] [--json docs/benchmarks.json]
                    [--mode full|quick|dry-run] [--target 1.6]

RESULTS_DIR is what bench/run_benchmark.sh fills (any part may be missing; missing parts become
rows that say so):
    stages.tsv                 stage <TAB> status <TAB> seconds <TAB> note
    torch/NAME.json            bench/torch_bench.py (rows, quality, floor, peaks)
    torch/NAME.fp32.npy        FP32 predictions on the eval sets, in order
    loka/NAME.opt.json         loka-opt --report
    loka/NAME.bench.json       loka_model_bench --json (with --kernel-trace)
    loka/NAME.outputs/test_data_set_<k>/output_0.pb   loka-run --outputs on ZOO/NAME/eval
It prints the table and writes the markdown and JSON documents. It needs numpy (and onnx only
to read LoKA's outputs), not PyTorch, so it runs anywhere.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))

BF16_IMPLS = ("torch-bf16-eager", "torch-bf16-graph", "torch-bf16-compile")
IMPL_ORDER = ["loka", "torch-fp32-eager", "torch-bf16-eager", "torch-bf16-graph", "torch-bf16-compile",
              "torch-fp8-naive"]
ROW_KEYS = ["model", "batch", "impl", "latency_ms", "speedup_vs_best_bf16", "logloss_drift_rel",
            "fp8_flop_share", "peak_mem_mb", "device", "date"]
TOP_KERNELS = 12
# Kernel families by name (first match wins): enough to say "GEMMs" vs "gathers" vs "glue".
KERNEL_FAMILIES = [("GEMM", ("gemm", "xmma", "cutlass", "matmul", "sm90_", "sm80_", "cublas", "epilogue")),
                   ("embedding", ("gather", "embedding", "bag")),
                   ("quantize", ("quant", "fp8", "e4m3", "amax", "scale")),
                   ("normalization", ("layer_norm", "layernorm", "softmax", "norm")),
                   ("elementwise/other", ("",))]


def load_json(path: str):
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"_unreadable": f"{path}: {e}"}


def read_stages(path: str) -> List[dict]:
    stages = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    stages.append({"stage": parts[0], "status": parts[1], "seconds": float(parts[2] or 0),
                                   "note": parts[3] if len(parts) > 3 else ""})
    return stages


def loka_quality(results: str, zoo: str, name: str, fp32_probs_path: str) -> Optional[dict]:
    """LoKA's logloss/AUC on the eval sets and the drift against PyTorch FP32 on the same rows."""
    out_dir = os.path.join(results, "loka", f"{name}.outputs")
    eval_dir = os.path.join(zoo, name, "eval")
    if not (os.path.isdir(out_dir) and os.path.isdir(eval_dir) and os.path.exists(fp32_probs_path)):
        return None
    import numpy as np
    from onnx import TensorProto, numpy_helper
    from loka_zoo.metrics import logloss_change_se, quality

    def read(path):
        proto = TensorProto()
        with open(path, "rb") as f:
            proto.ParseFromString(f.read())
        return numpy_helper.to_array(proto)

    sets = sorted((d for d in os.listdir(eval_dir) if d.startswith("test_data_set_")), key=lambda d: int(d.rsplit("_", 1)[1]))
    probs = np.concatenate([read(os.path.join(out_dir, d, "output_0.pb")) for d in sets])
    labels = np.concatenate([read(os.path.join(eval_dir, d, "labels.pb")) for d in sets])
    ref = np.load(fp32_probs_path)
    if ref.shape != probs.shape:
        return {"error": f"LoKA outputs {probs.shape} vs FP32 predictions {ref.shape}"}
    q, q32 = quality(probs, labels), quality(ref, labels)
    return {"logloss": q["logloss"], "auc": q["auc"],
            "logloss_drift_rel": (q["logloss"] - q32["logloss"]) / q32["logloss"],
            "logloss_drift_se": logloss_change_se(probs, ref, labels) / q32["logloss"],
            "auc_drift": q["auc"] - q32["auc"], "max_abs_prob_diff": float(np.abs(probs - ref).max())}


def collect(results: str, zoo: str, models: List[str]) -> Dict[str, dict]:
    """Per model: rows (torch and LoKA), floor, peaks, kernel traces and problems seen."""
    out = {}
    for name in models:
        torch_doc = load_json(os.path.join(results, "torch", f"{name}.json")) or {}
        opt = load_json(os.path.join(results, "loka", f"{name}.opt.json"))
        bench = load_json(os.path.join(results, "loka", f"{name}.bench.json"))
        problems = []
        for doc, what in ((torch_doc, "torch"), (opt, "loka-opt report"), (bench, "loka bench")):
            if isinstance(doc, dict) and "_unreadable" in doc:
                problems.append(doc["_unreadable"])
        if isinstance(torch_doc, dict):
            problems += [e.get("fatal", "") for e in torch_doc.get("errors", []) if e.get("fatal")]
        rows = [dict(r) for r in torch_doc.get("rows", [])] if isinstance(torch_doc, dict) else []
        fp8_share = storage = None
        if isinstance(opt, dict) and isinstance(opt.get("precision"), dict):
            fp8_share = opt["precision"].get("fp8_flop_share")
            storage = storage_text(opt["precision"])
        quality = None
        try:
            quality = loka_quality(results, zoo, name, os.path.join(results, "torch", f"{name}.fp32.npy"))
        except Exception as e:  # noqa: BLE001 - reported in the document
            problems.append(f"LoKA quality: {type(e).__name__}: {e}")
        traces = {}
        profiles = {}
        plain_path = os.path.join(results, "loka", f"{name}.plain")
        plain = os.path.exists(plain_path)  # holds why the LoKA rows time the FP32 model
        if plain:
            with open(plain_path) as f:
                plain_reason = f.read().strip() or "LoKA ran the FP32 ONNX model"
            problems.append(plain_reason)
        if isinstance(bench, list):
            for b in bench:
                row = {"model": name, "batch": b["batch"], "impl": "loka", "latency_ms": b["latency_ms"],
                       "p90_ms": b.get("p90_ms"), "samples_per_s": b.get("samples_per_s"),
                       "peak_mem_mb": b.get("peak_mem_mb"), "process_mem_mb": b.get("process_mem_mb"),
                       "weights_mem_mb": b.get("weights_mem_mb"), "arena": b.get("arena"),
                       "device": b.get("device"), "status": "ok",
                       "fp8_flop_share": 0.0 if plain else fp8_share}
                if plain:
                    row["note"] = plain_reason
                if quality and "error" not in quality:
                    row.update({k: quality[k] for k in QUALITY_KEYS})
                rows.append(row)
                if "kernel_trace" in b:
                    traces[b["batch"]] = b["kernel_trace"]
                if "node_profile" in b:
                    profiles[b["batch"]] = b["node_profile"]
        if quality and "error" in quality:
            problems.append("LoKA quality: " + quality["error"])
        for r in rows:
            if r["impl"].startswith("torch"):
                r["fp8_flop_share"] = 0.0 if r["impl"] != "torch-fp8-naive" else None
        out[name] = {"rows": rows, "floor": torch_doc.get("floor") if isinstance(torch_doc, dict) else None,
                     "peaks": torch_doc.get("peaks") if isinstance(torch_doc, dict) else None,
                     "quality": torch_doc.get("quality") if isinstance(torch_doc, dict) else None,
                     "loka_quality": quality, "traces": traces, "profiles": profiles, "problems": problems,
                     "fp8_share": fp8_share,
                     "storage": storage,
                     "device": torch_doc.get("device") if isinstance(torch_doc, dict) else None}
    return out


def add_speedups(rows: List[dict]) -> None:
    """speedup_vs_best_bf16 = best BF16 PyTorch latency at the same (model, batch) / this latency."""
    best: Dict[tuple, tuple] = {}
    for r in rows:
        if r["impl"] in BF16_IMPLS and r.get("status") == "ok" and r.get("latency_ms"):
            key = (r["model"], r["batch"])
            if key not in best or r["latency_ms"] < best[key][0]:
                best[key] = (r["latency_ms"], r["impl"])
    for r in rows:
        b = best.get((r["model"], r["batch"]))
        ok = r.get("status") == "ok" and r.get("latency_ms")
        r["speedup_vs_best_bf16"] = b[0] / r["latency_ms"] if (b and ok) else None
        r["best_bf16_impl"] = b[1] if b else None


def target_verdict(speed: Optional[float], target: float, unmeasured: List[str]) -> str:
    """The summary's verdict on a speed-up. A BF16 path skipped at this row (its time budget spent)
    might have been the fastest: a "met" is then only against the paths measured, and says which
    were not; a shortfall stands whatever was skipped."""
    if speed is None:
        return "—"
    if speed < target:
        return "**short**"
    if unmeasured:
        return f"met against the measured paths only ({', '.join(unmeasured)} not measured)"
    return "met"


MEMORY_TARGET = 0.6  # LoKA's peak device memory at most 60% of the best BF16 path's (issue 8's target)
DRIFT_TARGET = 0.0002  # LoKA's logloss drift at most 0.02% relative to FP32 (issue 8's target)
# What a LoKA row takes from loka_quality (logloss_drift_se: one standard error of the drift).
QUALITY_KEYS = ("logloss", "auc", "logloss_drift_rel", "logloss_drift_se", "auc_drift")


def drift_verdict(drift: Optional[float], se: Optional[float], target: float = DRIFT_TARGET) -> str:
    """The summary's drift cell: the relative logloss drift, ± one standard error where known (the
    eval set's own noise: a drift within about one of it of the target is as close as the eval rows
    can tell), and whether it is within `target`."""
    if drift is None or (isinstance(drift, float) and math.isnan(drift)):
        return "—"
    known = se is not None and not (isinstance(se, float) and math.isnan(se))
    return (f"{100 * drift:+.4f}%" + (f" ±{100 * se:.4f}" if known else "") + " "
            + ("met" if drift <= target else "**over**"))


def memory_verdict(loka_mb: Optional[float], bf16_mb: Optional[float], target: float = MEMORY_TARGET) -> str:
    """The summary's memory cell: LoKA's peak as a share of the best BF16 path's, and whether it is
    within `target` of it. Either figure missing: no verdict."""
    if not loka_mb or not bf16_mb:
        return "—"
    share = loka_mb / bf16_mb
    return f"{100 * share:.0f}% " + ("met" if share <= target else "**short**")


def missing_loka_rows(data: Dict[str, dict], batches: List[int], stages: List[dict]) -> List[dict]:
    """A LoKA row per (model, batch) that has none, saying which stage failed."""
    out = []
    for name, d in data.items():
        have = {r["batch"] for r in d["rows"] if r["impl"] == "loka"}
        feeding = {"build", "tools", f"zoo-{name}", f"opt-{name}", f"loka-bench-{name}", f"loka-bench-untraced-{name}",
                   f"loka-quality-{name}"}
        failed = [s for s in stages if s["stage"] in feeding and s["status"] != "ok"]
        reason = ("; ".join(f"{s['stage']}: {s['status']}" + (f" ({s['note']})" if s["note"] else "") for s in failed)
                  or "no LoKA result (stage did not run)")
        for b in batches:
            if b not in have:
                row = {"model": name, "batch": b, "impl": "loka", "status": reason, "fp8_flop_share": d["fp8_share"]}
                q = d["loka_quality"]
                if q and "error" not in q:  # quality comes from loka-run, which may have worked
                    row.update({k: q[k] for k in QUALITY_KEYS})
                out.append(row)
    return out


def fmt(v, spec: str = ".3f", none: str = "—") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


def floors_ms(floor: Optional[dict], peaks: Optional[dict], batch: int) -> dict:
    """The model's time floor at `batch`: GEMM FLOPs at the FP8 rate, FP8 bytes at copy bandwidth."""
    if not floor or not peaks or not peaks.get("fp8_tflops") or not peaks.get("copy_gbps"):
        return {}
    flop_ms = floor["gemm_flops_per_sample"] * batch / (peaks["fp8_tflops"] * 1e12) * 1e3
    byte_ms = (floor["bytes_per_sample_fp8"] * batch + floor["weight_bytes_fp8"]) / (peaks["copy_gbps"] * 1e9) * 1e3
    return {"flop_ms": flop_ms, "byte_ms": byte_ms, "floor_ms": max(flop_ms, byte_ms)}


def kernel_family(name: str) -> str:
    lower = name.lower()
    return next(family for family, keys in KERNEL_FAMILIES if any(k in lower for k in keys))


def family_times(kernels: List[dict]) -> Dict[str, float]:
    """Milliseconds per run by kernel family, largest first."""
    totals: Dict[str, float] = {}
    for k in kernels:
        family = kernel_family(k["name"])
        totals[family] = totals.get(family, 0.0) + k["ms_per_run"]
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def table_lines(rows: List[dict]) -> List[str]:
    head = ["model", "batch", "impl", "latency ms", "samples/s", "vs best BF16", "logloss drift",
            "AUC drift", "FP8 FLOPs", "peak MB", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        speed = r.get("speedup_vs_best_bf16")
        lines.append("| " + " | ".join([
            r["model"], str(r["batch"]), ("**loka**" if r["impl"] == "loka" else r["impl"]),
            fmt(r.get("latency_ms"), ".4f"), fmt(r.get("samples_per_s"), ".3g"),
            (fmt(speed, ".2f") + "×") if speed else "—",
            (fmt(100 * r["logloss_drift_rel"], "+.4f") + "%") if r.get("logloss_drift_rel") is not None else "—",
            fmt(r.get("auc_drift"), "+.5f"),
            (fmt(100 * r["fp8_flop_share"], ".0f") + "%") if r.get("fp8_flop_share") is not None else "—",
            fmt(r.get("peak_mem_mb"), ".0f"),
            (r.get("status", "?") + (f" — {r['note']}" if r.get("note") else "")).replace("|", "/")]) + " |")
    return lines


def best_bf16_row(rows: List[dict], loka: dict) -> Optional[dict]:
    """The row of the best BF16 path at `loka`'s (model, batch), or None."""
    return next((x for x in rows if x["model"] == loka["model"] and x["batch"] == loka["batch"]
                 and x["impl"] == loka.get("best_bf16_impl")), None)


def memory_breakdown(loka: dict, best: Optional[dict], target: float = MEMORY_TARGET) -> Optional[str]:
    """Why LoKA's peak misses the memory target, where it does: each side's peak as its weights
    (what is resident before a batch runs) plus what serving the batch adds (activations,
    workspaces, graph pools), the budget the target leaves, and what LoKA's activation arena holds
    at its peak (arena_peak_text). None when the target is met or a figure is missing."""
    if not best or not loka.get("peak_mem_mb") or not best.get("peak_mem_mb"):
        return None
    peak, bf16_peak = loka["peak_mem_mb"], best["peak_mem_mb"]
    if peak <= target * bf16_peak:
        return None
    w, bf16_w = loka.get("weights_mem_mb"), best.get("weights_mem_mb")

    def split(total: float, weights: Optional[float]) -> str:
        if weights is None:
            return f"{total:.0f} MB (no weights figure recorded)"
        return f"{total:.0f} MB = weights {weights:.0f} + serving the batch {total - weights:.0f}"

    line = (f"Memory: LoKA {split(peak, w)}; {best['impl']} {split(bf16_peak, bf16_w)}. "
            f"The target ({100 * target:.0f}% of the BF16 path) allows {target * bf16_peak:.0f} MB")
    if w is not None and bf16_w is not None and bf16_peak > bf16_w:
        line += (f": LoKA's weights are {w / bf16_w:.2f}× the BF16 path's and what it adds to serve the batch "
                 f"{(peak - w) / (bf16_peak - bf16_w):.2f}×")
    line += "."
    arena = arena_peak_text(loka.get("arena"))
    return f"{line} {arena}" if arena else line


def arena_peak_text(arena: Optional[dict]) -> Optional[str]:
    """What LoKA's activation arena holds at its peak (loka_model_bench's Session::arena_report):
    the node running then and the largest buffers alive, so the memory line says what to shrink."""
    if not isinstance(arena, dict) or not arena.get("live_at_peak"):
        return None
    parts = [f"`{b['name']}` {b['mb']:.0f}" for b in arena["live_at_peak"]]
    others = arena.get("others")
    if others:
        parts.append(f"{others['count']} more {others['mb']:.0f}")
    node = f" (at node `{arena['peak_node']}`)" if arena.get("peak_node") else ""
    return (f"Its activation arena is {arena['arena_mb']:.0f} MB; at its peak{node} {arena['peak_mb']:.0f} MB are "
            f"alive at once, in MB: {', '.join(parts)}.")


def storage_text(precision: Optional[dict]) -> Optional[str]:
    """What BF16 storage did (loka-opt's report, model.precision): the activation sets the measured
    selection chose and how many were stored in the lowered model (with the first reason one was
    not), the sets it declined, and the tables held in BF16; or that it was not measured. None
    without a report."""
    if not isinstance(precision, dict):
        return None
    if "bf16_activations" not in precision and "bf16_tables" not in precision:
        return "BF16 storage: not measured (pin-precision measured no selection with bf16_storage)."
    chosen = precision.get("bf16_activations") or []
    lowered = precision.get("bf16_activations_lowered") or []
    stored = [e for e in lowered if isinstance(e, dict) and e.get("stored")]
    not_stored = [e for e in lowered if isinstance(e, dict) and not e.get("stored")]
    declined = precision.get("bf16_activations_declined") or []
    text = (f"BF16 storage: {len(stored)} of {len(chosen)} chosen activation sets stored, "
            f"{len(declined)} declined by the measured selection, {precision.get('bf16_tables', 0)} tables in BF16")
    if not_stored:
        text += f"; not stored: {len(not_stored)} (first: {not_stored[0].get('reason', 'no reason given')})"
    return text + "."


def shortfall_lines(data: Dict[str, dict], rows: List[dict], target: float) -> List[str]:
    lines = []
    for r in rows:
        if r["impl"] != "loka":
            continue
        speed = r.get("speedup_vs_best_bf16")
        best = best_bf16_row(rows, r)
        memory = memory_breakdown(r, best)
        if speed is not None and speed >= target and memory is None:
            continue
        d = data[r["model"]]
        lines.append(f"### {r['model']}, batch {r['batch']}")
        if memory:
            lines.append(memory)
            if d.get("storage"):
                lines.append(d["storage"])
        if speed is not None and speed >= target:
            lines.append(f"LoKA {r['latency_ms']:.4f} ms vs {r['best_bf16_impl']} {best['latency_ms']:.4f} ms: "
                         f"{speed:.2f}×, the speed target met.")
            lines.append("")
            continue
        if speed is None:
            lines.append(f"No speed-up figure. LoKA: {r.get('status', 'did not run')}. Best BF16 path: "
                         f"{r.get('best_bf16_impl') or 'none measured'}.")
            lines.append("")
            continue
        lines.append(f"LoKA {r['latency_ms']:.4f} ms vs {r['best_bf16_impl']} {best['latency_ms']:.4f} ms: "
                     f"**{speed:.2f}×, short of {target}×**. FP8 covers "
                     f"{fmt(100 * r['fp8_flop_share'], '.0f') + '%' if r.get('fp8_flop_share') is not None else 'an unknown share'}"
                     " of the GEMM FLOPs.")
        fl = floors_ms(d["floor"], d["peaks"], r["batch"])
        if fl:
            lines.append(f"Floor at this batch: GEMM FLOPs at the measured FP8 rate {fl['flop_ms']:.4f} ms, FP8 bytes "
                         f"(embedding rows, inputs, weights once) at the measured copy bandwidth {fl['byte_ms']:.4f} ms; "
                         f"LoKA runs at {r['latency_ms'] / fl['floor_ms']:.1f}× the floor "
                         f"({'compute' if fl['flop_ms'] >= fl['byte_ms'] else 'memory'}-bound floor).")
        else:
            lines.append("Floor: not available (the PyTorch stage did not measure the device peaks or FLOPs).")
        trace = d["traces"].get(r["batch"])
        if not trace:
            lines.append("Kernel breakdown: none recorded (loka_model_bench ran without --kernel-trace or failed).")
        elif "error" in trace:
            lines.append(f"Kernel breakdown: unavailable ({trace['error']}).")
        else:
            busy = trace["busy_ms_per_run"]
            idle = r["latency_ms"] - busy
            lines.append(f"Kernel time per run {busy:.4f} ms of {r['latency_ms']:.4f} ms "
                         f"({100 * busy / r['latency_ms']:.0f}%); gaps/launch/copies "
                         f"{max(idle, 0):.4f} ms. By family: "
                         + ", ".join(f"{f} {ms:.4f} ms" for f, ms in family_times(trace["kernels"]).items())
                         + f". Top kernels (CUPTI, {trace['runs']} graph runs):")
            lines.append("")
            lines.append("| kernel | ms per run | share of latency | launches per run |")
            lines.append("|---|---|---|---|")
            for k in trace["kernels"][:TOP_KERNELS]:
                lines.append(f"| `{k['name'][:90]}` | {k['ms_per_run']:.4f} | "
                             f"{100 * k['ms_per_run'] / r['latency_ms']:.1f}% | {k['launches_per_run']:g} |")
            rest = trace["kernels"][TOP_KERNELS:]
            if rest:
                lines.append(f"| ({len(rest)} more kernels) | {sum(k['ms_per_run'] for k in rest):.4f} | | |")
        lines += node_profile_lines(d.get("profiles", {}).get(r["batch"]))
        lines.append("")
    return lines


def table_cell(text: str) -> str:
    """`text` safe in one Markdown table cell: model names may hold any byte, '|' and newlines too."""
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7f else c for c in text).replace("|", "\\|")


def node_profile_lines(profile: Optional[dict]) -> List[str]:
    """The slowest nodes of loka_model_bench's node-by-node profile (no CUDA graph, device events
    between nodes), or why there is none; nothing without a profile."""
    if not profile:
        return []
    if "error" in profile:
        return ["", f"Node profile: unavailable ({profile['error']})."]
    summed = profile["summed_ms"]
    lines = ["", f"Top nodes (node by node without the CUDA graph, {profile['runs']} runs; "
                 f"the nodes' medians sum to {summed:.4f} ms):", "",
             "| node | op | ms | share of the sum |", "|---|---|---|---|"]
    for n in profile["nodes"]:
        lines.append(f"| `{table_cell(n['name'][:70])}` | {table_cell(n['op'])} | {n['ms']:.4f} | "
                     f"{100 * n['ms'] / summed if summed > 0 else 0:.1f}% |")
    others = profile.get("others")
    if others:
        lines.append(f"| ({others['count']} more nodes) | | {others['ms']:.4f} | |")
    return lines


def build_documents(results: str, zoo: str, models: List[str], batches: List[int], mode: str,
                    target: float, settings: str = "") -> tuple[List[dict], str, str]:
    """Returns (rows for the JSON document, markdown text, printed table)."""
    stages = read_stages(os.path.join(results, "stages.tsv"))
    data = collect(results, zoo, models)
    rows = [r for d in data.values() for r in d["rows"]]
    rows += missing_loka_rows(data, batches, stages)
    add_speedups(rows)
    order = {m: i for i, m in enumerate(models)}
    rows.sort(key=lambda r: (order.get(r["model"], 99), r["batch"],
                             IMPL_ORDER.index(r["impl"]) if r["impl"] in IMPL_ORDER else 99))
    device = next((d["device"] for d in data.values() if d.get("device")), None) or \
        next((r.get("device") for r in rows if r.get("device")), None) or "unknown device"
    date = datetime.date.today().isoformat()
    for r in rows:
        r.setdefault("device", device)
        r["date"] = date
        for k in ROW_KEYS:
            r.setdefault(k, None)

    md = [f"# LoKA vs PyTorch — {mode} run", "",
          f"Device: **{device}**. Date: {date}. Generated by `bench/run_benchmark.sh` (mode `{mode}`); "
          f"do not edit by hand." + (f" Settings: {settings}." if settings else ""), ""]
    if mode == "dry-run":
        md += ["> **Dry run on the CPU**: tiny models, tiny batch, CPU PyTorch. These figures test the "
               "pipeline only and say nothing about LoKA's speed.", ""]
    md += ["## Summary: LoKA against the best BF16 PyTorch path", "",
           "| model | batch | LoKA ms | best BF16 | BF16 ms | speed-up | target | LoKA MB | BF16 MB | memory "
           f"(≤{100 * MEMORY_TARGET:.0f}%) | logloss drift (≤{100 * DRIFT_TARGET:.2f}%) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["impl"] != "loka":
            continue
        best = best_bf16_row(rows, r)
        speed = r.get("speedup_vs_best_bf16")
        unmeasured = sorted(x["impl"] for x in rows if x["model"] == r["model"] and x["batch"] == r["batch"]
                            and x["impl"] in BF16_IMPLS and x.get("status") != "ok")
        verdict = target_verdict(speed, target, unmeasured)
        md.append(f"| {r['model']} | {r['batch']} | {fmt(r.get('latency_ms'), '.4f')} | "
                  f"{r.get('best_bf16_impl') or '—'} | {fmt(best.get('latency_ms') if best else None, '.4f')} | "
                  f"{(fmt(speed, '.2f') + '×') if speed else '—'} | {verdict} (≥{target}×) | "
                  f"{fmt(r.get('peak_mem_mb'), '.0f')} | {fmt(best.get('peak_mem_mb') if best else None, '.0f')} | "
                  f"{memory_verdict(r.get('peak_mem_mb'), best.get('peak_mem_mb') if best else None)} | "
                  f"{drift_verdict(r.get('logloss_drift_rel'), r.get('logloss_drift_se'))} |")
    md += ["", "## All rows", ""] + table_lines(rows) + [""]
    md += ["Latency: median over timed runs after warm-up, CUDA events around each run on the run's stream "
           "(LoKA: one CUDA-graph launch of the whole model, inputs already on the device). Drifts: relative "
           "logloss change and AUC change against PyTorch FP32 on the held-out labelled eval sets (BF16 graph "
           "and compile rows carry BF16 eager's quality); the summary's ± is one standard error of LoKA's drift, "
           "the spread of the per-sample logloss change over the eval rows (both scored on the same rows) over "
           "the square root of their number: the eval set's own noise, against which a drift near the target "
           "is judged. FP8 FLOPs: share of GEMM FLOPs LoKA runs in FP8 "
           "(loka-opt's report). Peak MB, like for like: LoKA — the most it had allocated while serving that batch "
           "in a fresh Session (weights, arenas, staging, workspaces); PyTorch — peak allocated beyond the inputs, "
           "plus the weights of that precision. Neither counts what the CUDA context and libraries keep for "
           "themselves; for LoKA that total is in benchmarks.json as process_mem_mb.", ""]
    short = shortfall_lines(data, rows, target)
    if short:
        md += [f"## Where LoKA falls short of {target}× or of the memory target, and why", ""] + short
    else:
        md += [f"## Where LoKA falls short of {target}× or of the memory target", "", "Nowhere in this run.", ""]
    problems = [(m, p) for m, d in data.items() for p in d["problems"]]
    if problems:
        md += ["## Problems", ""] + [f"- {m}: {p}" for m, p in problems] + [""]
    if stages:
        md += ["## Stages", "", "| stage | status | seconds | note |", "|---|---|---|---|"]
        md += [f"| {s['stage']} | {s['status']} | {s['seconds']:.0f} | {s['note']} |" for s in stages] + [""]
    peaks = next((d["peaks"] for d in data.values() if d.get("peaks")), None)
    if peaks:
        md += ["## Device peaks measured in this run", "",
               f"BF16 GEMM 8192³ {fmt(peaks.get('bf16_tflops'), '.0f')} TFLOP/s, FP8 GEMM 8192³ "
               f"{fmt(peaks.get('fp8_tflops'), '.0f')} TFLOP/s, device copy {fmt(peaks.get('copy_gbps'), '.0f')} GB/s "
               "(read + write).", ""]

    printed = [f"LoKA vs PyTorch ({mode}) on {device}, {date}",
               f"{'model':<18}{'batch':>7}  {'impl':<20}{'ms':>10}{'vs bf16':>9}{'drift%':>10}{'fp8':>6}  status"]
    for r in rows:
        speed = r.get("speedup_vs_best_bf16")
        drift = r.get("logloss_drift_rel")
        printed.append(f"{r['model']:<18}{r['batch']:>7}  {r['impl']:<20}{fmt(r.get('latency_ms'), '.4f'):>10}"
                       f"{(fmt(speed, '.2f') + 'x') if speed else '—':>9}"
                       f"{fmt(100 * drift if drift is not None else None, '+.4f'):>10}"
                       f"{(fmt(100 * r['fp8_flop_share'], '.0f') + '%') if r.get('fp8_flop_share') is not None else '—':>6}"
                       f"  {r.get('status', '?')[:70]}")
    return rows, "\n".join(md) + "\n", "\n".join(printed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", help="the run's result folder")
    p.add_argument("--zoo", required=True, help="the zoo folder the run built (for eval labels)")
    p.add_argument("--models", required=True, help="comma-separated model names, in table order")
    p.add_argument("--batches", required=True, help="comma-separated batch sizes")
    p.add_argument("--md", help="markdown file to write")
    p.add_argument("--json", help="JSON file to write (a list of rows)")
    p.add_argument("--mode", default="full")
    p.add_argument("--target", type=float, default=1.6, help="LoKA's target speed-up over the best BF16 path")
    p.add_argument("--settings", default="", help="one line on how the run was set up (shown in the markdown)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.results):
        print(f"bench_report: {args.results}: no such folder", file=sys.stderr)
        return 1
    models = [m for m in args.models.split(",") if m]
    batches = [int(b) for b in args.batches.split(",") if b]
    rows, md, printed = build_documents(args.results, args.zoo, models, batches, args.mode, args.target, args.settings)
    print(printed)
    if args.md:
        os.makedirs(os.path.dirname(os.path.abspath(args.md)), exist_ok=True)
        with open(args.md, "w") as f:
            f.write(md)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
