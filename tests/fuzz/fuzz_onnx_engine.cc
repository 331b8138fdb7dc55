// ============================================================================
// tests/fuzz/fuzz_onnx_engine.cc — libFuzzer harness: bytes -> Engine::load_bytes (CPU).
//
// Serving processes load models handed to them; the runtime parses the
// ModelProto, decodes every initializer and builds the execution plan, and
// must refuse a malformed or hostile model with a one-line error. External
// data is refused here (no model folder), so the harness touches no files.
// Seeds: models/zoo/*/model.onnx and small conformance models (scripts/fuzz.sh).
// ============================================================================
#include "loka/engine.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto engine = loka::Engine::load_bytes(loka::fuzz::as_bytes(data, size));
  if (!engine) {
    loka::fuzz::check_refusal(engine.status(), /*one_line=*/true);
    return 0;
  }
  // A loaded engine must describe itself consistently.
  (void)(*engine)->node_count();
  (void)(*engine)->inputs();
  (void)(*engine)->outputs();
  return 0;
}
