// ============================================================================
// runtime/op_kernel.h — the interface every executable op implements.
//
// A kernel is created once per node when the plan is built (parsing and
// validating attributes then, so bad models fail at load time, not mid-run)
// and run many times, possibly from several Sessions at once: `run` must not
// mutate the kernel. Kernels allocate outputs through the KernelContext, which
// draws on the calling Session's buffer pool.
// ============================================================================
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "runtime/attributes.h"

namespace loka {

class BufferPool;

/// Per-run services for a kernel.
class KernelContext {
 public:
  explicit KernelContext(BufferPool* pool) : pool_(pool) {}
  /// An uninitialized tensor of `shape` (validated: negative dims or overflow are an error).
  Result<Tensor> allocate(DType dtype, const Shape& shape);
  /// As allocate, zero-filled.
  Result<Tensor> allocate_zeros(DType dtype, const Shape& shape);

 private:
  BufferPool* pool_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  /// Computes `outputs` (pre-sized to the node's output count, all undefined) from
  /// `inputs` (an omitted optional input is an undefined Tensor).
  virtual Status run(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                     KernelContext& context) const = 0;
};

/// What a kernel factory is told about its node.
struct KernelInit {
  std::string_view node_name;
  std::string_view op_type;
  std::string_view domain;
  int opset = 0;                 ///< opset version of the node's domain
  size_t input_count = 0;        ///< including omitted (empty-named) optional inputs
  size_t output_count = 0;
  const Attributes& attributes;
};

using KernelFactory = std::function<Result<std::unique_ptr<OpKernel>>(const KernelInit&)>;

/// Maps (domain, op_type, opset range) to a factory. Populated once by
/// `register_all_ops` (runtime/ops/register_all.cc) and read-only afterwards.
class OpRegistry {
 public:
  /// The process-wide registry with every built-in op.
  static const OpRegistry& builtin();

  /// Registers `factory` for opsets [min_opset, max_opset] of `domain` ("" is ai.onnx).
  void add(std::string domain, std::string op_type, int min_opset, int max_opset, KernelFactory factory);
  /// The factory for a node, or an error naming the op, domain and opset.
  Result<KernelFactory> find(std::string_view domain, std::string_view op_type, int opset) const;
  /// Every registered (domain, op_type), sorted, for --help style listings.
  std::vector<std::string> op_names() const;

 private:
  struct Entry {
    std::string domain;
    std::string op_type;
    int min_opset;
    int max_opset;
    KernelFactory factory;
  };
  std::vector<Entry> entries_;
};

/// Convenience for kernels whose whole behaviour is a function.
template <typename Fn>
class FunctionKernel final : public OpKernel {
 public:
  explicit FunctionKernel(Fn fn) : fn_(std::move(fn)) {}
  Status run(std::span<const Tensor> inputs, std::span<Tensor> outputs,
             KernelContext& context) const override {
    return fn_(inputs, outputs, context);
  }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<OpKernel> make_function_kernel(Fn fn) {
  return std::make_unique<FunctionKernel<Fn>>(std::move(fn));
}

/// Registers an ai.onnx op without attributes whose kernel is the function `fn`.
template <typename Fn>
void add_stateless_op(OpRegistry& registry, const char* op_type, int min_opset, int max_opset, Fn fn) {
  registry.add("", op_type, min_opset, max_opset,
               [fn](const KernelInit&) -> Result<std::unique_ptr<OpKernel>> { return make_function_kernel(fn); });
}

}  // namespace loka
