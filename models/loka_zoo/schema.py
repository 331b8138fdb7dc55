"""Feature schema: how many dense features, which embedding tables, how many ids per bag.

Every zoo model reads the same two inputs, so data files and tools need one convention:
  dense  float32 [batch, num_dense]   transformed count features
  sparse int     [batch, total_hot]   the bags of all tables side by side: table t owns columns
                                      offsets[t] .. offsets[t+1] (fixed multi-hot, as MLPerf's
                                      synthetic multi-hot Criteo)
The id dtype is per model (int64, or int32 where int64 would make the committed data too big).
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional

# MLPerf DLRMv2 (Criteo 1TB multi-hot) table sizes, capped at 40M rows as MLPerf does.
MLPERF_TABLE_ROWS = [
    40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10,
    2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36,
]
# MLPerf DLRMv2 multi-hot sizes per table (sum 214).
MLPERF_MULTI_HOT = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
NUM_DENSE = 13
# Dense features 0..8 are log1p-transformed counts (as the DLRM reference pipeline does); 9..12
# are counts divided by a fixed normaliser, as pipelines that "just scale" do, so their tails stay
# heavy (the values FP8's per-tensor amax scaling has to live with).
NUM_LOG1P_DENSE = 9


@dataclasses.dataclass(frozen=True)
class FeatureSchema:
    num_dense: int
    table_rows: List[int]
    multi_hot: List[int]
    id_dtype: str  # "int32" or "int64"

    @property
    def num_tables(self) -> int:
        return len(self.table_rows)

    @property
    def total_hot(self) -> int:
        return sum(self.multi_hot)

    @property
    def offsets(self) -> List[int]:
        out = [0]
        for h in self.multi_hot:
            out.append(out[-1] + h)
        return out

    def to_json(self) -> dict:
        return {
            "num_dense": self.num_dense,
            "num_log1p_dense": NUM_LOG1P_DENSE,
            "num_tables": self.num_tables,
            "table_rows": list(self.table_rows),
            "multi_hot": list(self.multi_hot),
            "total_hot": self.total_hot,
            "id_dtype": self.id_dtype,
        }


def criteo_schema(row_cap: int, hot_cap: Optional[int], id_dtype: str) -> FeatureSchema:
    """13 dense + 26 tables shaped like MLPerf's: rows min(MLPerf rows, row_cap), bags of
    MLPerf's multi-hot sizes (or at most `hot_cap` ids per bag)."""
    rows = [min(r, row_cap) for r in MLPERF_TABLE_ROWS]
    hots = [h if hot_cap is None else min(h, hot_cap) for h in MLPERF_MULTI_HOT]
    return FeatureSchema(NUM_DENSE, rows, hots, id_dtype)
