// ============================================================================
// tests/fuzz/fuzz_npz.cc — libFuzzer harness: bytes -> read_npz_bytes (.npz data sets).
//
// A .npz is a zip archive of .npy members: two layers of offsets, sizes and a
// textual header, all under the sender's control, plus deflate. Reading must
// refuse every inconsistency with a one-line error and never allocate what the
// archive cannot back. Seeds: small archives from tests/fuzz/make_npz_seeds.py.
// ============================================================================
#include "loka/test_data.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto arrays = loka::read_npz_bytes(loka::fuzz::as_bytes(data, size), "<fuzz>");
  if (!arrays) loka::fuzz::check_refusal(arrays.status(), /*one_line=*/true);
  return 0;
}
