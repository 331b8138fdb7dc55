// ============================================================================
// passes/ir/shape_inference.cc — the driver: registry, per-node context, type
// merging, the graph walk and the producer tracing used by infer_node_types.
// The per-op rules live in shape_inference_<family>.cc.
// ============================================================================
#include "passes/ir/shape_inference.h"

#include <map>

#include "passes/ir/graph_algorithms.h"
#include "passes/ir/shape_inference_helpers.h"

namespace loka::ir {

using inference::describe;
using inference::tracked_from_tensor;

// ---------------------------------------------------------------- values --

SymbolicInt SymbolicInt::from_dim(const Dim& dim) {
  if (dim.is_known()) return of(dim.value);
  return dim.symbol.empty() ? unknown() : named(dim.symbol);
}

Dim SymbolicInt::to_dim() const {
  if (number) return *number >= 0 ? Dim::known(*number) : Dim::unknown();
  return symbol.empty() ? Dim::unknown() : Dim::named(symbol);
}

std::optional<std::vector<int64_t>> TrackedValues::numbers() const {
  std::vector<int64_t> out;
  for (const SymbolicInt& element : elements) {
    if (!element.number) return std::nullopt;
    out.push_back(*element.number);
  }
  return out;
}

// --------------------------------------------------------------- context --

InferenceContext::InferenceContext(const Node& node, std::vector<const TensorType*> input_types,
                                   std::vector<const TrackedValues*> input_values)
    : node_(node),
      input_types_(std::move(input_types)),
      input_values_(std::move(input_values)),
      output_values_(node.outputs().size()) {}

const TensorType& InferenceContext::input_type(size_t index) const {
  static const TensorType kUnknown;
  if (!has_input(index) || index >= input_types_.size() || input_types_[index] == nullptr) return kUnknown;
  return *input_types_[index];
}

const TrackedValues* InferenceContext::input_values(size_t index) const {
  if (!has_input(index) || index >= input_values_.size()) return nullptr;
  return input_values_[index];
}

const Tensor* InferenceContext::input_constant(size_t index) const {
  const Value* value = node_.input(index);
  if (value == nullptr) return nullptr;
  if (value->is_initializer()) return &*value->initializer();
  const Node* producer = value->producer();
  if (producer == nullptr || !producer->is("Constant")) return nullptr;
  auto it = producer->attributes().all().find("value");
  return it == producer->attributes().all().end() ? nullptr : std::get_if<Tensor>(&it->second);
}

void InferenceContext::set_output_values(size_t index, TrackedValues values) {
  if (index < output_values_.size() && values.elements.size() <= kMaxTrackedElements)
    output_values_[index] = std::move(values);
}

Status InferenceContext::error(const std::string& message) const {
  return Status::error("node '" + node_.name() + "' (" + (node_.domain().empty() ? "" : node_.domain() + "::") +
                       node_.op_type() + "): " + message);
}

Status InferenceContext::require_inputs(size_t count) const {
  for (size_t i = 0; i < count; ++i)
    if (!has_input(i))
      return error("needs " + std::to_string(count) + " inputs, input " + std::to_string(i) + " is missing");
  return Status::ok();
}

// -------------------------------------------------------------- registry --

ShapeInferenceRegistry ShapeInferenceRegistry::with_builtins() {
  ShapeInferenceRegistry registry;
  inference::register_elementwise_rules(registry);
  inference::register_linalg_rules(registry);
  inference::register_reduction_rules(registry);
  inference::register_shape_rules(registry);
  inference::register_data_movement_rules(registry);
  inference::register_loka_rules(registry);
  return registry;
}

ShapeInferenceRegistry& ShapeInferenceRegistry::global() {
  static ShapeInferenceRegistry registry = with_builtins();
  return registry;
}

void ShapeInferenceRegistry::add(std::string domain, std::string op_type, InferenceFn fn) {
  rules_[{std::move(domain), std::move(op_type)}] = std::move(fn);
}

const InferenceFn* ShapeInferenceRegistry::find(std::string_view domain, std::string_view op_type) const {
  auto it = rules_.find(std::pair<std::string, std::string>(domain, op_type));
  return it == rules_.end() ? nullptr : &it->second;
}

// --------------------------------------------------------------- merging --

Result<TensorType> merge_types(const TensorType& inferred, const TensorType& declared) {
  TensorType out;
  if (inferred.dtype != DType::kUndefined && declared.dtype != DType::kUndefined && inferred.dtype != declared.dtype)
    return Status::error("dtype " + std::string(dtype_name(inferred.dtype)) + " differs from declared " +
                         std::string(dtype_name(declared.dtype)));
  out.dtype = inferred.dtype != DType::kUndefined ? inferred.dtype : declared.dtype;
  if (!inferred.has_rank() || !declared.has_rank()) {
    out.shape = inferred.has_rank() ? inferred.shape : declared.shape;
    return out;
  }
  if (inferred.rank() != declared.rank())
    return Status::error("rank " + std::to_string(inferred.rank()) + " differs from declared rank " +
                         std::to_string(declared.rank()));
  out.shape.emplace();
  for (int i = 0; i < inferred.rank(); ++i) {
    const Dim& a = (*inferred.shape)[static_cast<size_t>(i)];
    const Dim& b = (*declared.shape)[static_cast<size_t>(i)];
    if (a.is_known() && b.is_known() && a.value != b.value)
      return Status::error("dim " + std::to_string(i) + " is " + std::to_string(a.value) + " but declared " +
                           std::to_string(b.value));
    // A size beats a symbol beats unknown; between two symbols the inferred one is kept, it
    // ties back to the graph inputs' names.
    if (a.is_known()) out.shape->push_back(a);
    else if (b.is_known()) out.shape->push_back(b);
    else out.shape->push_back(a.symbol.empty() ? b : a);
  }
  return out;
}

// ------------------------------------------------------------ single node --
namespace {

const InferenceFn* find_rule(const Node& node, const InferenceOptions& options) {
  const ShapeInferenceRegistry& registry = options.registry ? *options.registry : ShapeInferenceRegistry::global();
  return registry.find(node.domain(), node.op_type());
}

/// Runs `rule` on `node` and checks it produced one type per output.
Result<std::vector<TensorType>> run_rule(const InferenceFn& rule, InferenceContext& ctx) {
  LOKA_ASSIGN_OR_RETURN(std::vector<TensorType> types, rule(ctx));
  if (types.size() != ctx.output_count())
    return ctx.error("inference produced " + std::to_string(types.size()) + " types for " +
                     std::to_string(ctx.output_count()) + " outputs");
  return types;
}

/// Re-derives the type and tracked contents of a value through its producers (bounded depth),
/// starting from the types the graph carries, which may not have been inferred yet. Memoised
/// per call so shared subexpressions run once.
class ValueTracer {
 public:
  struct Traced {
    TensorType type;
    std::optional<TrackedValues> values;
  };

