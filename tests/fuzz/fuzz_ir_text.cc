// ============================================================================
// tests/fuzz/fuzz_ir_text.cc — libFuzzer harness: text -> ir::parse_graph, and back.
//
// Golden tests and --print-ir-after files are parsed by hand-written code that
// must answer any text with a Status naming the line. The textual IR also
// promises to round-trip: whatever parses prints to text that parses again.
// Seeds: tests/data/**/*.ir (scripts/fuzz.sh).
// ============================================================================
#include <string_view>

#include "passes/ir/text_format.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = loka::ir::parse_graph(text);
  if (!graph) {
    loka::fuzz::check_refusal(graph.status(), /*one_line=*/false);
    return 0;
  }
  const std::string printed = loka::ir::print_graph(**graph);
  auto again = loka::ir::parse_graph(printed);
  if (!again) loka::fuzz::fail("printed IR does not parse again", again.status().message());
  return 0;
}
