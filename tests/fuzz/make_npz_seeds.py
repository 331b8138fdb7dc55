#!/usr/bin/env python3
# tests/fuzz/make_npz_seeds.py — writes a handful of small .npz archives into a folder,
# the seed corpus of fuzz_npz (scripts/fuzz.sh). Generated at run time rather than
# committed: one stored and one deflated archive per layout read_npz_bytes handles
# (several dtypes, rank 0..3, empty arrays, Fortran order, big-endian, .npy v2 headers).
import io
import os
import sys
import zipfile

import numpy as np


def npy_v2(array):
    """The .npy bytes of `array` with a version 2.0 header (4-byte header length)."""
    out = io.BytesIO()
    np.lib.format.write_array(out, array, version=(2, 0))
    return out.getvalue()


def main(folder):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {
        "dense": rng.standard_normal((4, 3)).astype(np.float32),
        "ids": rng.integers(0, 100, (4, 2), dtype=np.int64),
        "mask": np.array([True, False, True]),
        "half": np.arange(6, dtype=np.float16).reshape(2, 3),
        "scalar": np.float64(2.5),
        "empty": np.zeros((0, 5), np.int32),
        "cube": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    }
    np.savez(os.path.join(folder, "stored.npz"), **arrays)
    np.savez_compressed(os.path.join(folder, "deflated.npz"), **arrays)
    np.savez(os.path.join(folder, "one.npz"), input_0=np.ones((2, 2), np.float32))
    np.savez(os.path.join(folder, "fortran.npz"), f=np.asfortranarray(np.ones((2, 3), np.float32)))
    np.savez(os.path.join(folder, "big_endian.npz"), b=np.arange(4, dtype=">i4"))
    with zipfile.ZipFile(os.path.join(folder, "v2_header.npz"), "w") as archive:
        archive.writestr("x.npy", npy_v2(np.arange(5, dtype=np.int16)))


if __name__ == "__main__":
    main(sys.argv[1])
