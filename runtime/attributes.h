// ============================================================================
// runtime/attributes.h — typed, checked access to a node's ONNX attributes.
//
// Decoupled from protobuf so kernels and the compiler's IR share it: the
// runtime fills it from a NodeProto, the IR from its own attribute map.
// Getters return an error naming the attribute when its type is wrong.
// ============================================================================
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"

namespace loka {

using AttributeValue = std::variant<int64_t, float, std::string, Tensor, std::vector<int64_t>,
                                    std::vector<float>, std::vector<std::string>>;

class Attributes {
 public:
  void set(std::string name, AttributeValue value) { values_[std::move(name)] = std::move(value); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::map<std::string, AttributeValue>& all() const { return values_; }

  Result<int64_t> get_int(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  Result<float> get_float(const std::string& name, std::optional<float> fallback = std::nullopt) const;
  Result<std::string> get_string(const std::string& name,
                                 std::optional<std::string> fallback = std::nullopt) const;
  Result<std::vector<int64_t>> get_ints(const std::string& name,
                                        std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  Result<std::vector<float>> get_floats(const std::string& name,
                                        std::optional<std::vector<float>> fallback = std::nullopt) const;
  Result<Tensor> get_tensor(const std::string& name) const;

 private:
  template <typename T>
  Result<T> get(const std::string& name, std::optional<T> fallback, const char* type_name) const;
  std::map<std::string, AttributeValue> values_;
};

}  // namespace loka
