#!/usr/bin/env python3
"""Regenerates LoKA's model zoo: trains each model on synthetic click data, measures its BF16 and
naive-FP8 quality drift, exports it to ONNX, and writes calibration/evaluation data with
onnxruntime's FP32 outputs. Deterministic for a given --seed (and device).

    python3 models/make_zoo.py                       # the committed tiny zoo -> models/zoo
    python3 models/make_zoo.py --size full --device cuda   # benchmark sizes -> build-zoo-full/zoo
See models/README.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from loka_zoo.build import DataPlan, build_model  # noqa: E402
from loka_zoo.registry import MODEL_NAMES, get_spec  # noqa: E402

DATA_PLANS = {
    "tiny": DataPlan(calib_batches=4, calib_batch_size=256, eval_batches=2, eval_batch_size=1024,
                     metric_samples=32768, variant_rows=128),
    "full": DataPlan(calib_batches=8, calib_batch_size=4096, eval_batches=4, eval_batch_size=4096,
                     metric_samples=262144, variant_rows=1024),
}
MAX_TINY_BYTES = 3_000_000


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=["tiny", "full"], default="tiny")
    p.add_argument("--out", help="zoo root (default: models/zoo for tiny, build-zoo-full/zoo for full)")
    p.add_argument("--models", default=",".join(MODEL_NAMES),
                   help=f"comma-separated subset of {','.join(MODEL_NAMES)}")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-steps", type=int, help="override the training steps of every model")
    p.add_argument("--metric-samples", type=int, help="override how many samples the quality facts use")
    p.add_argument("--table-rows", type=int, default=100000, help="row cap per table for --size full")
    p.add_argument("--threads", type=int, default=1,
                   help="PyTorch CPU threads (1 keeps runs reproducible and fast on shared machines)")
    p.add_argument("--log-every", type=int, default=0, help="print the training loss every N steps")
    p.add_argument("--no-variants", action="store_true", help="skip the export variants under exports/")
    p.add_argument("--save-state", action="store_true",
                   help="also write NAME/model.pt (the trained state_dict; bench/torch_bench.py reads it)")
    p.add_argument("--calib-sets", type=int, help="override the number of calibration data sets")
    p.add_argument("--calib-rows", type=int, help="override the rows per calibration data set")
    p.add_argument("--eval-sets", type=int, help="override the number of evaluation data sets")
    p.add_argument("--eval-rows", type=int, help="override the rows per evaluation data set")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODEL_NAMES]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {MODEL_NAMES}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but PyTorch sees no GPU")
    if args.out is None:
        args.out = os.path.join(HERE, "zoo") if args.size == "tiny" else os.path.join(HERE, "..", "build-zoo-full", "zoo")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    os.makedirs(args.out, exist_ok=True)
    plan = DATA_PLANS[args.size]
    overrides = {"metric_samples": args.metric_samples, "calib_batches": args.calib_sets,
                 "calib_batch_size": args.calib_rows, "eval_batches": args.eval_sets, "eval_batch_size": args.eval_rows}
    plan = dataclasses.replace(plan, **{k: v for k, v in overrides.items() if v is not None})
    start = time.time()
    failures = []
    for name in args.models:
        index = MODEL_NAMES.index(name)  # stable per model, so a subset regenerates the same files
        spec = get_spec(name, args.size, args.table_rows)
        if args.train_steps is not None:
            spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, steps=args.train_steps))
        print(f"[{name}] size={args.size} device={args.device}", flush=True)
        facts = build_model(spec, index, args.size, args.out, plan, args.seed, args.device, args.log_every,
                            variants=not args.no_variants, save_state=args.save_state, ort_threads=args.threads)
        q = facts["quality"]
        print(f"[{name}] {facts['bytes'] / 1e6:.2f} MB, {facts['build_seconds']} s; FP32 logloss "
              f"{q['fp32']['logloss']:.4f} AUC {q['fp32']['auc']:.4f} (teacher {q['teacher']['auc']:.4f}); "
              f"drift BF16 {q['bf16']['logloss_drift_pct']:+.4f}% / FP8 {q['fp8_naive']['logloss_drift_pct']:+.4f}%",
              flush=True)
        if args.size == "tiny" and facts["bytes"] > MAX_TINY_BYTES:
            failures.append(f"{name}: {facts['bytes']} bytes exceeds {MAX_TINY_BYTES}")
    print(f"done in {time.time() - start:.1f} s -> {os.path.abspath(args.out)}")
    for f in failures:
        print(f"error: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
