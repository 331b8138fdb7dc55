// ============================================================================
// loka/dtype.h — element types, numbered exactly as ONNX's TensorProto.DataType.
//
// The numbers are the contract (ARCHITECTURE.md): FLOAT8E4M3FN = 17 and
// FLOAT8E5M2 = 19 are used as plain integers because libonnx 1.12's enum
// predates them.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loka {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
};

/// Bytes per element; 0 for types LoKA cannot hold in a dense buffer (string, undefined).
size_t dtype_size(DType dtype);
/// ONNX spelling ("FLOAT", "FLOAT8E4M3FN", ...); "UNKNOWN(<n>)" for numbers outside the enum.
std::string_view dtype_name(DType dtype);
/// Short lower-case spelling used by the textual IR ("f32", "f8e4m3fn", "bf16", "i64", ...).
std::string_view dtype_short_name(DType dtype);
/// Inverse of dtype_short_name.
std::optional<DType> dtype_from_short_name(std::string_view name);
/// True for every ONNX number LoKA can store densely (all of the enum except string/undefined).
bool dtype_is_supported(int32_t onnx_number);
bool dtype_is_float(DType dtype);  ///< f64, f32, f16, bf16 and the FP8 types
bool dtype_is_fp8(DType dtype);

}  // namespace loka
