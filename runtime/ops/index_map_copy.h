// ============================================================================
// runtime/ops/index_map_copy.h — the one copy loop behind Transpose, Expand,
// Slice, Tile and Pad.
//
// Each of those ops is "separable": output element (o_0, ..., o_{r-1}) reads the
// input element at offset map_0(o_0) + ... + map_{r-1}(o_{r-1}) (in elements),
// or takes a fill value when any map gives kFillIndex (Pad's constant mode).
// Expressing them as per-dimension maps keeps the index math of each
// op in a few obvious lines and the copying (rows, memcpy fast path, any dtype
// by byte size) in one place. Callers build the tables from validated shapes,
// so every offset is in range by construction; the loop itself checks nothing.
// Header-only so both op families (shape_ops.cc, data_movement.cc) share it
// without a build-list change.
// ============================================================================
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"

namespace loka::ops {

/// Error unless the tensor's elements are plain bytes LoKA can move (not strings).
inline Status require_copyable(const Tensor& tensor, const char* what) {
  if (dtype_size(tensor.dtype()) == 0)
    return Status::error(std::string(what) + " has type " + std::string(dtype_name(tensor.dtype())) +
                         ", which LoKA cannot copy");
  return Status::ok();
}

/// Marks an output coordinate that reads the fill value instead of the input.
inline constexpr int64_t kFillIndex = -1;

/// How one output dimension maps to input element offsets: either strided
/// (base + o * stride, no table in memory, so a huge broadcast dim costs nothing)
/// or an explicit table (wrap-around, padding), which may hold kFillIndex.
struct AxisMap {
  int64_t count = 0;
  int64_t base = 0;
  int64_t stride = 0;
  std::vector<int64_t> table;  ///< used when non-empty (then count == table.size())

  static AxisMap strided(int64_t count, int64_t base, int64_t stride) { return {count, base, stride, {}}; }
  static AxisMap explicit_table(std::vector<int64_t> offsets) {
    const auto count = static_cast<int64_t>(offsets.size());
    return {count, 0, 0, std::move(offsets)};
  }
  int64_t at(int64_t o) const { return table.empty() ? base + o * stride : table[static_cast<size_t>(o)]; }
};

namespace detail {

inline void copy_element(std::byte* dst, const std::byte* src, size_t element_size) {
  switch (element_size) {
    case 1: *dst = *src; break;
    case 2: std::memcpy(dst, src, 2); break;
    case 4: std::memcpy(dst, src, 4); break;
    case 8: std::memcpy(dst, src, 8); break;
    default: std::memcpy(dst, src, element_size); break;
  }
}

}  // namespace detail

/// Fills `dst` (contiguous, shape = the maps' counts) from `src`. `fill` (one
/// element of `element_size` bytes) is required only when a map holds kFillIndex.
inline void copy_by_axis_maps(const std::byte* src, const std::vector<AxisMap>& maps, size_t element_size,
                              const std::byte* fill, std::byte* dst) {
  const size_t rank = maps.size();
  if (rank == 0) {
    detail::copy_element(dst, src, element_size);
    return;
  }
  for (const AxisMap& map : maps)
    if (map.count == 0) return;  // empty output
  const AxisMap& inner = maps.back();
  const int64_t inner_count = inner.count;
  // A row whose last-dim offsets are consecutive is one memcpy.
  bool contiguous_inner = inner.table.empty() ? (inner.stride == 1 || inner_count == 1) : inner.table[0] != kFillIndex;
  for (int64_t j = 1; !inner.table.empty() && j < inner_count && contiguous_inner; ++j)
    contiguous_inner = inner.table[static_cast<size_t>(j)] == inner.table[0] + j;

  std::vector<int64_t> counter(rank, 0);  // outer coordinates (the last entry is unused)
  int64_t outer_offset = 0;
  int fill_dims = 0;  // outer dims whose current coordinate maps to kFillIndex
  for (size_t d = 0; d + 1 < rank; ++d) {
    const int64_t entry = maps[d].at(0);
    if (entry == kFillIndex) ++fill_dims; else outer_offset += entry;
  }
  const size_t row_bytes = static_cast<size_t>(inner_count) * element_size;
  const auto address = [&](int64_t offset) { return src + static_cast<size_t>(offset) * element_size; };
  while (true) {
    if (fill_dims > 0) {
      for (int64_t j = 0; j < inner_count; ++j) detail::copy_element(dst + j * element_size, fill, element_size);
    } else if (contiguous_inner) {
      std::memcpy(dst, address(outer_offset + inner.at(0)), row_bytes);
    } else if (inner.table.empty()) {
      const std::byte* from = address(outer_offset + inner.base);
      const int64_t step = inner.stride * static_cast<int64_t>(element_size);
      for (int64_t j = 0; j < inner_count; ++j) detail::copy_element(dst + j * element_size, from + j * step, element_size);
    } else {
      for (int64_t j = 0; j < inner_count; ++j) {
        const int64_t entry = inner.table[static_cast<size_t>(j)];
        detail::copy_element(dst + j * element_size, entry == kFillIndex ? fill : address(outer_offset + entry),
                             element_size);
      }
    }
    dst += row_bytes;
    // Advance the outer coordinates like an odometer, updating offset and fill count.
    size_t d = rank - 1;
    while (d-- > 0) {
      const AxisMap& map = maps[d];
      const int64_t old_entry = map.at(counter[d]);
      if (old_entry == kFillIndex) --fill_dims; else outer_offset -= old_entry;
      if (++counter[d] == map.count) counter[d] = 0;
      const int64_t new_entry = map.at(counter[d]);
      if (new_entry == kFillIndex) ++fill_dims; else outer_offset += new_entry;
      if (counter[d] != 0) break;
    }
    if (d == static_cast<size_t>(-1)) return;  // every outer dim wrapped: done
  }
}

}  // namespace loka::ops
