#!/usr/bin/env python3
"""onnxruntime loads and runs every zoo model after LoKA's import -> export round trip.

For each model under models/zoo (and exports/), `loka-opt --pipeline infer-shapes` writes the
exported model; onnxruntime must load it, and its outputs on the first eval data set must match
the reference output_0.pb within 1e-5. Run by ctest; prints one line per model.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

from loka_cli import load_pb


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, type=pathlib.Path)
    parser.add_argument("--tools", required=True, type=pathlib.Path)
    args = parser.parse_args()
    zoo = args.source / "models" / "zoo"
    models = sorted(p.parent for p in zoo.glob("*/model.onnx")) + sorted(p.parent for p in zoo.glob("exports/*/model.onnx"))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model_dir in models:
            name = model_dir.relative_to(zoo)
            exported = pathlib.Path(tmp) / (str(name).replace("/", "_") + ".onnx")
            run = subprocess.run([str(args.tools / "loka-opt"), str(model_dir / "model.onnx"), "-o", str(exported),
                                  "--pipeline", "infer-shapes", "--quiet"], capture_output=True, text=True)
            if run.returncode != 0:
                print(f"FAIL {name}: loka-opt: {run.stderr.strip()}")
                failures += 1
                continue
            onnx.checker.check_model(str(exported))
            session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
            data = sorted((model_dir / "eval").glob("test_data_set_*"))[0]
            feeds = dict(load_pb(p) for p in sorted(data.glob("input_*.pb")))
            expected = load_pb(data / "output_0.pb")[1]
            got = session.run(None, feeds)[0]
            worst = float(np.max(np.abs(got - expected)))
            status = "ok" if worst <= 1e-5 else "FAIL"
            failures += status != "ok"
            print(f"{status} {name}: onnxruntime {ort.__version__} on LoKA's export, max abs {worst:.2e}")
    print(f"ort_interop: {len(models) - failures} of {len(models)} exported models match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
