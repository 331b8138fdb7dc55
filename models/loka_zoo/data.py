"""Synthetic click data with the statistics that matter for FP8: heavy-tailed counts, Zipf ids,
and labels from a planted teacher so that logloss and AUC measure something.

A `ClickWorld` is fixed by (schema, seed): per-feature count distributions, per-table id
popularity, and a teacher (a random but fixed function of the raw features) whose sigmoid is the
true click probability. Batches are drawn from it with any numpy Generator, so training,
calibration and evaluation data are independent draws from the same world.

Why each choice:
  * dense counts are log-normal with up to 30% missing (0), like Criteo's integer features;
    features 0..8 are fed to the model as log1p(count) and 9..12 as count / mean, so the latter
    keep outliers tens of times larger than their typical value, as raw-scaled pipelines do;
  * ids follow a bounded Zipf law (exponent 1.05..1.4 per table) scattered over the table by a
    per-table bijection, so hot rows are not rows 0..k;
  * the teacher mixes dense, per-id, pairwise id-id and dense-id terms; ids' teacher effects are
    hashed from (table, id), so the world needs no memory per row and works for any table size.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .schema import NUM_LOG1P_DENSE, FeatureSchema

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A good 64-bit mix (Steele et al.); arrays of uint64, wrapping arithmetic."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _hashed_normal(ids: np.ndarray, key: int) -> np.ndarray:
    """A standard normal per id, fixed by (id, key): Box-Muller on two 32-bit halves of a hash."""
    with np.errstate(over="ignore"):
        h = _splitmix64(ids.astype(np.uint64) * np.uint64(0x100000001B3) + np.uint64(key & 0xFFFFFFFFFFFF))
    u1 = ((h >> np.uint64(32)).astype(np.float64) + 0.5) / 4294967296.0
    u2 = ((h & np.uint64(0xFFFFFFFF)).astype(np.float64) + 0.5) / 4294967296.0
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


@dataclasses.dataclass
class Batch:
    dense: np.ndarray        # float32 [n, num_dense] (transformed, what the model sees)
    sparse: np.ndarray       # int64 [n, total_hot]
    labels: np.ndarray       # float32 [n, 1], 0/1
    teacher_prob: np.ndarray  # float32 [n, 1], the true click probability


class ClickWorld:
    """The fixed synthetic world; `sample` draws batches from it."""

    TEACHER_VECTOR_DIM = 4
    CACHE_ROWS = 1 << 22  # tables up to this many rows get their teacher effects precomputed

    def __init__(self, schema: FeatureSchema, seed: int, target_ctr: float = 0.25, logit_std: float = 1.6):
        self.schema = schema
        self.seed = seed
        self._effect_cache = {}
        rng = np.random.default_rng([seed, 0x5EED])
        nd, nt = schema.num_dense, schema.num_tables
        # Dense count distributions.
        self.count_mu = rng.uniform(0.0, 3.0, nd)
        self.count_sigma = rng.uniform(0.8, 2.0, nd)
        self.missing = rng.uniform(0.0, 0.3, nd)
        self.raw_scale = np.exp(self.count_mu + self.count_sigma ** 2 / 2)  # the log-normal mean
        # Id popularity: Zipf exponent and a bijection rank -> id per table.
        self.zipf_a = rng.uniform(1.05, 1.4, nt)
        self.scatter_mul, self.scatter_add = [], []
        for rows in schema.table_rows:
            while True:
                a = int(rng.integers(1, max(rows, 2))) | 1
                if math.gcd(a, rows) == 1:
                    break
            self.scatter_mul.append(a)
            self.scatter_add.append(int(rng.integers(0, rows)))
        # Teacher.
        self.w_dense = rng.normal(0.0, 0.5, nd)
        self.alpha = rng.normal(0.0, 0.6, nt)
        npairs = min(12, nt * (nt - 1) // 2)
        pairs = set()
        while len(pairs) < npairs:
            t, u = rng.choice(nt, 2, replace=False)
            pairs.add((int(min(t, u)), int(max(t, u))))
        self.pairs = sorted(pairs)
        self.beta = rng.normal(0.0, 0.5, len(self.pairs))
        self.cross = [(int(rng.integers(nd)), int(rng.integers(nt))) for _ in range(4)]
        self.gamma = rng.normal(0.0, 0.5, len(self.cross))
        self.key_base = int(rng.integers(1 << 40))
        # Calibrate the logit scale and bias on a fixed sample: std `logit_std`, mean CTR `target_ctr`.
        self.scale, self.bias = 1.0, 0.0
        raw = self._raw_logit(*self._draw_features(20000, np.random.default_rng([seed, 0xCA1])))
        self.scale = logit_std / max(float(raw.std()), 1e-6)
        z = raw * self.scale
        lo, hi = -20.0, 20.0
        for _ in range(60):  # bisection on the bias so that mean(sigmoid(z + b)) = target_ctr
            mid = (lo + hi) / 2
            if np.mean(1.0 / (1.0 + np.exp(-(z + mid)))) < target_ctr:
                lo = mid
            else:
                hi = mid
        self.bias = (lo + hi) / 2

    # -- drawing ---------------------------------------------------------------------------
    def _draw_features(self, n: int, rng: np.random.Generator):
        s = self.schema
        counts = np.floor(np.exp(rng.normal(self.count_mu, self.count_sigma, (n, s.num_dense))))
        counts[rng.random((n, s.num_dense)) < self.missing] = 0.0
        ids = np.empty((n, s.total_hot), np.int64)
        offs = s.offsets
        for t, rows in enumerate(s.table_rows):
            a = self.zipf_a[t]
            u = rng.random((n, s.multi_hot[t]))
            # Inverse CDF of the density x^-a on [1, rows + 1), floored: a bounded Zipf law.
            base = ((rows + 1.0) ** (1.0 - a) - 1.0) * u + 1.0
            rank = np.clip(np.floor(base ** (1.0 / (1.0 - a))).astype(np.int64) - 1, 0, rows - 1)
            ids[:, offs[t]:offs[t + 1]] = (rank * self.scatter_mul[t] + self.scatter_add[t]) % rows
        return counts, ids

    def _bag_mean(self, ids: np.ndarray, t: int, channel: int) -> np.ndarray:
        offs = self.schema.offsets
        bag = ids[:, offs[t]:offs[t + 1]]
        key = self.key_base + t * 64 + channel
        rows = self.schema.table_rows[t]
        if rows > self.CACHE_ROWS:  # huge tables: hash on the fly instead of holding a row table
            return _hashed_normal(bag, key).mean(axis=1)
        cache = self._effect_cache.get(key)
        if cache is None:
            cache = self._effect_cache[key] = _hashed_normal(np.arange(rows), key)
        return cache[bag].mean(axis=1)

    def _raw_logit(self, counts: np.ndarray, ids: np.ndarray) -> np.ndarray:
        z_dense = np.tanh((np.log1p(counts) - self.count_mu) / self.count_sigma)
        logit = z_dense @ self.w_dense
        effects = {}
        for t in range(self.schema.num_tables):
            effects[t] = self._bag_mean(ids, t, 0)
            logit = logit + self.alpha[t] * effects[t]
        d = self.TEACHER_VECTOR_DIM
        vecs = {}
        for t in sorted({x for p in self.pairs for x in p}):
            vecs[t] = np.stack([self._bag_mean(ids, t, 1 + c) for c in range(d)], axis=1)
        for (t, u), b in zip(self.pairs, self.beta):
            logit = logit + b * np.sum(vecs[t] * vecs[u], axis=1) / math.sqrt(d)
        for (j, t), g in zip(self.cross, self.gamma):
            logit = logit + g * z_dense[:, j] * effects[t]
        return logit

    def transform_dense(self, counts: np.ndarray) -> np.ndarray:
        out = np.empty_like(counts)
        k = NUM_LOG1P_DENSE
        out[:, :k] = np.log1p(counts[:, :k])
        out[:, k:] = counts[:, k:] / self.raw_scale[k:]
        return out.astype(np.float32)

    def sample(self, n: int, rng: np.random.Generator) -> Batch:
        counts, ids = self._draw_features(n, rng)
        logit = self._raw_logit(counts, ids) * self.scale + self.bias
        prob = 1.0 / (1.0 + np.exp(-logit))
        labels = (rng.random(n) < prob).astype(np.float32)
        return Batch(self.transform_dense(counts), ids, labels[:, None], prob.astype(np.float32)[:, None])

    def describe(self) -> dict:
        return {
            "dense": "log-normal counts (mu U(0,3), sigma U(0.8,2.0)), up to 30% missing as 0; "
                     f"features 0..{NUM_LOG1P_DENSE - 1} log1p, the rest count / log-normal mean",
            "ids": "bounded Zipf per table (exponent U(1.05,1.4)), scattered by a per-table bijection",
            "labels": "Bernoulli(sigmoid(teacher)): dense, per-id, 12 id-id pair and 4 dense-id terms",
            "teacher_logit_std": 1.6,
            "target_ctr": 0.25,
        }
