// ============================================================================
// kernels/dtype.cc — names and sizes of the ONNX element types.
// ============================================================================
#include "loka/dtype.h"

#include <array>
#include <string>

namespace loka {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  std::string_view onnx_name;
  std::string_view short_name;
};

constexpr std::array kDTypes = {
    DTypeInfo{DType::kFloat32, 4, "FLOAT", "f32"},
    DTypeInfo{DType::kUInt8, 1, "UINT8", "u8"},
    DTypeInfo{DType::kInt8, 1, "INT8", "i8"},
    DTypeInfo{DType::kUInt16, 2, "UINT16", "u16"},
    DTypeInfo{DType::kInt16, 2, "INT16", "i16"},
    DTypeInfo{DType::kInt32, 4, "INT32", "i32"},
    DTypeInfo{DType::kInt64, 8, "INT64", "i64"},
    DTypeInfo{DType::kString, 0, "STRING", "str"},
    DTypeInfo{DType::kBool, 1, "BOOL", "bool"},
    DTypeInfo{DType::kFloat16, 2, "FLOAT16", "f16"},
    DTypeInfo{DType::kFloat64, 8, "DOUBLE", "f64"},
    DTypeInfo{DType::kUInt32, 4, "UINT32", "u32"},
    DTypeInfo{DType::kUInt64, 8, "UINT64", "u64"},
    DTypeInfo{DType::kBFloat16, 2, "BFLOAT16", "bf16"},
    DTypeInfo{DType::kFloat8E4M3FN, 1, "FLOAT8E4M3FN", "f8e4m3fn"},
    DTypeInfo{DType::kFloat8E4M3FNUZ, 1, "FLOAT8E4M3FNUZ", "f8e4m3fnuz"},
    DTypeInfo{DType::kFloat8E5M2, 1, "FLOAT8E5M2", "f8e5m2"},
    DTypeInfo{DType::kFloat8E5M2FNUZ, 1, "FLOAT8E5M2FNUZ", "f8e5m2fnuz"},
};

const DTypeInfo* find_info(DType dtype) {
  for (const auto& info : kDTypes)
    if (info.dtype == dtype) return &info;
  return nullptr;
}

}  // namespace

size_t dtype_size(DType dtype) {
  const DTypeInfo* info = find_info(dtype);
  return info ? info->size : 0;
}

std::string_view dtype_name(DType dtype) {
  if (const DTypeInfo* info = find_info(dtype)) return info->onnx_name;
  thread_local std::string unknown;
  unknown = "UNKNOWN(" + std::to_string(static_cast<int32_t>(dtype)) + ")";
  return unknown;
}

std::string_view dtype_short_name(DType dtype) {
  const DTypeInfo* info = find_info(dtype);
  return info ? info->short_name : std::string_view("undefined");
}

std::optional<DType> dtype_from_short_name(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.short_name == name) return info.dtype;
  return std::nullopt;
}

bool dtype_is_supported(int32_t onnx_number) {
  const DTypeInfo* info = find_info(static_cast<DType>(onnx_number));
  // The FNUZ FP8 variants have names so errors can say them, but no codecs.
  return info != nullptr && info->size != 0 && info->dtype != DType::kFloat8E4M3FNUZ &&
         info->dtype != DType::kFloat8E5M2FNUZ;
}

bool dtype_is_fp8(DType dtype) {
  return dtype == DType::kFloat8E4M3FN || dtype == DType::kFloat8E5M2 ||
         dtype == DType::kFloat8E4M3FNUZ || dtype == DType::kFloat8E5M2FNUZ;
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16 || dtype_is_fp8(dtype);
}

}  // namespace loka
