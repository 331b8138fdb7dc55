"""Writing data folders in the ONNX model-zoo layout LoKA's tools read:
    <dir>/test_data_set_<k>/input_<i>.pb   TensorProto named after graph input i
                            output_<i>.pb  TensorProto named after graph output i (optional)
                            labels.pb      float32 [batch, 1] 0/1 labels (optional)
"""
from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple

import numpy as np
from onnx import numpy_helper


def write_tensor(path: str, name: str, array: np.ndarray) -> None:
    proto = numpy_helper.from_array(np.ascontiguousarray(array), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def write_data_set(folder: str, inputs: Sequence[Tuple[str, np.ndarray]],
                   outputs: Sequence[Tuple[str, np.ndarray]] = (), labels: Optional[np.ndarray] = None) -> None:
    os.makedirs(folder, exist_ok=True)
    for i, (name, array) in enumerate(inputs):
        write_tensor(os.path.join(folder, f"input_{i}.pb"), name, array)
    for i, (name, array) in enumerate(outputs):
        write_tensor(os.path.join(folder, f"output_{i}.pb"), name, array)
    if labels is not None:
        write_tensor(os.path.join(folder, "labels.pb"), "labels", labels.astype(np.float32))


def folder_bytes(folder: str) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total

