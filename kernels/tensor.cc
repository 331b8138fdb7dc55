// ============================================================================
// kernels/tensor.cc — Tensor storage and element conversion.
// ============================================================================
#include "loka/tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

#include "loka/bfloat16.h"
#include "loka/float8.h"

namespace loka {

Result<int64_t> checked_element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return Status::error("negative dimension " + std::to_string(dim) + " in shape " + shape_to_string(shape));
    if (dim != 0 && count > kMaxTensorElements / dim)
      return Status::error("shape " + shape_to_string(shape) + " has more than 2^40 elements");
    count *= dim;
  }
  return count;
}

int64_t element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

std::string shape_to_string(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// 64-byte alignment suits AVX-512 loads and cache lines; a zero-byte request
// still gets a unique pointer so empty tensors stay "defined".
Storage::Storage(size_t capacity_bytes) : capacity_(capacity_bytes) {
  const size_t rounded = ((capacity_bytes + 63) / 64) * 64;
  data_ = static_cast<std::byte*>(std::aligned_alloc(64, rounded == 0 ? 64 : rounded));
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::Storage(void* external, size_t capacity_bytes, std::shared_ptr<void> keep_alive)
    : data_(static_cast<std::byte*>(external)),
      capacity_(capacity_bytes),
      owned_(false),
      keep_alive_(std::move(keep_alive)) {}

Storage::~Storage() {
  if (owned_) std::free(data_);
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(loka::element_count(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(bytes);
  std::memset(storage->data(), 0, bytes);
  return on_storage(dtype, std::move(shape), std::move(storage));
}

Tensor Tensor::on_storage(DType dtype, Shape shape, std::shared_ptr<Storage> storage) {
  Tensor tensor;
  tensor.dtype_ = dtype;
  tensor.shape_ = std::move(shape);
  tensor.storage_ = std::move(storage);
  assert(tensor.storage_->capacity() >= tensor.byte_size());
  return tensor;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> keep_alive) {
  const size_t bytes = static_cast<size_t>(loka::element_count(shape)) * dtype_size(dtype);
  return on_storage(dtype, std::move(shape), std::make_shared<Storage>(data, bytes, std::move(keep_alive)));
}

Tensor Tensor::from_floats(Shape shape, std::span<const float> values) {
  Tensor tensor = zeros(DType::kFloat32, std::move(shape));
  assert(values.size() == static_cast<size_t>(tensor.element_count()));
  // An empty span may hold a null pointer, which memcpy must not be given even for 0 bytes.
  if (!values.empty()) std::memcpy(tensor.raw(), values.data(), values.size_bytes());
  return tensor;
}

Tensor Tensor::from_int64s(Shape shape, std::span<const int64_t> values) {
  Tensor tensor = zeros(DType::kInt64, std::move(shape));
  assert(values.size() == static_cast<size_t>(tensor.element_count()));
  // An empty span may hold a null pointer, which memcpy must not be given even for 0 bytes.
  if (!values.empty()) std::memcpy(tensor.raw(), values.data(), values.size_bytes());
  return tensor;
}

Tensor Tensor::reshaped(Shape shape) const {
  assert(loka::element_count(shape) == element_count());
  Tensor view = *this;
  view.shape_ = std::move(shape);
  return view;
}

Tensor Tensor::clone() const {
  Tensor copy = zeros(dtype_, shape_);
  if (byte_size() > 0) std::memcpy(copy.raw(), raw(), byte_size());
  return copy;
}

namespace {

template <typename Out, typename In, typename Convert>
std::vector<Out> convert_all(const Tensor& tensor, Convert convert) {
  const In* in = tensor.data<In>();
  std::vector<Out> out(static_cast<size_t>(tensor.element_count()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = convert(in[i]);
  return out;
}

template <typename Out, typename In>
std::vector<Out> cast_all(const Tensor& tensor) {
  return convert_all<Out, In>(tensor, [](In v) { return static_cast<Out>(v); });
}

}  // namespace

std::vector<float> Tensor::to_floats() const {
  switch (dtype_) {
    case DType::kFloat32: return cast_all<float, float>(*this);
    case DType::kFloat64: return cast_all<float, double>(*this);
    case DType::kFloat16: return convert_all<float, uint16_t>(*this, fp16_to_float);
    case DType::kBFloat16: return convert_all<float, uint16_t>(*this, bf16_to_float);
    case DType::kFloat8E4M3FN: return convert_all<float, uint8_t>(*this, fp8e4m3fn_to_float);
    case DType::kFloat8E5M2: return convert_all<float, uint8_t>(*this, fp8e5m2_to_float);
    case DType::kInt64: return cast_all<float, int64_t>(*this);
    case DType::kInt32: return cast_all<float, int32_t>(*this);
    case DType::kInt16: return cast_all<float, int16_t>(*this);
    case DType::kInt8: return cast_all<float, int8_t>(*this);
    case DType::kUInt8: case DType::kBool: return cast_all<float, uint8_t>(*this);
    case DType::kUInt16: return cast_all<float, uint16_t>(*this);
    case DType::kUInt32: return cast_all<float, uint32_t>(*this);
    case DType::kUInt64: return cast_all<float, uint64_t>(*this);
    default: return {};
  }
}

std::vector<int64_t> Tensor::to_int64s() const {
  switch (dtype_) {
    case DType::kInt64: return cast_all<int64_t, int64_t>(*this);
    case DType::kInt32: return cast_all<int64_t, int32_t>(*this);
    case DType::kInt16: return cast_all<int64_t, int16_t>(*this);
    case DType::kInt8: return cast_all<int64_t, int8_t>(*this);
    case DType::kUInt8: case DType::kBool: return cast_all<int64_t, uint8_t>(*this);
    case DType::kUInt16: return cast_all<int64_t, uint16_t>(*this);
    case DType::kUInt32: return cast_all<int64_t, uint32_t>(*this);
    case DType::kUInt64: return cast_all<int64_t, uint64_t>(*this);
    default: {
      if (!dtype_is_float(dtype_)) return {};
      const std::vector<float> floats = to_floats();
      return std::vector<int64_t>(floats.begin(), floats.end());
    }
  }
}

}  // namespace loka
