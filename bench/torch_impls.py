"""The PyTorch baselines LoKA is measured against, built from one trained FP32 model.

Each implementation is a callable `run()` over fixed device inputs (so a CUDA graph can capture
it) plus a `predict(dense, sparse)` used for quality on the held-out data:

  torch-fp32-eager     the model as trained
  torch-bf16-eager     `model.to(torch.bfloat16)`, inputs in bf16: what a PyTorch user gets first
  torch-bf16-graph     the same, captured once per batch in a CUDA graph (no launch overhead)
  torch-bf16-compile   the same through `torch.compile` (Inductor, default mode, static shapes)
  torch-fp8-naive      the bf16 model with every eligible nn.Linear as `torch._scaled_mm` on FP8
                       E4M3: activations quantised per row with a dynamic scale (amax / 448),
                       weights once per output channel; bias added after (rowwise-scaled
                       `_scaled_mm` takes none); run in a CUDA graph, so what is left is the
                       quantisation and FP8 GEMM cost, not launches (eager off the GPU, where
                       CPU `_scaled_mm` lets the dry run check the path). Linears whose K or N is not
                       a multiple of 16 (FP8 GEMM's rule) stay bf16.

BF16 quality is computed with the eager model: the graph runs the same kernels, and Inductor's
fusions move results by rounding only (the report says so next to the figure).
"""
from __future__ import annotations

import copy
import types
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

E4M3_MAX = 448.0
FP8_ALIGN = 16

BF16_IMPLS = ("torch-bf16-eager", "torch-bf16-graph", "torch-bf16-compile")
ALL_IMPLS = ("torch-fp32-eager", "torch-bf16-eager", "torch-bf16-graph", "torch-fp8-naive", "torch-bf16-compile")
# Compiling is the slow step (Inductor: 8-21 s a batch on an H100, 2026-11-27, where every other
# path took under 5 s for all three batches): these are measured after every other path at every
# batch, so a time budget cuts compiled rows first.
SLOW_IMPLS = ("torch-bf16-compile",)
# Which eager model gives each implementation's quality figures.
QUALITY_OF = {"torch-fp32-eager": "fp32", "torch-bf16-eager": "bf16", "torch-bf16-graph": "bf16",
              "torch-bf16-compile": "bf16", "torch-fp8-naive": "fp8"}


@dataclass
class Impl:
    """One implementation at one batch: `run` does a forward on the bound inputs."""
    run: Callable[[], torch.Tensor]
    note: str = ""


def needs_cuda(name: str) -> Optional[str]:
    """Why `name` cannot run without a GPU (None when it can)."""
    if name == "torch-bf16-graph":
        return "needs CUDA (CUDA graph)"
    if name == "torch-bf16-compile":
        return "skipped off the GPU (Inductor's CPU build is slow and not what is benchmarked)"
    return None


def bf16_copy(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).to(torch.bfloat16).eval()


def _fp8_eligible(layer: nn.Linear) -> bool:
    return layer.in_features % FP8_ALIGN == 0 and layer.out_features % FP8_ALIGN == 0


def _fp8_linear_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).float()
    scale = (x2.abs().amax(dim=1, keepdim=True) / E4M3_MAX).clamp(min=1e-12)
    q = (x2 / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    y = torch._scaled_mm(q, self.fp8_weight.t(), scale_a=scale, scale_b=self.fp8_scale,
                         out_dtype=torch.bfloat16)
    if self.bias is not None:
        y = y + self.bias
    return y.reshape(*lead, y.shape[-1])


def fp8_naive_copy(model: nn.Module) -> tuple[nn.Module, int, int]:
    """A bf16 copy whose eligible Linears run FP8 `_scaled_mm`; returns (model, fp8, kept bf16)."""
    m = bf16_copy(model)
    fp8 = kept = 0
    for layer in m.modules():
        if not isinstance(layer, nn.Linear):
            continue
        if not _fp8_eligible(layer):
            kept += 1
            continue
        w = layer.weight.detach().float()
        w_scale = (w.abs().amax(dim=1, keepdim=True) / E4M3_MAX).clamp(min=1e-12)  # per output channel
        layer.fp8_weight = (w / w_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).contiguous()
        layer.fp8_scale = w_scale.reshape(1, -1).contiguous()
        layer.forward = types.MethodType(_fp8_linear_forward, layer)
        fp8 += 1
    return m, fp8, kept


def cuda_graph(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """Captures `fn` (after warm-up on a side stream, as PyTorch requires) and returns a replayer."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out
    replay.graph = graph  # keep the graph (and its memory pool) alive with the callable
    return replay


def build(name: str, models: dict, dense: torch.Tensor, sparse: torch.Tensor) -> Impl:
    """`models` holds the eager models by precision ("fp32", "bf16", "fp8") on the target device."""
    if name == "torch-fp32-eager":
        m = models["fp32"]
        return Impl(lambda: m(dense, sparse))
    dense_bf16 = dense.to(torch.bfloat16)
    if name == "torch-bf16-eager":
        m = models["bf16"]
        return Impl(lambda: m(dense_bf16, sparse))
    if name == "torch-bf16-graph":
        m = models["bf16"]
        return Impl(cuda_graph(lambda: m(dense_bf16, sparse)))
    if name == "torch-bf16-compile":
        compiled = torch.compile(models["bf16"], dynamic=False)
        return Impl(lambda: compiled(dense_bf16, sparse), note="Inductor default mode, static shapes")
    if name == "torch-fp8-naive":
        m = models["fp8"]
        if dense.is_cuda:
            return Impl(cuda_graph(lambda: m(dense_bf16, sparse)), note=models.get("fp8_note", ""))
        return Impl(lambda: m(dense_bf16, sparse), note=models.get("fp8_note", "") + "; eager (no GPU)")
    raise ValueError(f"unknown implementation {name!r}")


def predict_fn(precision: str, models: dict) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    m = models[precision]
    if precision == "fp32":
        return lambda d, s: m(d, s)
    return lambda d, s: m(d.to(torch.bfloat16), s)


def fp8_reference_check(device: str) -> Optional[str]:
    """Why `_scaled_mm` with rowwise scales cannot run here (None when a small case works)."""
    try:
        a = torch.randn(32, 32, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(32, 32, device=device).to(torch.float8_e4m3fn)
        torch._scaled_mm(a, b.t(), scale_a=torch.ones(32, 1, device=device),
                         scale_b=torch.ones(1, 32, device=device), out_dtype=torch.bfloat16)
        return None
    except Exception as e:  # noqa: BLE001 - the reason is reported, not hidden
        return f"torch._scaled_mm rowwise unavailable on {device}: {str(e).splitlines()[0][:160]}"


def linear_weight_bytes(model: nn.Module) -> int:
    """FP8 bytes (one per element) of the parameters outside the embedding tables: what an FP8
    engine reads once per batch."""
    emb = {id(p) for p in model.embeddings.parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in emb)


def weight_bytes(model: nn.Module) -> int:
    """Device bytes of a model's parameters, buffers and FP8 weight copies."""
    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [m.fp8_weight for m in model.modules() if hasattr(m, "fp8_weight")]
    return sum(t.numel() * t.element_size() for t in tensors)


def gemm_flops(model: nn.Module, dense: torch.Tensor, sparse: torch.Tensor) -> float:
    """Matrix-multiply FLOPs of one forward (PyTorch's FLOP counter: mm, bmm, addmm, linear)."""
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(dense, sparse)
    return float(counter.get_total_flops())

