// ============================================================================
// loka/tensor.h — a dense, row-major tensor: dtype, shape and shared storage.
//
// A Tensor is a cheap handle: copies share storage (like a view), so kernels
// pass them by value. Storage is 64-byte aligned host memory, owned either by
// the tensor or by whoever handed it in (`Tensor::wrap`). Shapes are plain
// int64 dims; symbolic dims exist only in the compiler's IR.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loka/dtype.h"
#include "loka/status.h"

namespace loka {

using Shape = std::vector<int64_t>;

/// Upper bound on the element count of any tensor LoKA creates (2^40): larger
/// declared shapes are rejected as hostile rather than attempted.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

/// Element count of `shape`, or an error for negative dims or overflow past kMaxTensorElements.
Result<int64_t> checked_element_count(const Shape& shape);
/// Element count of a shape already known valid.
int64_t element_count(const Shape& shape);
/// "[4,16,8]".
std::string shape_to_string(const Shape& shape);

/// Aligned host bytes; the unit the session's buffer pool recycles.
class Storage {
 public:
  explicit Storage(size_t capacity_bytes);
  Storage(void* external, size_t capacity_bytes, std::shared_ptr<void> keep_alive);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  bool owned_ = true;
  std::shared_ptr<void> keep_alive_;
};

class Tensor {
 public:
  Tensor() = default;
  /// A zero-filled tensor. The shape must be valid (see checked_element_count).
  static Tensor zeros(DType dtype, Shape shape);
  /// A tensor over existing storage (which must hold at least nbytes).
  static Tensor on_storage(DType dtype, Shape shape, std::shared_ptr<Storage> storage);
  /// A tensor over caller memory; `keep_alive` (may be null) is held as long as the tensor.
  static Tensor wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> keep_alive = {});
  /// A float32 tensor holding `values` (test and tool convenience).
  static Tensor from_floats(Shape shape, std::span<const float> values);
  static Tensor from_int64s(Shape shape, std::span<const int64_t> values);
  static Tensor scalar_float(float value) { return from_floats({}, std::span<const float>(&value, 1)); }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const { return shape_[static_cast<size_t>(axis)]; }
  int64_t element_count() const { return loka::element_count(shape_); }
  size_t byte_size() const { return static_cast<size_t>(element_count()) * dtype_size(dtype_); }

  void* raw() { return storage_ ? storage_->data() : nullptr; }
  const void* raw() const { return storage_ ? storage_->data() : nullptr; }
  template <typename T>
  T* data() { return static_cast<T*>(raw()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw()); }
  template <typename T>
  std::span<T> values() { return {data<T>(), static_cast<size_t>(element_count())}; }
  template <typename T>
  std::span<const T> values() const { return {data<T>(), static_cast<size_t>(element_count())}; }

  /// Same storage, another shape of the same element count.
  Tensor reshaped(Shape shape) const;
  /// A deep copy with its own storage.
  Tensor clone() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  /// Elements converted to float32 (any numeric dtype; FP8/BF16/FP16 decoded exactly).
  std::vector<float> to_floats() const;
  /// Elements converted to int64 (integer and bool dtypes).
  std::vector<int64_t> to_int64s() const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<Storage> storage_;
};

}  // namespace loka