  explicit ValueTracer(const InferenceOptions& options) : options_(options) {}

  const Traced* trace(const Value* value, int depth) {
    if (value == nullptr) return nullptr;
    // std::map nodes stay put as the map grows; an entry in progress reads as the stored type
    // without values, which also stops cycles.
    auto [it, inserted] = memo_.try_emplace(value, Traced{value->type(), std::nullopt});
    if (!inserted) return &it->second;
    Traced& traced = it->second;
    const bool small = !value->type().has_rank() || value->type().rank() <= 1;
    if (value->is_initializer()) {
      traced.values = tracked_from_tensor(*value->initializer());
    } else if (const Node* producer = value->producer(); producer != nullptr && small && depth > 0) {
      if (const InferenceFn* rule = find_rule(*producer, options_)) {
        std::vector<const TensorType*> types;
        std::vector<const TrackedValues*> values;
        for (const Value* input : producer->inputs()) {
          const Traced* in = trace(input, depth - 1);
          types.push_back(in ? &in->type : nullptr);
          values.push_back(in && in->values ? &*in->values : nullptr);
        }
        InferenceContext ctx(*producer, std::move(types), std::move(values));
        if (auto inferred = run_rule(*rule, ctx)) {
          const size_t index = value->producer_output_index();
          auto merged = merge_types((*inferred)[index], value->type());
          traced.type = merged ? std::move(merged).value() : (*inferred)[index];
          traced.values = std::move(ctx.output_values()[index]);
        }
      }
    }
    return &traced;
  }

  /// Shape chains are short; the bound keeps re-inference of one node cheap in deep graphs.
  static constexpr int kMaxDepth = 24;

 private:
  const InferenceOptions& options_;
  std::map<const Value*, Traced> memo_;
};

}  // namespace

Result<std::vector<TensorType>> infer_node_types(const Node& node, const std::vector<const TensorType*>& input_types,
                                                 const InferenceOptions& options) {
  const InferenceFn* rule = find_rule(node, options);
  if (rule == nullptr) return std::vector<TensorType>(node.outputs().size());
  ValueTracer tracer(options);
  std::vector<const TrackedValues*> values;
  for (const Value* input : node.inputs()) {
    const ValueTracer::Traced* traced = tracer.trace(input, ValueTracer::kMaxDepth);
    values.push_back(traced && traced->values ? &*traced->values : nullptr);
  }
  InferenceContext ctx(node, input_types, std::move(values));
  return run_rule(*rule, ctx);
}

Result<std::vector<TensorType>> infer_node_types(const Node& node, const InferenceOptions& options) {
  std::vector<const TensorType*> types;
  for (const Value* input : node.inputs()) types.push_back(input ? &input->type() : nullptr);
  return infer_node_types(node, types, options);
}

// ------------------------------------------------------------- graph walk --

Status infer_shapes(Graph& graph, const InferenceOptions& options) {
  LOKA_ASSIGN_OR_RETURN(const std::vector<Node*> order, topological_order(graph));
  std::vector<std::optional<TrackedValues>> tracked(graph.value_id_bound());
  for (const Value* value : graph.values())
    if (value->is_initializer()) tracked[value->id()] = tracked_from_tensor(*value->initializer());

  for (Node* node : order) {
    const InferenceFn* rule = find_rule(*node, options);
    if (rule == nullptr) continue;  // e.g. an ai.loka op whose pass has not registered a rule
    std::vector<const TensorType*> types;
    std::vector<const TrackedValues*> values;
    for (const Value* input : node->inputs()) {
      types.push_back(input ? &input->type() : nullptr);
      values.push_back(input && tracked[input->id()] ? &*tracked[input->id()] : nullptr);
    }
    InferenceContext ctx(*node, std::move(types), std::move(values));
    LOKA_ASSIGN_OR_RETURN(const std::vector<TensorType> inferred, run_rule(*rule, ctx));
    for (size_t i = 0; i < inferred.size(); ++i) {
      Value* output = node->output(i);
      const TensorType declared = options.discard_existing ? TensorType{} : output->type();
      auto merged = merge_types(inferred[i], declared);
      if (!merged)
        return ctx.error("output '" + output->name() + "' is inferred as " + describe(inferred[i]) +
                         " but declared as " + describe(declared) + ": " + merged.status().message());
      output->set_type(std::move(merged).value());
      tracked[output->id()] = std::move(ctx.output_values()[i]);
    }
  }
  return Status::ok();
}

}  // namespace loka::ir
