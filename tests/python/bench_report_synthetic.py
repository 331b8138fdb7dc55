#!/usr/bin/env python3
"""bench/bench_report.py on synthetic result folders: the speed-up against the best BF16 path, the
rows a failed stage leaves, LoKA's quality from its outputs, the shortfall section with the kernel
breakdown and the floors, and the JSON row contract (docs/benchmarks.json). No GPU, no PyTorch.

    bench_report_synthetic.py --source REPO [--tools DIR]   (--tools is accepted and unused)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import unittest

import numpy as np
from onnx import numpy_helper

SOURCE = None
MODELS = ["dlrm_dcnv2", "wukong", "dhen"]
ROW_KEYS = {"model", "batch", "impl", "latency_ms", "speedup_vs_best_bf16", "logloss_drift_rel",
            "fp8_flop_share", "peak_mem_mb", "device", "date"}


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def write_pb(path, name, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def torch_rows(model, batch, latencies):
    return [{"model": model, "batch": batch, "impl": impl, "latency_ms": ms, "samples_per_s": batch / ms * 1e3,
             "status": "ok", "peak_mem_mb": 100.0, "weights_mem_mb": 40.0, "device": "Fake H100",
             "logloss_drift_rel": 1e-5}
            for impl, ms in latencies.items()]


def make_results(root):
    """dlrm_dcnv2: everything ran but BF16 eager at 4096, LoKA 2x at 4096 and 1.25x at 512 (short);
    wukong: loka-opt failed."""
    results, zoo = os.path.join(root, "results"), os.path.join(root, "zoo")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "stages.tsv"), "w") as f:
        f.write("build\tok\t120\t\nzoo-dlrm_dcnv2\tok\t60\t\nzoo-wukong\tok\t70\t\n"
                "opt-wukong\tTIMEOUT\t240\tbudget 240 s\nloka-bench-wukong\tskipped\t0\tno model\n")
    peaks = {"bf16_tflops": 700.0, "fp8_tflops": 1400.0, "copy_gbps": 3000.0}
    floor = {"gemm_flops_per_sample": 3.2e7, "bytes_per_sample_fp8": 30000, "weight_bytes_fp8": 2e7}
    rows = torch_rows("dlrm_dcnv2", 512, {"torch-fp32-eager": 0.9, "torch-bf16-eager": 0.6,
                                          "torch-bf16-graph": 0.25, "torch-bf16-compile": 0.3,
                                          "torch-fp8-naive": 0.5})
    rows += torch_rows("dlrm_dcnv2", 4096, {"torch-fp32-eager": 3.0,
                                           "torch-bf16-graph": 0.81, "torch-bf16-compile": 1.16})
    # A BF16 path out of time at 4096: LoKA's "met" there is against the measured paths only.
    rows.append({"model": "dlrm_dcnv2", "batch": 4096, "impl": "torch-bf16-eager",
                 "status": "skipped: the model's time budget (43 s) was spent"})
    rows.append({"model": "dlrm_dcnv2", "batch": 4096, "impl": "torch-fp8-naive",
                 "status": "failed: RuntimeError: boom"})
    write_json(os.path.join(results, "torch", "dlrm_dcnv2.json"),
               {"model": "dlrm_dcnv2", "device": "Fake H100", "rows": rows, "errors": [], "peaks": peaks,
                "floor": floor, "quality": {"fp32": {"logloss": 0.5, "auc": 0.8}}})
    write_json(os.path.join(results, "torch", "wukong.json"),
               {"model": "wukong", "device": "Fake H100", "peaks": peaks, "floor": floor, "errors": [],
                "rows": torch_rows("wukong", 512, {"torch-bf16-graph": 1.0})})
    write_json(os.path.join(results, "loka", "dlrm_dcnv2.opt.json"), {"precision": {
        "fp8_flop_share": 0.75, "bf16_tables": 3,
        "bf16_activations": [{"values": ["x0"]}, {"values": ["x2"]}],
        "bf16_activations_declined": [{"values": ["x9"], "reason": "over the budget"}],
        "bf16_activations_lowered": [{"values": ["x0"], "stored": True},
                                     {"values": ["x2"], "stored": False, "reason": "'x2' is read by Relu 'r'"}]}})
    trace = {"runs": 20, "busy_ms_per_run": 0.15, "dropped_records": 0,
             "kernels": [{"name": f"kernel_{i}", "launches_per_run": 1, "ms_per_run": 0.15 / 15} for i in range(15)]}
    profile = {"runs": 20, "summed_ms": 0.32,
               "nodes": [{"name": f"node_{i}", "op": "ai.loka::QuantizedGemm", "ms": 0.02} for i in range(14)]
               + [{"name": "odd|name\n", "op": "Relu", "ms": 0.02}],
               "others": {"count": 4, "ms": 0.02}}
    write_json(os.path.join(results, "loka", "dlrm_dcnv2.bench.json"), [
        {"batch": 512, "latency_ms": 0.2, "p90_ms": 0.21, "samples_per_s": 2.56e6, "peak_mem_mb": 900,
         "device": "Fake H100", "kernel_trace": trace, "node_profile": profile},
        {"batch": 4096, "latency_ms": 0.405, "p90_ms": 0.41, "samples_per_s": 1e7, "peak_mem_mb": 1000,
         "weights_mem_mb": 20.0, "device": "Fake H100", "kernel_trace": trace,
         "arena": {"arena_mb": 950.0, "peak_mb": 930.0, "peak_node": "cross_3",
                   "live_at_peak": [{"name": "x0", "mb": 400.0}, {"name": "x2", "mb": 300.0}],
                   "others": {"count": 3, "mb": 230.0}}}])
    # dhen: the optimized model failed on the GPU, so LoKA's rows time the FP32 model.
    write_json(os.path.join(results, "torch", "dhen.json"),
               {"model": "dhen", "device": "Fake H100", "errors": [], "rows": torch_rows("dhen", 512, {"torch-bf16-graph": 1.0})})
    write_json(os.path.join(results, "loka", "dhen.opt.json"), {"precision": {"fp8_flop_share": 0.9}})
    write_json(os.path.join(results, "loka", "dhen.bench.json"),
               [{"batch": 512, "latency_ms": 0.8, "device": "Fake H100", "kernel_trace": {"error": "CUPTI: nope"},
                 "node_profile": {"error": "node 'x': boom"}}])
    with open(os.path.join(results, "loka", "dhen.plain"), "w") as f:
        f.write("the optimized model failed on the GPU\n")
    # LoKA's outputs and the FP32 predictions on two eval sets (labels 0/1 alternate).
    rng = np.random.default_rng(0)
    fp32 = rng.uniform(0.05, 0.95, size=(8, 1)).astype(np.float32)
    labels = (np.arange(8) % 2).reshape(8, 1).astype(np.float32)
    np.save(os.path.join(results, "torch", "dlrm_dcnv2.fp32.npy"), fp32)
    for k in range(2):
        write_pb(os.path.join(zoo, "dlrm_dcnv2", "eval", f"test_data_set_{k}", "labels.pb"), "labels",
                 labels[4 * k:4 * k + 4])
        write_pb(os.path.join(results, "loka", "dlrm_dcnv2.outputs", f"test_data_set_{k}", "output_0.pb"), "prob",
                 fp32[4 * k:4 * k + 4] * 1.01)
    return results, zoo


class BenchReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(SOURCE, "bench"))
        import bench_report
        cls.report = bench_report
        cls.tmp = tempfile.TemporaryDirectory()
        cls.results, cls.zoo = make_results(cls.tmp.name)
        cls.md_path = os.path.join(cls.tmp.name, "out", "benchmarks.md")
        cls.json_path = os.path.join(cls.tmp.name, "out", "benchmarks.json")
        code = bench_report.main([cls.results, "--zoo", cls.zoo, "--models", ",".join(MODELS), "--batches",
                                  "512,4096", "--md", cls.md_path, "--json", cls.json_path, "--mode", "full"])
        assert code == 0
        with open(cls.json_path) as f:
            cls.rows = json.load(f)
        with open(cls.md_path) as f:
            cls.md = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def row(self, model, batch, impl):
        found = [r for r in self.rows if (r["model"], r["batch"], r["impl"]) == (model, batch, impl)]
        self.assertEqual(len(found), 1, (model, batch, impl))
        return found[0]

    def test_every_row_has_the_contract_keys(self):
        for r in self.rows:
            self.assertTrue(ROW_KEYS <= set(r), sorted(ROW_KEYS - set(r)))

    def test_a_target_met_with_a_bf16_path_unmeasured_says_so(self):
        line = next(l for l in self.md.splitlines() if l.startswith("| dlrm_dcnv2 | 4096 | 0.4050 |"))
        self.assertIn("met against the measured paths only (torch-bf16-eager not measured)", line)

    def test_verdicts(self):
        verdict = self.report.target_verdict
        self.assertEqual(verdict(2.0, 1.6, []), "met")  # every path measured: a plain met
        self.assertEqual(verdict(2.0, 1.6, ["torch-bf16-compile"]),
                         "met against the measured paths only (torch-bf16-compile not measured)")
        # Negative twins: a shortfall stands whatever was skipped; no speed-up, no verdict.
        self.assertEqual(verdict(1.2, 1.6, ["torch-bf16-compile"]), "**short**")
        self.assertEqual(verdict(1.2, 1.6, []), "**short**")
        self.assertEqual(verdict(None, 1.6, []), "—")

    def test_memory_verdicts(self):
        verdict = self.report.memory_verdict
        self.assertEqual(verdict(60.0, 100.0), "60% met")  # the target itself is met
        # Negative twins: above 60% falls short; a missing figure gives no verdict.
        self.assertEqual(verdict(61.0, 100.0), "61% **short**")
        self.assertEqual(verdict(None, 100.0), "—")
        self.assertEqual(verdict(50.0, None), "—")

    def test_drift_verdicts(self):
        verdict = self.report.drift_verdict
        self.assertEqual(verdict(0.0002, 0.0001), "+0.0200% ±0.0100 met")  # the target itself is met
        self.assertEqual(verdict(-0.00001, None), "-0.0010% met")  # no standard error: none shown
        # Negative twins: above the target is over, whatever the noise; no drift, no verdict.
        self.assertEqual(verdict(0.000218, 0.000088), "+0.0218% ±0.0088 **over**")
        self.assertEqual(verdict(None, 0.0001), "—")
        self.assertEqual(verdict(float("nan"), None), "—")

    def test_loka_drift_carries_its_standard_error(self):
        # The synthetic LoKA outputs are the FP32 ones x 1.01 on 8 rows: the per-sample logloss
        # changes, their spread over sqrt(8), relative to the FP32 logloss.
        rng = np.random.default_rng(0)
        fp32 = rng.uniform(0.05, 0.95, size=(8, 1)).astype(np.float64)
        probs = (fp32.astype(np.float32) * np.float32(1.01)).astype(np.float64)
        y = (np.arange(8) % 2).reshape(8, 1)
        fp32 = fp32.astype(np.float32).astype(np.float64)
        loss = lambda p: -(y * np.log(p) + (1 - y) * np.log(1 - p)).ravel()  # noqa: E731
        d = loss(probs) - loss(fp32)
        expected = d.std(ddof=1) / np.sqrt(8) / loss(fp32).mean()
        loka = self.row("dlrm_dcnv2", 512, "loka")
        self.assertAlmostEqual(loka["logloss_drift_se"], expected, places=9)
        self.assertAlmostEqual(loka["logloss_drift_rel"], d.mean() / loss(fp32).mean(), places=9)
        line = next(l for l in self.md.splitlines() if l.startswith("| dlrm_dcnv2 | 512 |"))
        self.assertIn(self.report.drift_verdict(loka["logloss_drift_rel"], loka["logloss_drift_se"]), line)

    def test_summary_compares_memory_with_the_best_bf16_path(self):
        line = next(l for l in self.md.splitlines() if l.startswith("| dlrm_dcnv2 | 4096 | 0.4050 |"))
        best = self.row("dlrm_dcnv2", 4096, self.row("dlrm_dcnv2", 4096, "loka")["best_bf16_impl"])
        loka = self.row("dlrm_dcnv2", 4096, "loka")
        self.assertIn(self.report.memory_verdict(loka["peak_mem_mb"], best["peak_mem_mb"]), line)

    def test_memory_shortfall_splits_each_peak_into_weights_and_serving(self):
        # dlrm_dcnv2 at 4096 meets the speed target (2x) but not memory: its section says why anyway.
        section = self.md.split("### dlrm_dcnv2, batch 4096", 1)[1].split("###", 1)[0]
        self.assertIn("Memory: LoKA 1000 MB = weights 20 + serving the batch 980; torch-bf16-graph 100 MB = "
                      "weights 40 + serving the batch 60. The target (60% of the BF16 path) allows 60 MB: LoKA's "
                      "weights are 0.50× the BF16 path's and what it adds to serve the batch 16.33×.", section)
        self.assertIn("the speed target met", section)
        self.assertNotIn("Top kernels", section)
        # What BF16 storage did, from loka-opt's report.
        self.assertIn("BF16 storage: 1 of 2 chosen activation sets stored, 1 declined by the measured selection, "
                      "3 tables in BF16; not stored: 1 (first: 'x2' is read by Relu 'r').", section)
        self.assertEqual(self.report.storage_text({"fp8_flop_share": 0.5}),
                         "BF16 storage: not measured (pin-precision measured no selection with bf16_storage).")
        self.assertIsNone(self.report.storage_text(None))
        # What the activation arena holds at its peak, from loka_model_bench's arena report.
        self.assertIn("Its activation arena is 950 MB; at its peak (at node `cross_3`) 930 MB are alive at once, "
                      "in MB: `x0` 400, `x2` 300, 3 more 230.", section)
        self.assertEqual(self.report.arena_peak_text({"arena_mb": 10.0, "peak_mb": 9.0,
                                                      "live_at_peak": [{"name": "x", "mb": 9.0}]}),
                         "Its activation arena is 10 MB; at its peak 9 MB are alive at once, in MB: `x` 9.")
        self.assertIsNone(self.report.arena_peak_text({"error": "no CUDA"}))
        self.assertIsNone(self.report.arena_peak_text(None))
        # Without a weights figure the line says so instead of splitting.
        line = self.report.memory_breakdown({"peak_mem_mb": 300.0}, {"impl": "torch-bf16-graph", "peak_mem_mb": 100.0})
        self.assertIn("LoKA 300 MB (no weights figure recorded)", line)
        # Within the target: no line.
        self.assertIsNone(self.report.memory_breakdown({"peak_mem_mb": 50.0, "weights_mem_mb": 10.0},
                                                       {"impl": "torch-bf16-graph", "peak_mem_mb": 100.0}))

    def test_speedup_is_against_the_fastest_bf16_path(self):
        loka = self.row("dlrm_dcnv2", 4096, "loka")
        self.assertAlmostEqual(loka["speedup_vs_best_bf16"], 0.81 / 0.405)
        self.assertEqual(loka["best_bf16_impl"], "torch-bf16-graph")
        self.assertAlmostEqual(self.row("dlrm_dcnv2", 512, "loka")["speedup_vs_best_bf16"], 0.25 / 0.2)
        self.assertAlmostEqual(self.row("dlrm_dcnv2", 4096, "torch-bf16-compile")["speedup_vs_best_bf16"],
                               0.81 / 1.16)

    def test_failed_rows_carry_no_speedup(self):
        failed = self.row("dlrm_dcnv2", 4096, "torch-fp8-naive")
        self.assertIsNone(failed["speedup_vs_best_bf16"])
        self.assertIn("boom", failed["status"])

    def test_loka_rows_carry_fp8_share_and_quality(self):
        loka = self.row("dlrm_dcnv2", 512, "loka")
        self.assertEqual(loka["fp8_flop_share"], 0.75)
        self.assertNotEqual(loka["logloss_drift_rel"], 0.0)
        self.assertEqual(loka["device"], "Fake H100")

    def test_a_failed_stage_leaves_a_loka_row_that_says_why(self):
        for batch in (512, 4096):
            row = self.row("wukong", batch, "loka")
            self.assertIsNone(row["latency_ms"])
            self.assertIn("opt-wukong: TIMEOUT", row["status"])

    def test_fp32_fallback_rows_say_so_and_claim_no_fp8(self):
        row = self.row("dhen", 512, "loka")
        self.assertEqual(row["fp8_flop_share"], 0.0)
        self.assertAlmostEqual(row["speedup_vs_best_bf16"], 1.0 / 0.8)
        self.assertIn("the optimized model failed on the GPU", row["note"])
        self.assertIn("Kernel breakdown: unavailable (CUPTI: nope)", self.md)
        self.assertIn("Node profile: unavailable (node 'x': boom)", self.md)
        self.assertIn("Floor: not available", self.md)

    def test_shortfall_section_names_the_slowest_nodes(self):
        section = self.md.split("### dlrm_dcnv2, batch 512", 1)[1].split("###", 1)[0]
        self.assertIn("Top nodes (node by node without the CUDA graph, 20 runs; the nodes' medians sum to 0.3200 ms)",
                      section)
        self.assertIn("| `node_0` | ai.loka::QuantizedGemm | 0.0200 | 6.2% |", section)
        self.assertIn("| (4 more nodes) | | 0.0200 | |", section)
        self.assertIn("| `odd\\|name\\x0a` | Relu | 0.0200 | 6.2% |", section)  # one cell, one line

    def test_shortfall_section_shows_kernels_and_floors(self):
        self.assertIn("### dlrm_dcnv2, batch 512", self.md)
        # 2.0x meets the speed target: its section (memory is short) has no speed shortfall.
        section = self.md.split("### dlrm_dcnv2, batch 4096", 1)[1].split("###", 1)[0]
        self.assertNotIn("short of 1.6×", section)
        self.assertIn("short of 1.6×", self.md)
        self.assertIn("`kernel_0`", self.md)
        self.assertIn("(3 more kernels)", self.md)
        self.assertIn("Floor at this batch", self.md)
        self.assertIn("### wukong, batch 512", self.md)

    def test_kernel_families(self):
        self.assertEqual(self.report.kernel_family("sm90_xmma_gemm_e4m3bf16_tn"), "GEMM")
        self.assertEqual(self.report.kernel_family("loka::cuda::{anon}::gather_rows_f8"), "embedding")
        self.assertEqual(self.report.kernel_family("loka::cuda::quantize_rows"), "quantize")
        self.assertEqual(self.report.kernel_family("at::native::vectorized_elementwise_kernel"), "elementwise/other")
        self.assertIn("By family: elementwise/other 0.1500 ms", self.md)

    def test_markdown_names_device_and_stages(self):
        self.assertIn("Fake H100", self.md)
        self.assertIn("| opt-wukong | TIMEOUT |", self.md)

    def test_missing_results_folder_is_an_error(self):
        self.assertEqual(self.report.main([os.path.join(self.tmp.name, "nope"), "--zoo", self.zoo, "--models",
                                           "x", "--batches", "1"]), 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--tools")
    args, rest = parser.parse_known_args()
    SOURCE = args.source
    unittest.main(argv=[sys.argv[0]] + rest)
