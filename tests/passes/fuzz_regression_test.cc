// ============================================================================
// tests/passes/fuzz_regression_test.cc — inputs the fuzzers (tests/fuzz) found
// crashing the compiler's parsers, kept byte for byte: each must now give a
// clean error. A new crash found by scripts/fuzz.sh gets its test here.
// ============================================================================
#include <gtest/gtest.h>

#include <string>

#include "passes/ir/text_format.h"

namespace loka::ir {
namespace {

// fuzz_ir_text: `init %b : f32[688888888888c8888] = [...]` asked Tensor::zeros for 2.7 TB
// before reading a single value (ASan: allocation-size-too-big). 300 bytes, NULs included.
TEST(FuzzRegression, IrTextConstantLargerThanTheTextIsRefused) {
  const std::string text(
      " #qqd interop nane\x00""\x00""\x00""\x00""-> QantizedGemm(tensor, gelu), opset 20.\n"
      "graph \"embedding\" {\n"
      "  opset \"\" 20\n"
      "  opset \"ai.lo\" 1\n"
      "  input %ids : i64[batch,2]\n"
      "  input %dense : f32[bat2312]\n"
      "  init %b : f32[688888888888c8888] = [0194, -0.0978934169, 0.134889588,\xff""\x01"" -0.03463021\n"
      "  %f = ai.loka.c output %y\n"
      "  output %f\n"
      "}\n",
      300);
  auto graph = parse_graph(text);
  ASSERT_FALSE(graph.is_ok());
  EXPECT_NE(graph.status().message().find("longer than the rest of the text"), std::string::npos)
      << graph.status().message();
}

}  // namespace
}  // namespace loka::ir
