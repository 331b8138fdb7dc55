"""A short training run on fresh synthetic batches, so that weights, embedding rows and
activations have the magnitudes and outliers of a trained model rather than of initialisation."""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .data import ClickWorld
from .registry import TrainPlan


def train(model: nn.Module, world: ClickWorld, plan: TrainPlan, rng: np.random.Generator, device: str,
          log_every: int = 0) -> dict:
    """Adam on BCE-with-logits, one fresh batch per step, cosine-decayed learning rate."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=plan.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(plan.steps, 1), eta_min=plan.lr * 0.1)
    recent = []
    start = time.time()
    for step in range(plan.steps):
        batch = world.sample(plan.batch_size, rng)
        dense = torch.from_numpy(batch.dense).to(device)
        sparse = torch.from_numpy(batch.sparse).to(device)
        labels = torch.from_numpy(batch.labels).to(device)
        loss = F.binary_cross_entropy_with_logits(model.logit(dense, sparse), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        recent.append(float(loss.detach()))
        recent = recent[-50:]
        if log_every and (step + 1) % log_every == 0:
            print(f"    step {step + 1}/{plan.steps} train logloss {np.mean(recent):.4f}", flush=True)
    model.eval()
    return {
        "steps": plan.steps,
        "batch_size": plan.batch_size,
        "optimizer": "Adam, cosine decay to 0.1x",
        "lr": plan.lr,
        "final_train_logloss": float(np.mean(recent)) if recent else None,
        "seconds": round(time.time() - start, 2),
    }
