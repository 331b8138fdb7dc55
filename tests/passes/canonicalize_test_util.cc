// ============================================================================
// tests/passes/canonicalize_test_util.cc — helpers of the canonicalization tests.
// ============================================================================
#include "canonicalize_test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "loka/engine.h"
#include "loka/session.h"
#include "passes/ir/shape_inference.h"
#include "passes/ir/text_format.h"
#include "passes/ir/verifier.h"
#include "passes/onnx/onnx_export.h"
#include "test_support.h"

namespace loka::testing {

Result<PassRun> run_pass(const PassInfo& info, Pass& pass, ir::Graph& graph,
                         const std::map<std::string, std::string>& options) {
  std::map<std::string, std::string> resolved;
  for (const PassOption& option : info.options) resolved[option.name] = option.default_value;
  for (const auto& [name, value] : options) resolved[name] = value;
  static const CompileSettings settings;
  PassContext context(settings, resolved);
  LOKA_ASSIGN_OR_RETURN(const bool changed, pass.run(graph, context));
  return PassRun{changed, context.statistics()};
}

Result<Rewrite> apply_pass(const std::string& text, const PassInfo& info, std::unique_ptr<Pass> pass,
                           const std::map<std::string, std::string>& options) {
  Rewrite rewrite;
  LOKA_ASSIGN_OR_RETURN(rewrite.before, ir::parse_graph(text));
  LOKA_RETURN_IF_ERROR(ir::infer_shapes(*rewrite.before));
  rewrite.after = rewrite.before->clone();
  LOKA_ASSIGN_OR_RETURN(rewrite.run, run_pass(info, *pass, *rewrite.after, options));
  LOKA_RETURN_IF_ERROR(ir::verify_graph(*rewrite.after).with_context("after " + info.name + ": "));
  rewrite.printed = ir::print_graph(*rewrite.after);
  return rewrite;
}

std::string check_lines(const std::string& text, const std::string& checks) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::vector<std::string> pending_not;
  size_t next = 0;  // first line a CHECK may match
  const auto absent_between = [&](size_t from, size_t to) -> std::string {
    for (const std::string& s : pending_not)
      for (size_t i = from; i < to && i < lines.size(); ++i)
        if (lines[i].find(s) != std::string::npos) return "CHECK-NOT: '" + s + "' found on line: " + lines[i];
    pending_not.clear();
    return "";
  };
  std::istringstream spec(checks);
  for (std::string check; std::getline(spec, check);) {
    const size_t start = check.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    check = check.substr(start);
    const auto take = [&](const std::string& prefix) -> std::optional<std::string> {
      if (check.rfind(prefix, 0) != 0) return std::nullopt;
      return check.substr(prefix.size());
    };
    if (auto s = take("CHECK-NOT: ")) {
      pending_not.push_back(*s);
    } else if (auto s = take("CHECK-NEXT: ")) {
      if (next >= lines.size() || lines[next].find(*s) == std::string::npos)
        return "CHECK-NEXT: '" + *s + "' not on line " + std::to_string(next + 1) + " of:\n" + text;
      ++next;
    } else if (auto s = take("CHECK: ")) {
      size_t found = next;
      while (found < lines.size() && lines[found].find(*s) == std::string::npos) ++found;
      if (found == lines.size()) return "CHECK: '" + *s + "' not found (after line " + std::to_string(next) + ") in:\n" + text;
      if (std::string error = absent_between(next, found); !error.empty()) return error + "\nin:\n" + text;
      next = found + 1;
    } else {
      return "bad check line: " + check;
    }
  }
  if (std::string error = absent_between(next, lines.size()); !error.empty()) return error + "\nin:\n" + text;
  return "";
}

Rewrite apply_pass_or_fail(const std::string& text, const PassInfo& info, std::unique_ptr<Pass> pass,
                           const std::map<std::string, std::string>& options) {
  auto rewrite = apply_pass(text, info, std::move(pass), options);
  if (!rewrite) {
    ADD_FAILURE() << info.name << ": " << rewrite.status().message();
    return Rewrite{};
  }
  return std::move(rewrite).value();
}

void expect_outputs_within(const Rewrite& rewrite, float tolerance, const std::vector<int64_t>& batches, unsigned seed) {
  ASSERT_TRUE(rewrite.before && rewrite.after);
  for (int64_t batch : batches) {
    auto diff = max_output_difference(*rewrite.before, *rewrite.after, batch, seed);
    ASSERT_TRUE(diff) << diff.status().message();
    EXPECT_LE(*diff, tolerance) << "batch " << batch;
  }
}

namespace {

Result<std::shared_ptr<const Engine>> load(const ir::Graph& graph) {
  LOKA_ASSIGN_OR_RETURN(const std::string bytes, onnx_io::export_model_bytes(graph));
  return Engine::load_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

}  // namespace

Result<float> max_output_difference(const ir::Graph& before, const ir::Graph& after, int64_t batch, unsigned seed) {
  LOKA_ASSIGN_OR_RETURN(auto a, load(before));
  LOKA_ASSIGN_OR_RETURN(auto b, load(after));
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const TensorInfo& info : a->inputs()) {
    Shape shape = info.shape;
    for (int64_t& d : shape)
      if (d < 0) d = batch;
    inputs.push_back(random_tensor(rng, shape));
  }
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> ya, a->new_session()->run(inputs));
  LOKA_ASSIGN_OR_RETURN(const std::vector<Tensor> yb, b->new_session()->run(inputs));
  if (ya.size() != yb.size()) return Status::error("output counts differ");
  float worst = 0;
  for (size_t i = 0; i < ya.size(); ++i) {
    if (ya[i].shape() != yb[i].shape())
      return Status::error("output " + std::to_string(i) + " shapes differ: " + shape_to_string(ya[i].shape()) + " vs " +
                           shape_to_string(yb[i].shape()));
    worst = std::max(worst, max_abs_difference(ya[i], yb[i]));
  }
  return worst;
}

}  // namespace loka::testing
