// ============================================================================
// tests/fuzz/fuzz_onnx_import.cc — libFuzzer harness: bytes -> the compiler's ONNX import.
//
// loka-opt imports the user's model into the IR and infers shapes before any
// pass runs, so both see whatever the file holds: ops with missing attributes,
// wrong arities, absurd dims. Both must answer with a Status, never crash.
// Seeds: models/zoo/*/model.onnx and small conformance models (scripts/fuzz.sh).
// ============================================================================
#include <onnx/onnx_pb.h>

#include "passes/ir/shape_inference.h"
#include "passes/onnx/onnx_import.h"
#include "runtime/execution_plan.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = loka::parse_model_bytes(loka::fuzz::as_bytes(data, size), "<fuzz>");
  if (!model) return 0;  // the same parser the engine harness covers
  auto graph = loka::onnx_io::import_model(**model, /*external_data_dir=*/{}, "<fuzz>");
  if (!graph) {
    loka::fuzz::check_refusal(graph.status(), /*one_line=*/false);
    return 0;
  }
  const loka::Status inferred = loka::ir::infer_shapes(**graph);
  if (!inferred) loka::fuzz::check_refusal(inferred, /*one_line=*/false);
  return 0;
}
