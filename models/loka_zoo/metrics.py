"""Click-model quality metrics: logloss and ROC AUC (ties get their average rank)."""
from __future__ import annotations

import numpy as np


def logloss(prob: np.ndarray, labels: np.ndarray, eps: float = 1e-7) -> float:
    return float(np.mean(per_sample_logloss(prob, labels, eps)))


def per_sample_logloss(prob: np.ndarray, labels: np.ndarray, eps: float = 1e-7) -> np.ndarray:
    """Each sample's logloss term (logloss is their mean), clipped as logloss clips."""
    p = np.clip(prob.astype(np.float64).ravel(), eps, 1.0 - eps)
    y = labels.astype(np.float64).ravel()
    return -(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def logloss_change_se(prob: np.ndarray, prob_ref: np.ndarray, labels: np.ndarray) -> float:
    """Standard error of the logloss change from `prob_ref` to `prob` on these samples: both are
    scored on the same rows, so the change is the mean of per-sample differences and its noise is
    their spread over sqrt(n). NaN with fewer than two samples."""
    d = per_sample_logloss(prob, labels) - per_sample_logloss(prob_ref, labels)
    if d.size < 2:
        return float("nan")
    return float(d.std(ddof=1) / np.sqrt(d.size))


def auc(prob: np.ndarray, labels: np.ndarray) -> float:
    p = prob.astype(np.float64).ravel()
    y = labels.astype(np.float64).ravel()
    order = np.argsort(p, kind="mergesort")
    sorted_p = p[order]
    ranks = np.empty(len(p), np.float64)
    # Average ranks over runs of equal scores.
    starts = np.flatnonzero(np.r_[True, sorted_p[1:] != sorted_p[:-1]])
    ends = np.r_[starts[1:], len(p)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    npos = y.sum()
    nneg = len(y) - npos
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((ranks[y == 1].sum() - npos * (npos + 1) / 2) / (npos * nneg))


def quality(prob: np.ndarray, labels: np.ndarray) -> dict:
    return {"logloss": logloss(prob, labels), "auc": auc(prob, labels)}


def drift(reference: dict, prob_ref: np.ndarray, other: dict, prob_other: np.ndarray) -> dict:
    """`other` relative to `reference`: logloss change in percent, AUC difference, output moves."""
    diff = np.abs(prob_other.astype(np.float64) - prob_ref.astype(np.float64))
    return {
        **other,
        "logloss_drift_pct": 100.0 * (other["logloss"] - reference["logloss"]) / reference["logloss"],
        "auc_drift": other["auc"] - reference["auc"],
        "mean_abs_prob_diff": float(diff.mean()),
        "max_abs_prob_diff": float(diff.max()),
    }
