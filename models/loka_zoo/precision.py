"""Reduced-precision evaluation in PyTorch: the BF16 and naive all-FP8 baselines LoKA must beat.

  * BF16: the whole model (weights, embeddings, activations) in bfloat16, probabilities read back
    in FP32 — what a PyTorch user gets from `model.to(torch.bfloat16)`.
  * naive FP8: every nn.Linear quantises its input and its weight to FP8 E4M3 with one dynamic
    per-tensor scale (amax / 448, round to nearest even, saturating), then multiplies in FP32
    (what an FP8 GEMM with FP32 accumulation computes); everything else stays FP32. This is the
    "FP8 everywhere" recipe the architecture notes measure 10-40x more logloss drift for.
"""
from __future__ import annotations

import contextlib
import copy
import types

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

E4M3_MAX = 448.0


def fake_e4m3(t: torch.Tensor) -> torch.Tensor:
    """Quantise-dequantise through FP8 E4M3 with a per-tensor scale from the tensor's amax."""
    x = t.float()
    amax = x.detach().abs().amax()
    scale = torch.where(amax > 0, E4M3_MAX / amax, torch.ones_like(amax))
    q = (x * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return (q.float() / scale).to(t.dtype)


def _fp8_linear(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(fake_e4m3(x), fake_e4m3(self.weight), self.bias)


@contextlib.contextmanager
def naive_fp8(model: nn.Module):
    """Within the block every nn.Linear of `model` runs the naive FP8 recipe."""
    patched = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for m in patched:
        m.forward = types.MethodType(_fp8_linear, m)
    try:
        yield len(patched)
    finally:
        for m in patched:
            del m.forward


@torch.no_grad()
def predict(model: nn.Module, dense: np.ndarray, sparse: np.ndarray, device: str, chunk: int = 4096,
            dtype: torch.dtype = torch.float32) -> np.ndarray:
    out = []
    for s in range(0, len(dense), chunk):
        d = torch.from_numpy(dense[s:s + chunk]).to(device=device, dtype=dtype)
        i = torch.from_numpy(sparse[s:s + chunk]).to(device)
        out.append(model(d, i).float().cpu().numpy())
    return np.concatenate(out)


def predict_bf16(model: nn.Module, dense: np.ndarray, sparse: np.ndarray, device: str) -> np.ndarray:
    return predict(copy.deepcopy(model).to(torch.bfloat16), dense, sparse, device, dtype=torch.bfloat16)


def predict_naive_fp8(model: nn.Module, dense: np.ndarray, sparse: np.ndarray, device: str) -> np.ndarray:
    with naive_fp8(model):
        return predict(model, dense, sparse, device)
