// ============================================================================
// tests/cuda/embedding_bag_test.cc — embedding gather + sum pooling on the GPU.
//
// Fresh random tables (FP32, BF16, FP8 E4M3 with per-row or per-tensor scales)
// and ids from a seeded generator; awkward shapes (batch 1 and 65536, odd
// dims that defeat vector loads, misaligned table bases, bag 1..20); outputs
// written into a slice of a wider destination whose other columns must stay
// untouched; ids read from a wider id matrix. The host reference sums in the
// documented order (FP32, bag order, FP8 as fma(code, scale, acc)), so every
// element must match bit for bit. A second check ties the kernel to the CPU
// runtime's Gather + ReduceSum. Skips visibly without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/embedding_bag.h"
#include "loka/bfloat16.h"
#include "loka/float8.h"
#include "runtime/single_node_util.h"
#include "test_support.h"

namespace loka {
namespace {

using cuda::EmbeddingBagArgs;
using cuda::EmbeddingFormat;
using cuda::IndexPolicy;
using testing::DeviceBytes;

class CudaEmbeddingBag : public testing::CudaTest {};

const char* format_name(EmbeddingFormat format) {
  switch (format) {
    case EmbeddingFormat::kFloat32: return "f32";
    case EmbeddingFormat::kBFloat16: return "bf16";
    case EmbeddingFormat::kFp8E4M3: return "fp8";
  }
  return "?";
}

/// A random table in its storage bytes, plus each element as the kernel must decode it.
struct HostTable {
  EmbeddingFormat format = EmbeddingFormat::kFloat32;
  int64_t rows = 0, dim = 0;
  bool per_row_scales = true;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<float> codes_as_float;  ///< the stored value (FP8: the decoded code, before scaling)
};

HostTable make_table(std::mt19937& rng, EmbeddingFormat format, int64_t rows, int64_t dim, bool per_row_scales) {
  HostTable t{format, rows, dim, per_row_scales, {}, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t count = static_cast<size_t>(rows * dim);
  t.codes_as_float.resize(count);
  switch (format) {
    case EmbeddingFormat::kFloat32:
      t.bytes.resize(count * 4);
      for (size_t i = 0; i < count; ++i) t.codes_as_float[i] = normal(rng);
      std::memcpy(t.bytes.data(), t.codes_as_float.data(), count * 4);
      break;
    case EmbeddingFormat::kBFloat16:
      t.bytes.resize(count * 2);
      for (size_t i = 0; i < count; ++i) {
        const uint16_t code = float_to_bf16(normal(rng));
        std::memcpy(t.bytes.data() + i * 2, &code, 2);
        t.codes_as_float[i] = bf16_to_float(code);
      }
      break;
    case EmbeddingFormat::kFp8E4M3: {
      t.bytes.resize(count);
      for (size_t i = 0; i < count; ++i) {
        t.bytes[i] = float_to_fp8e4m3fn(normal(rng) * 100.0f);
        t.codes_as_float[i] = fp8e4m3fn_to_float(t.bytes[i]);
      }
      std::uniform_real_distribution<float> scale(0.001f, 0.05f);
      t.scales.resize(per_row_scales ? static_cast<size_t>(rows) : 1);
      for (float& s : t.scales) s = scale(rng);
      break;
    }
  }
  return t;
}

/// One lookup to run and check: the table, ids, output layout and policy.
struct LookupCase {
  HostTable table;
  int64_t batch = 1, bag = 1;
  bool ids_int64 = true;
  int64_t ids_row_stride = 0, ids_column = 0;  ///< ids read from a [batch, stride] matrix at this column
  std::vector<int64_t> id_matrix;             ///< [batch, ids_row_stride]
  DType out_dtype = DType::kFloat32;
  int64_t out_row_stride = 0, out_column = 0;
  IndexPolicy policy = IndexPolicy::kError;
  int64_t table_misalignment = 0;             ///< elements the table base is shifted by

  std::string describe() const {
    std::ostringstream text;
    text << format_name(table.format) << " rows=" << table.rows << " dim=" << table.dim
         << (table.per_row_scales ? "" : " per-tensor-scale") << " batch=" << batch << " bag=" << bag
         << " ids=" << (ids_int64 ? "i64" : "i32") << " ids_stride=" << ids_row_stride << " ids_col=" << ids_column
         << " out=" << (out_dtype == DType::kBFloat16 ? "bf16" : "f32") << " out_stride=" << out_row_stride
         << " out_col=" << out_column << " policy=" << (policy == IndexPolicy::kClamp ? "clamp" : "error")
         << " misaligned=" << table_misalignment;
    return text.str();
  }
  int64_t id(int64_t sample, int64_t k) const {
    return id_matrix[static_cast<size_t>(sample * ids_row_stride + ids_column + k)];
  }
};

/// Expected output row values (FP32 sums before output rounding) and whether any id was out of range.
std::vector<float> reference(const LookupCase& c, bool& any_out_of_range) {
  const HostTable& t = c.table;
  std::vector<float> out(static_cast<size_t>(c.batch * t.dim));
  any_out_of_range = false;
  for (int64_t i = 0; i < c.batch; ++i) {
    for (int64_t d = 0; d < t.dim; ++d) {
      float acc = -0.0f;
      for (int64_t k = 0; k < c.bag; ++k) {
        int64_t id = c.id(i, k);
        if (id < -t.rows || id >= t.rows) {
          any_out_of_range = true;
          if (c.policy == IndexPolicy::kError || t.rows == 0) continue;
          id = id < 0 ? 0 : t.rows - 1;
        }
        const int64_t row = id < 0 ? id + t.rows : id;
        const float value = t.codes_as_float[static_cast<size_t>(row * t.dim + d)];
        if (t.format == EmbeddingFormat::kFp8E4M3)
          acc = std::fmaf(value, t.scales[t.per_row_scales ? static_cast<size_t>(row) : 0], acc);
        else
          acc += value;
      }
      out[static_cast<size_t>(i * t.dim + d)] = acc;
    }
  }
  return out;
}

float output_rounding(float value, DType dtype) {
  return dtype == DType::kBFloat16 ? bf16_to_float(float_to_bf16(value)) : value;
}

/// Fills the id matrix: mostly valid ids (negative ones too), some out of range when asked.
void fill_ids(std::mt19937& rng, LookupCase& c, double out_of_range_fraction) {
  const int64_t rows = c.table.rows;
  c.id_matrix.resize(static_cast<size_t>(c.batch * c.ids_row_stride));
  std::uniform_int_distribution<int64_t> valid(-rows, rows - 1);
  std::uniform_int_distribution<int64_t> far(rows, rows + 1000);
  std::bernoulli_distribution bad(out_of_range_fraction), negative(0.5);
  for (int64_t& id : c.id_matrix) {
    if (bad(rng)) id = negative(rng) ? -far(rng) - 1 : far(rng);
    else id = valid(rng);
    if (!c.ids_int64) id = static_cast<int32_t>(id);
  }
}

/// Device copies of one case's inputs and its destination buffer (prefilled with a sentinel).
struct DeviceCase {
  explicit DeviceCase(const LookupCase& c)
      : table(c.table.bytes.size() + 16),
        scales(c.table.scales),
        ids(id_bytes(c)),
        out(static_cast<size_t>(c.batch * c.out_row_stride) * out_size(c)),
        flag(std::vector<int>{0}) {
    const size_t shift = static_cast<size_t>(c.table_misalignment) * (c.table.bytes.size() / std::max<size_t>(1, c.table.codes_as_float.size()));
    table_base = static_cast<char*>(table.get()) + shift;
    if (!c.table.bytes.empty()) {
      EXPECT_EQ(cudaMemcpy(table_base, c.table.bytes.data(), c.table.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    const std::vector<uint8_t> sentinel(static_cast<size_t>(c.batch * c.out_row_stride) * out_size(c), 0x7B);
    out.upload(sentinel.data(), sentinel.size());
  }
  static size_t out_size(const LookupCase& c) { return c.out_dtype == DType::kBFloat16 ? 2 : 4; }
  static std::vector<uint8_t> id_bytes(const LookupCase& c) {
    std::vector<uint8_t> bytes(c.id_matrix.size() * (c.ids_int64 ? 8 : 4));
    for (size_t i = 0; i < c.id_matrix.size(); ++i) {
      if (c.ids_int64) std::memcpy(bytes.data() + i * 8, &c.id_matrix[i], 8);
      else {
        const auto id = static_cast<int32_t>(c.id_matrix[i]);
        std::memcpy(bytes.data() + i * 4, &id, 4);
      }
    }
    return bytes;
  }
  EmbeddingBagArgs args(const LookupCase& c) const {
    EmbeddingBagArgs a;
    a.table = table_base;
    a.format = c.table.format;
    a.row_scales = c.table.scales.empty() ? nullptr : scales.as<float>();
    a.per_row_scales = c.table.per_row_scales;
    a.rows = c.table.rows;
    a.dim = c.table.dim;
    a.ids = static_cast<const char*>(ids.get()) + c.ids_column * (c.ids_int64 ? 8 : 4);
    a.ids_int64 = c.ids_int64;
    a.bag = c.bag;
    a.ids_row_stride = c.ids_row_stride;
    a.out = out.get();
    a.out_dtype = c.out_dtype;
    a.out_row_stride = c.out_row_stride;
    a.out_column_offset = c.out_column;
    a.policy = c.policy;
    a.error_flag = flag.as<int>();
    return a;
  }

  DeviceBytes table;
  void* table_base = nullptr;
  DeviceBytes scales;
  DeviceBytes ids;
  DeviceBytes out;
  DeviceBytes flag;
};

/// Checks the destination: the case's columns hold the reference (bit for bit after
/// output rounding), every other byte still holds the sentinel, and the error flag
/// is set exactly when an id was out of range (kError).
void check_output(const LookupCase& c, const DeviceCase& device) {
  bool any_out_of_range = false;
  const std::vector<float> expected = reference(c, any_out_of_range);
  const size_t size = DeviceCase::out_size(c);
  std::vector<uint8_t> bytes(static_cast<size_t>(c.batch * c.out_row_stride) * size);
  device.out.download(bytes.data(), bytes.size());
  size_t mismatches = 0, clobbered = 0;
  for (int64_t i = 0; i < c.batch; ++i) {
    for (int64_t col = 0; col < c.out_row_stride; ++col) {
      const uint8_t* at = bytes.data() + static_cast<size_t>(i * c.out_row_stride + col) * size;
      const int64_t d = col - c.out_column;
      if (d < 0 || d >= c.table.dim) {
        for (size_t b = 0; b < size; ++b) clobbered += at[b] != 0x7B;
        continue;
      }
      float got;
      if (size == 2) {
        uint16_t code;
        std::memcpy(&code, at, 2);
        got = bf16_to_float(code);
      } else {
        std::memcpy(&got, at, 4);
      }
      const float want = output_rounding(expected[static_cast<size_t>(i * c.table.dim + d)], c.out_dtype);
      if (std::memcmp(&got, &want, 4) != 0 && mismatches++ < 5)
        ADD_FAILURE() << "sample " << i << " column " << d << ": got " << got << ", expected " << want;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(clobbered, 0u) << "bytes outside the output slice were written";
  const std::vector<int> flag = device.flag.download_vector<int>(1);
  const bool flag_expected = any_out_of_range && (c.policy == IndexPolicy::kError || c.table.rows == 0);
  EXPECT_EQ(flag[0], flag_expected ? 1 : 0);
}

LookupCase random_case(std::mt19937& rng, int64_t batch) {
  const std::vector<int64_t> dims = {1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 31, 32, 48, 64, 100, 128, 129, 256, 1000};
  // Up to MLPerf DLRM's longest bag (100).
  const std::vector<int64_t> bags = {1, 1, 2, 3, 7, 8, 9, 17, 20, 100};
  const auto pick = [&rng](const std::vector<int64_t>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  std::uniform_int_distribution<int> coin(0, 1), three(0, 2), four(0, 3);
  const auto format = static_cast<EmbeddingFormat>(three(rng));
  const int64_t dim = pick(dims);
  const int64_t rows = std::uniform_int_distribution<int64_t>(1, 3000)(rng);
  LookupCase c;
  c.table = make_table(rng, format, rows, dim, four(rng) != 0);
  c.batch = batch;
  c.bag = pick(bags);
  c.ids_int64 = coin(rng) != 0;
  c.ids_column = four(rng) == 0 ? std::uniform_int_distribution<int64_t>(1, 5)(rng) : 0;
  c.ids_row_stride = c.bag + c.ids_column + (four(rng) == 0 ? 3 : 0);
  c.out_dtype = coin(rng) ? DType::kBFloat16 : DType::kFloat32;
  c.out_column = four(rng) == 0 ? std::uniform_int_distribution<int64_t>(1, 9)(rng) : (coin(rng) ? 8 : 0);
  c.out_row_stride = c.out_column + dim + (coin(rng) ? std::uniform_int_distribution<int64_t>(0, 9)(rng) : 0);
  c.policy = coin(rng) ? IndexPolicy::kClamp : IndexPolicy::kError;
  c.table_misalignment = four(rng) == 0 ? 1 : 0;
  fill_ids(rng, c, four(rng) == 0 ? 0.05 : 0.0);
  return c;
}

void run_and_check(const LookupCase& c) {
  SCOPED_TRACE(c.describe());
  const DeviceCase device(c);
  const EmbeddingBagArgs args = device.args(c);
  ASSERT_TRUE(cuda::launch_embedding_bag(args, c.batch, nullptr).is_ok());
  check_output(c, device);
}

TEST_F(CudaEmbeddingBag, RandomLookupsMatchTheHostSumBitForBit) {
  std::mt19937 rng(20261201);
  const std::vector<int64_t> batches = {1, 2, 33, 257, 1000};
  for (int trial = 0; trial < 150; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial) + " (seed 20261201)");
    run_and_check(random_case(rng, batches[static_cast<size_t>(trial) % batches.size()]));
  }
}

TEST_F(CudaEmbeddingBag, Batch65536EveryFormat) {
  std::mt19937 rng(65536);
  for (int format = 0; format < 3; ++format) {
    for (int64_t dim : {16, 13, 128}) {
      LookupCase c;
      c.table = make_table(rng, static_cast<EmbeddingFormat>(format), 1000, dim, true);
      c.batch = 65536;
      c.bag = 3;
      c.ids_row_stride = 3;
      c.out_row_stride = dim;
      fill_ids(rng, c, 0.0);
      run_and_check(c);
    }
  }
}

TEST_F(CudaEmbeddingBag, OutOfRangeIdsReadNothingUnderEitherPolicy) {
  std::mt19937 rng(7);
  for (IndexPolicy policy : {IndexPolicy::kError, IndexPolicy::kClamp}) {
    for (bool ids_int64 : {true, false}) {
      LookupCase c;
      c.table = make_table(rng, EmbeddingFormat::kFp8E4M3, 10, 8, true);
      c.batch = 6;
      c.bag = 1;
      c.ids_int64 = ids_int64;
      c.ids_row_stride = 1;
      c.out_row_stride = 8;
      c.policy = policy;
      c.id_matrix = {-11, 10, ids_int64 ? (int64_t{1} << 40) : INT32_MAX, -1, 3, ids_int64 ? INT64_MIN : INT32_MIN};
      run_and_check(c);
    }
  }
  // A table with no rows has nothing to clamp to: both policies zero-fill and flag.
  LookupCase empty;
  empty.table = make_table(rng, EmbeddingFormat::kFloat32, 0, 4, true);
  empty.batch = 2;
  empty.ids_row_stride = 1;
  empty.out_row_stride = 4;
  empty.policy = IndexPolicy::kClamp;
  empty.id_matrix = {0, -1};
  run_and_check(empty);
}

TEST_F(CudaEmbeddingBag, SeveralTablesInOneLaunchFillTheirSlicesOfOneDestination) {
  std::mt19937 rng(26);
  // 26 tables of mixed formats and dims written side by side into [batch, total]; bags of 1 to 4
  // and one of 100, as in MLPerf DLRMv2, so the launch reorders tables (longest chain first).
  const int64_t batch = 513;
  std::vector<LookupCase> cases(26);
  int64_t total = 0;
  for (size_t t = 0; t < cases.size(); ++t) {
    LookupCase& c = cases[t];
    const int64_t dim = t % 5 == 4 ? 13 : 16 * (1 + static_cast<int64_t>(t % 3));
    c.table = make_table(rng, static_cast<EmbeddingFormat>(t % 3), 100 + static_cast<int64_t>(t) * 37, dim, t % 4 != 0);
    c.batch = batch;
    c.bag = t == 20 ? 100 : 1 + static_cast<int64_t>(t % 4);
    c.ids_int64 = t % 2 == 0;
    c.ids_row_stride = c.bag;
    c.out_column = total;
    c.out_dtype = DType::kFloat32;
    fill_ids(rng, c, 0.0);
    total += dim;
  }
  std::vector<std::unique_ptr<DeviceCase>> devices;
  std::vector<EmbeddingBagArgs> args;
  for (LookupCase& c : cases) c.out_row_stride = total;
  DeviceBytes destination(static_cast<size_t>(batch * total) * 4);
  for (const LookupCase& c : cases) {
    devices.push_back(std::make_unique<DeviceCase>(c));
    args.push_back(devices.back()->args(c));
    args.back().out = destination.get();
  }
  ASSERT_TRUE(cuda::launch_embedding_bags(args.data(), static_cast<int>(args.size()), batch, nullptr).is_ok());
  const std::vector<float> got = destination.download_vector<float>(static_cast<size_t>(batch * total));
  for (size_t t = 0; t < cases.size(); ++t) {
    SCOPED_TRACE("table " + std::to_string(t) + ": " + cases[t].describe());
    bool any_out_of_range = false;
    const std::vector<float> expected = reference(cases[t], any_out_of_range);
    size_t mismatches = 0;
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t d = 0; d < cases[t].table.dim; ++d)
        mismatches += got[static_cast<size_t>(i * total + cases[t].out_column + d)] !=
                      expected[static_cast<size_t>(i * cases[t].table.dim + d)];
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST_F(CudaEmbeddingBag, MatchesTheCpuRuntimesGatherThenReduceSum) {
  std::mt19937 rng(3);
  for (int64_t bag : {1, 4, 26}) {
    const int64_t rows = 500, dim = 24, batch = 300;
    const Tensor table = testing::random_tensor(rng, {rows, dim});
    Tensor ids = Tensor::zeros(DType::kInt64, {batch, bag});
    std::uniform_int_distribution<int64_t> id(-rows, rows - 1);
    for (int64_t& v : ids.values<int64_t>()) v = id(rng);
    auto gathered = testing::run_single_node("Gather", 13, {table, ids});
    ASSERT_TRUE(gathered) << gathered.status().message();
    auto pooled = testing::run_single_node("ReduceSum", 13, {(*gathered)[0], testing::int_tensor({1})},
                                           {{"keepdims", int64_t{0}}});
    ASSERT_TRUE(pooled) << pooled.status().message();

    DeviceBytes d_table(table), d_ids(ids), d_out(static_cast<size_t>(batch * dim) * 4);
    EmbeddingBagArgs args;
    args.table = d_table.get();
    args.rows = rows;
    args.dim = dim;
    args.ids = d_ids.get();
    args.bag = bag;
    args.out = d_out.get();
    ASSERT_TRUE(cuda::launch_embedding_bag(args, batch, nullptr).is_ok());
    const Tensor got = d_out.download_tensor(DType::kFloat32, {batch, dim});
    // The runtime sums in double, the kernel in FP32: bag - 1 roundings of at most half an ulp of the sum.
    testing::expect_close(got, (*pooled)[0], bag == 1 ? 0 : 4 * bag, bag == 1 ? 0.0f : 1e-5f * static_cast<float>(bag));
  }
}

TEST(EmbeddingBagArgs, MalformedLookupsAreRefusedWithAReason) {
  int dummy = 0;
  EmbeddingBagArgs args;
  args.table = &dummy;
  args.ids = &dummy;
  args.out = &dummy;
  args.rows = 10;
  args.dim = 4;
  EXPECT_TRUE(cuda::check_embedding_bag(args).is_ok());
  EmbeddingBagArgs bad = args;
  bad.bag = 0;
  EXPECT_NE(cuda::check_embedding_bag(bad, 3).message().find("embedding table 3: bag must be >= 1"), std::string::npos);
  bad = args;
  bad.out_row_stride = 6;
  bad.out_column_offset = 3;
  EXPECT_NE(cuda::check_embedding_bag(bad).message().find("do not fit a row stride of 6"), std::string::npos);
  bad = args;
  bad.out_dtype = DType::kFloat16;
  EXPECT_NE(cuda::check_embedding_bag(bad).message().find("output must be FLOAT or BFLOAT16"), std::string::npos);
  bad = args;
  bad.format = EmbeddingFormat::kFp8E4M3;
  EXPECT_NE(cuda::check_embedding_bag(bad).message().find("needs its row scales"), std::string::npos);
  bad = args;
  bad.bag = 3;
  bad.ids_row_stride = 2;
  EXPECT_NE(cuda::check_embedding_bag(bad).message().find("below the bag"), std::string::npos);
}

}  // namespace
}  // namespace loka
