// ============================================================================
// tests/fuzz/fuzz_tensor_proto.cc — libFuzzer harness: bytes -> a TensorProto `.pb` data file.
//
// Data directories (input_<i>.pb, output_<i>.pb, labels.pb) come from users and
// other tools; decoding checks dims, data type and every data field against
// each other and must refuse a mismatch with a one-line error. External data
// is refused here (no folder), so the harness touches no files.
// Seeds: the zoo's calib/eval .pb files (scripts/fuzz.sh).
// ============================================================================
#include "runtime/tensor_proto.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensor = loka::parse_tensor_bytes(loka::fuzz::as_bytes(data, size), "<fuzz>");
  if (!tensor) loka::fuzz::check_refusal(tensor.status(), /*one_line=*/true);
  return 0;
}
