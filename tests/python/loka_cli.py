"""Helpers the Python tests share: reading tensor files, running loka-opt and loka-run."""
import pathlib
import subprocess

import onnx
import onnx.numpy_helper


def load_pb(path: pathlib.Path):
    """(name, array) of a TensorProto file."""
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return tensor.name, onnx.numpy_helper.to_array(tensor)


def loka_opt(tools: pathlib.Path, model, output, *options):
    """Runs loka-opt MODEL -o OUTPUT OPTIONS --quiet; a failure raises with its message."""
    run = subprocess.run([str(tools / "loka-opt"), str(model), "-o", str(output), *options, "--quiet"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"loka-opt {' '.join(options)}: {run.stderr.strip()}")


def loka_run(tools: pathlib.Path, model: pathlib.Path, inputs, outputs: pathlib.Path):
    """LoKA's outputs on the data set in `inputs`, by output name, also written under `outputs`."""
    run = subprocess.run([str(tools / "loka-run"), str(model), "--inputs", str(inputs), "--outputs", str(outputs)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"loka-run {model.name}: {run.stderr.strip()}")
    return dict(load_pb(p) for p in sorted(outputs.rglob("output_*.pb")))
