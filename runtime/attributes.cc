// ============================================================================
// runtime/attributes.cc — typed attribute lookup with one-line errors.
// ============================================================================
#include "runtime/attributes.h"

namespace loka {

template <typename T>
Result<T> Attributes::get(const std::string& name, std::optional<T> fallback, const char* type_name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    if (fallback) return *fallback;
    return Status::error("missing required attribute '" + name + "'");
  }
  if (const T* value = std::get_if<T>(&it->second)) return *value;
  return Status::error("attribute '" + name + "' is not of type " + type_name);
}

Result<int64_t> Attributes::get_int(const std::string& name, std::optional<int64_t> fallback) const {
  return get<int64_t>(name, fallback, "int");
}
Result<float> Attributes::get_float(const std::string& name, std::optional<float> fallback) const {
  return get<float>(name, fallback, "float");
}
Result<std::string> Attributes::get_string(const std::string& name, std::optional<std::string> fallback) const {
  return get<std::string>(name, std::move(fallback), "string");
}
Result<std::vector<int64_t>> Attributes::get_ints(const std::string& name,
                                                  std::optional<std::vector<int64_t>> fallback) const {
  return get<std::vector<int64_t>>(name, std::move(fallback), "ints");
}
Result<std::vector<float>> Attributes::get_floats(const std::string& name,
                                                  std::optional<std::vector<float>> fallback) const {
  return get<std::vector<float>>(name, std::move(fallback), "floats");
}
Result<Tensor> Attributes::get_tensor(const std::string& name) const {
  return get<Tensor>(name, std::nullopt, "tensor");
}

}  // namespace loka
