// ============================================================================
// tests/cuda/attention_test.cc — ai.loka.Attention on the GPU
// (kernels/cuda/attention.h) against the spec (docs/loka_ops.md) evaluated in
// double here, and the device op against the CPU runtime's.
//
// Fresh random inputs per case: every head-dim tier and its edges (D = 1, 4,
// 8, 16, 17, 32, 64, 128), one key, 33 and 100 keys (several tiles), Nq != Nk,
// Nq beyond a block's rows (several query blocks), H = 1, 2, 8, batch 1 and
// 65536; packed QKV (one buffer, offsets 0, H·D, 2·H·D) and separate inputs
// with nonzero offsets and rows wider than H·D. The output buffer starts as
// NaN, so an element the kernel skips fails. Tolerances come from an FP32
// error bound per row (score rounding grows with D and the scores' size, sums
// with Nk), not a fixed epsilon. Non-finite cases: a NaN query row reaches
// exactly its own outputs; scores near ±250 do not overflow; a first tile of
// -inf scores weighs nothing; +inf or all -inf scores make a row NaN; inf and
// NaN in V reach their column, as the unfused ops give. The tensor-core
// kernel for short key sets (Nk <= 64, D > 32; 3xTF32, so its tolerance adds
// 2^-18 per product) has its own awkward shapes (one key, odd Nk, the edges of
// its key tiles and of its limit, D not a multiple of 4, 1/3/8 heads, batch 1
// and 65536, query blocks and a warp without rows, float4 and scalar staging
// from one packed or three buffers), the non-finite cases run on both kernels
// (the tensor-core one recomputing such rows in FP32), and a shape's
// first launch happens inside a CUDA graph capture. Skips visibly without
// a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/attention.h"
#include "loka/engine.h"
#include "loka/session.h"
#include "model_builder.h"
#include "test_support.h"

namespace loka {
namespace {

using testing::DeviceBytes;
using testing::replay_in_cuda_graph;

class CudaAttention : public testing::CudaTest {};

constexpr double kUnitRoundoff = 0x1p-24;

/// Y of the spec in double, and per element how far an FP32 evaluation may be from it.
struct Reference {
  std::vector<double> y;
  std::vector<double> tolerance;
};

/// s_j = (q · k_j) · scale, p = softmax_j(s) with the max subtracted, Y = Σ_j p_j v_j; a NaN score
/// makes the row NaN, exp(-inf - -inf) = NaN makes a row of -inf scores NaN. The bound: a score
/// is off by up to (D + 2)·u·|scale|·Σ_e|q_e k_e| (FMA chain, the slice sum, the multiply), which
/// moves each p_j relatively by twice that; the sums over Nk keys, the exps and the rescales add
/// up to (4·Nk + 32)·u relatively; each relative error reaches Y scaled by max |v|. The tensor-core
/// kernel's split products add 2^-18 relatively to each score term and to each sum of Y.
Reference reference_attention(const float* q, const float* k, const float* v, const cuda::AttentionArgs& a) {
  const int64_t out_stride = a.heads * a.head_dim;
  Reference ref;
  ref.y.assign(static_cast<size_t>(a.batch * a.nq * out_stride), 0.0);
  ref.tolerance.assign(ref.y.size(), 0.0);
  // On the tensor cores each product of Q·Kᵀ and P·V is 3xTF32, within 3·2^-20 of FP32's.
  const double product = cuda::attention_runs_on_tensor_cores(a) ? 0x1p-18 : 0.0;
  std::vector<double> s(static_cast<size_t>(a.nk));
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      const auto key = [&](int64_t j) { return k + (b * a.nk + j) * a.k_stride + a.k_offset + h * a.head_dim; };
      const auto value = [&](int64_t j) { return v + (b * a.nk + j) * a.v_stride + a.v_offset + h * a.head_dim; };
      double v_max = 0;
      for (int64_t j = 0; j < a.nk; ++j)
        for (int64_t e = 0; e < a.head_dim; ++e)
          if (std::isfinite(value(j)[e])) v_max = std::max(v_max, std::fabs(static_cast<double>(value(j)[e])));
      for (int64_t i = 0; i < a.nq; ++i) {
        const float* query = q + (b * a.nq + i) * a.q_stride + a.q_offset + h * a.head_dim;
        double max = -INFINITY, magnitude = 0;
        bool nan = false;
        for (int64_t j = 0; j < a.nk; ++j) {
          double dot = 0, absolute = 0;
          for (int64_t e = 0; e < a.head_dim; ++e) {
            dot += static_cast<double>(query[e]) * key(j)[e];
            absolute += std::fabs(static_cast<double>(query[e]) * key(j)[e]);
          }
          s[static_cast<size_t>(j)] = dot * a.scale;
          nan = nan || std::isnan(s[static_cast<size_t>(j)]);
          max = std::max(max, s[static_cast<size_t>(j)]);
          if (std::isfinite(absolute)) magnitude = std::max(magnitude, absolute * std::fabs(a.scale));
        }
        if (nan) max = NAN;
        double sum = 0;
        for (int64_t j = 0; j < a.nk; ++j) sum += std::exp(s[static_cast<size_t>(j)] - max);
        const double tolerance =
            v_max * (4.0 * (static_cast<double>(a.head_dim + 2) * kUnitRoundoff + product) * magnitude +
                     static_cast<double>(4 * a.nk + 32) * kUnitRoundoff + product);
        for (int64_t e = 0; e < a.head_dim; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < a.nk; ++j) acc += std::exp(s[static_cast<size_t>(j)] - max) / sum * value(j)[e];
          const size_t at = static_cast<size_t>((b * a.nq + i) * out_stride + h * a.head_dim + e);
          ref.y[at] = acc;
          ref.tolerance[at] = tolerance;
        }
      }
    }
  return ref;
}

/// Expects every element within its tolerance (NaN matches NaN, infinities must be equal);
/// reports the count and the first mismatches as (b, i, h, e).
void expect_matches(const std::vector<float>& got, const Reference& ref, const cuda::AttentionArgs& a) {
  ASSERT_EQ(got.size(), ref.y.size());
  size_t mismatches = 0;
  for (size_t at = 0; at < got.size(); ++at) {
    const double x = got[at], want = ref.y[at];
    bool ok;
    if (std::isnan(want) || std::isnan(x)) ok = std::isnan(want) && std::isnan(x);
    else if (std::isinf(want) || std::isinf(x)) ok = x == want;
    else ok = std::fabs(x - want) <= ref.tolerance[at];
    if (ok) continue;
    if (mismatches++ < 5) {
      const int64_t e = static_cast<int64_t>(at) % a.head_dim, h = static_cast<int64_t>(at) / a.head_dim % a.heads;
      const int64_t token = static_cast<int64_t>(at) / (a.heads * a.head_dim);
      ADD_FAILURE() << "Y[b=" << token / a.nq << ", i=" << token % a.nq << ", h=" << h << ", e=" << e << "]: got " << x
                    << ", expected " << want << " (allowed " << ref.tolerance[at] << ")";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << got.size() << " outputs";
}

/// Runs the kernel on host inputs (`packed`: q, k and v are one tensor, uploaded once) into an
/// output that starts as NaN everywhere; `in_graph`: the launch is captured in a CUDA graph (on a
/// stream of its own, as the runtime captures a batch bucket's first run) and the graph replayed.
std::vector<float> run_kernel(cuda::AttentionArgs args, const Tensor& q, const Tensor& k, const Tensor& v,
                              bool packed, bool in_graph = false) {
  const size_t outputs = static_cast<size_t>(args.batch * args.nq * args.heads * args.head_dim);
  DeviceBytes d_q(q), d_y(outputs * sizeof(float));
  std::vector<std::unique_ptr<DeviceBytes>> separate;
  args.q = d_q.as<float>();
  if (packed) {
    args.k = args.v = d_q.as<float>();
  } else {
    separate.push_back(std::make_unique<DeviceBytes>(k));
    separate.push_back(std::make_unique<DeviceBytes>(v));
    args.k = separate[0]->as<float>();
    args.v = separate[1]->as<float>();
  }
  args.y = d_y.as<float>();
  EXPECT_EQ(cudaMemset(d_y.get(), 0xFF, outputs * sizeof(float)), cudaSuccess);  // all-ones bits: NaN
  if (!in_graph) {
    const Status launched = cuda::launch_attention(args, nullptr);
    EXPECT_TRUE(launched) << launched.message();
    return d_y.download_vector<float>(outputs);
  }
  const Status replayed =
      replay_in_cuda_graph([&](cudaStream_t stream) { return cuda::launch_attention(args, stream); }, 2);
  EXPECT_TRUE(replayed) << "attention in a CUDA graph: " << replayed.message();
  return d_y.download_vector<float>(outputs);
}

struct Case {
  int64_t batch, nq, nk, heads, dim;
  bool packed;           ///< one [B, N, 3·H·D] buffer (nq == nk); else separate inputs, offset and wider
  bool aligned = false;  ///< separate inputs whose rows and heads start 16-byte aligned (needs H·D % 4 == 0)
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.batch) + " Nq=" + std::to_string(c.nq) + " Nk=" + std::to_string(c.nk) +
         " H=" + std::to_string(c.heads) + " D=" + std::to_string(c.dim) +
         (c.packed ? " packed" : c.aligned ? " separate aligned" : " separate");
}

/// The args and random inputs of a case: packed at offsets 0, H·D, 2·H·D; separate inputs put
/// head 0 at columns 3, 5 and 1 of rows 5, 12 and 5 columns wider than the heads need, or
/// (aligned) at columns 4, 8 and 0 of rows 8, 12 and 4 columns wider.
struct Problem {
  cuda::AttentionArgs args;
  Tensor q, k, v;
};

Problem make_problem(const Case& c, std::mt19937& rng, float low = -1.0f, float high = 1.0f) {
  Problem p;
  cuda::AttentionArgs& a = p.args;
  a.batch = c.batch, a.nq = c.nq, a.nk = c.nk, a.heads = c.heads, a.head_dim = c.dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const int64_t hd = c.heads * c.dim;
  if (c.packed) {
    a.q_stride = a.k_stride = a.v_stride = 3 * hd;
    a.q_offset = 0, a.k_offset = hd, a.v_offset = 2 * hd;
    p.q = p.k = p.v = testing::random_tensor(rng, {c.batch, c.nq, 3 * hd}, low, high);
  } else if (c.aligned) {
    a.q_offset = 4, a.k_offset = 8, a.v_offset = 0;
    a.q_stride = hd + 8, a.k_stride = hd + 12, a.v_stride = hd + 4;
    p.q = testing::random_tensor(rng, {c.batch, c.nq, a.q_stride}, low, high);
    p.k = testing::random_tensor(rng, {c.batch, c.nk, a.k_stride}, low, high);
    p.v = testing::random_tensor(rng, {c.batch, c.nk, a.v_stride}, low, high);
  } else {
    a.q_offset = 3, a.k_offset = 5, a.v_offset = 1;
    a.q_stride = hd + 5, a.k_stride = hd + 12, a.v_stride = hd + 5;
    p.q = testing::random_tensor(rng, {c.batch, c.nq, a.q_stride}, low, high);
    p.k = testing::random_tensor(rng, {c.batch, c.nk, a.k_stride}, low, high);
    p.v = testing::random_tensor(rng, {c.batch, c.nk, a.v_stride}, low, high);
  }
  return p;
}

void expect_kernel_matches_reference(const Problem& p, bool packed) {
  const Reference ref = reference_attention(p.q.data<float>(), p.k.data<float>(), p.v.data<float>(), p.args);
  const std::vector<float> y = run_kernel(p.args, p.q, p.k, p.v, packed);
  expect_matches(y, ref, p.args);
}

TEST_F(CudaAttention, MatchesTheSpecOnEveryTierAndAwkwardShape) {
  std::mt19937 rng(41);
  for (const Case c : {Case{1, 1, 1, 1, 1, false}, Case{2, 5, 33, 2, 8, false}, Case{3, 40, 100, 8, 16, false},
                       Case{2, 40, 40, 8, 16, true},     // the ranker's self-attention over 40 tokens
                       Case{4, 24, 24, 1, 128, true},    // DHEN-style single head of 128
                       Case{2, 17, 9, 2, 17, false},     // D just past a slice: two slices, one nearly empty
                       Case{3, 6, 65, 2, 4, false},      // a tile and a third: 32 + 32 + 1 keys
                       Case{2, 7, 100, 1, 64, false}, Case{2, 31, 31, 2, 32, true},
                       Case{1, 300, 50, 2, 16, false},   // Nq past 256 rows: two query blocks of 150
                       Case{1, 70, 20, 1, 128, false},   // Nq past 32 rows of 8 slices: three query blocks
                       Case{3, 1, 100, 8, 16, false},    // one query against many keys
                       Case{65536, 3, 3, 2, 4, true},    // batch 65536: 131072 (b, h) on gridDim.x
                       Case{65536, 2, 5, 1, 1, false}}) {
    SCOPED_TRACE(describe(c));
    expect_kernel_matches_reference(make_problem(c, rng), c.packed);
  }
}

TEST_F(CudaAttention, NanInOneQueryRowReachesExactlyThatRow) {
  std::mt19937 rng(43);
  for (const Case c : {Case{2, 40, 40, 8, 16, true}, Case{2, 24, 24, 1, 128, false}, Case{2, 5, 33, 2, 17, false}}) {
    SCOPED_TRACE(describe(c));
    Problem p = make_problem(c, rng);
    // Packed: the NaN lands in Q's columns of the one buffer, K's and V's stay finite.
    const int64_t b = 1, i = 3, h = c.heads - 1;
    p.q.data<float>()[(b * c.nq + i) * p.args.q_stride + p.args.q_offset + h * c.dim + c.dim / 2] = NAN;
    const std::vector<float> y = run_kernel(p.args, p.q, p.k, p.v, c.packed);
    const int64_t hd = c.heads * c.dim;
    int64_t nan_count = 0;
    for (size_t at = 0; at < y.size(); ++at) {
      const int64_t token = static_cast<int64_t>(at) / hd, head = static_cast<int64_t>(at) % hd / c.dim;
      const bool in_row = token == b * c.nq + i && head == h;
      EXPECT_EQ(std::isnan(y[at]), in_row) << "output " << at;
      nan_count += std::isnan(y[at]) ? 1 : 0;
    }
    EXPECT_EQ(nan_count, c.dim);
    // And the rest still matches the spec (which says the same about NaN).
    expect_kernel_matches_reference(p, c.packed);
  }
}

TEST_F(CudaAttention, LargeScoresDoNotOverflow) {
  // Inputs in [-4, 4] at scale 1 over 16 dims: scores up to about ±250, where exp without the
  // max subtracted overflows FP32 (exp(89) does); with it every output stays finite.
  std::mt19937 rng(47);
  for (const Case c : {Case{2, 40, 40, 8, 16, true}, Case{2, 20, 70, 2, 16, false}}) {
    SCOPED_TRACE(describe(c));
    Problem p = make_problem(c, rng, -4.0f, 4.0f);
    p.args.scale = 1.0f;
    const Reference ref = reference_attention(p.q.data<float>(), p.k.data<float>(), p.v.data<float>(), p.args);
    const std::vector<float> y = run_kernel(p.args, p.q, p.k, p.v, c.packed);
    for (size_t at = 0; at < y.size(); ++at) ASSERT_TRUE(std::isfinite(y[at])) << "output " << at;
    expect_matches(y, ref, p.args);
  }
}

TEST_F(CudaAttention, NonFiniteScoresAndValuesPropagateAsTheUnfusedOps) {
  // D = 2, scale 1; query rows (1, 0) and (-1, 0) see scores ±k_j[0], 40 keys (three 16-key steps).
  std::mt19937 rng(53);
  Problem p = make_problem(Case{3, 2, 40, 1, 2, false}, rng);
  cuda::AttentionArgs& a = p.args;
  a.scale = 1.0f;
  const auto q_at = [&](int64_t b, int64_t i) { return p.q.data<float>() + (b * a.nq + i) * a.q_stride + a.q_offset; };
  const auto k_at = [&](int64_t b, int64_t j) { return p.k.data<float>() + (b * a.nk + j) * a.k_stride + a.k_offset; };
  const auto v_at = [&](int64_t b, int64_t j) { return p.v.data<float>() + (b * a.nk + j) * a.v_stride + a.v_offset; };
  for (int64_t b = 0; b < 3; ++b) {
    q_at(b, 0)[0] = 1.0f, q_at(b, 0)[1] = 0.0f;
    q_at(b, 1)[0] = -1.0f, q_at(b, 1)[1] = 0.0f;
  }
  // Sample 0: keys 0..19 at -inf. Row 0 scores -inf there (the first step entirely): they weigh
  // nothing and the row is the softmax of the other 20; row 1 scores +inf there: NaN.
  for (int64_t j = 0; j < 20; ++j) k_at(0, j)[0] = -INFINITY, k_at(0, j)[1] = 0.0f;
  // Sample 1: every key at -inf. Row 0: all scores -inf, NaN as ONNX Softmax gives; row 1: +inf, NaN.
  for (int64_t j = 0; j < a.nk; ++j) k_at(1, j)[0] = -INFINITY, k_at(1, j)[1] = 0.0f;
  // Sample 2: finite scores, V[5] = (inf, 1) and V[33] = (0, NaN): column 0 is inf, column 1 NaN.
  v_at(2, 5)[0] = INFINITY;
  v_at(2, 33)[1] = NAN;
  const Reference ref = reference_attention(p.q.data<float>(), p.k.data<float>(), p.v.data<float>(), a);
  const std::vector<float> y = run_kernel(a, p.q, p.k, p.v, false);
  ASSERT_EQ(y.size(), 12u);
  EXPECT_TRUE(std::isfinite(y[0]) && std::isfinite(y[1])) << y[0] << " " << y[1];
  for (size_t at : {2, 3, 4, 5, 6, 7, 9, 11}) EXPECT_TRUE(std::isnan(y[at])) << "output " << at << ": " << y[at];
  EXPECT_EQ(y[8], INFINITY);
  EXPECT_EQ(y[10], INFINITY);
  expect_matches(y, ref, a);
}

// ------------------------------------------- short key sets: exact softmax in registers ---

TEST_F(CudaAttention, TheTensorCorePathMatchesTheSpecOnAwkwardShapes) {
  // Nk <= 64 with D > 32 takes the tensor-core kernel (dims padded to 64 or 128, keys to a multiple
  // of 8, one warp per 16 query rows); Nk = 65 is the first the online kernel takes again, as it
  // takes every D <= 32. Packed inputs with H·D % 4 == 0 and "aligned" separate ones take its
  // float4 staging, the others its scalar staging.
  std::mt19937 rng(67);
  for (const Case c : {Case{3, 5, 1, 3, 33, false},            // one key, D not a multiple of 4
                       Case{1, 1, 1, 1, 37, false},            // one key, one query
                       Case{2, 33, 33, 3, 35, true},           // packed but D = 35: scalar staging
                       Case{2, 35, 35, 1, 128, true},          // DHEN's head: three warps a unit
                       Case{2, 35, 35, 1, 128, false, true},   // ... from three aligned buffers
                       Case{2, 34, 35, 1, 128, false},         // ... unaligned, Nq != Nk
                       Case{3, 41, 41, 8, 36, true},           // eight heads, 41 tokens, D = 36 of 64 padded
                       Case{2, 40, 40, 8, 64, false, true},    // ... three aligned buffers
                       Case{1, 40, 40, 8, 40, true},           // batch 1
                       Case{2, 4, 32, 2, 48, false},           // the last Nk of the 32-key slots
                       Case{2, 4, 33, 2, 64, false, true},     // the first of the 48-key slots
                       Case{2, 3, 48, 3, 65, false},           // the last of them; D = 65 of 128 padded
                       Case{2, 3, 49, 2, 96, false, true},     // the first of the 64-key slots
                       Case{2, 7, 64, 2, 64, false},           // Nk at the limit, four lanes a row
                       Case{2, 64, 64, 2, 127, true},          // ... packed, eight lanes, D = 127
                       Case{2, 9, 65, 3, 33, false},           // just above: the online kernel
                       Case{2, 65, 65, 1, 40, true},           // ... packed
                       Case{2, 17, 33, 3, 33, false},          // Nq != Nk, scalar staging
                       Case{1, 130, 20, 2, 48, false},         // Nq past 64 rows: three query blocks
                       Case{2, 65, 64, 1, 40, true},           // ... two of 33 and 32: a warp without rows
                       Case{1, 100, 35, 1, 128, false, true},  // ... two of 50 rows, eight lanes a row
                       Case{2, 1, 64, 8, 64, false, true},     // one query against 64 keys
                       Case{65536, 3, 3, 1, 100, true},        // batch 65536, float4 staging
                       Case{65536, 3, 5, 3, 33, false}}) {     // ... scalar staging, three heads
    SCOPED_TRACE(describe(c));
    expect_kernel_matches_reference(make_problem(c, rng), c.packed);
  }
}

TEST_F(CudaAttention, NonFiniteInputsPropagateOnBothPathsAndEveryLaneSplit) {
  // The scenario of NonFiniteScoresAndValuesPropagateAsTheUnfusedOps for both head-dim widths of
  // the tensor-core kernel (whose warps recompute such rows in FP32 FMAs) and for the online
  // kernel (D = 2, and Nk = 100), plus a zero probability times an infinite value. Query rows (1, 0, ...) and (-1, 0, ...) at scale 1 score
  // ±k_j[0]; the other dims of the queries are 0, so finite keys give finite scores.
  struct Shape {
    int64_t nk, dim;
  };
  for (const Shape shape : {Shape{40, 2}, Shape{35, 40}, Shape{64, 64}, Shape{35, 128}, Shape{100, 2}}) {
    SCOPED_TRACE("Nk=" + std::to_string(shape.nk) + " D=" + std::to_string(shape.dim));
    std::mt19937 rng(71);
    Problem p = make_problem(Case{4, 2, shape.nk, 1, shape.dim, false}, rng);
    cuda::AttentionArgs& a = p.args;
    a.scale = 1.0f;
    const auto row = [&](Tensor& t, int64_t n, int64_t stride, int64_t offset, int64_t b, int64_t i) {
      return t.data<float>() + (b * n + i) * stride + offset;
    };
    const auto q_at = [&](int64_t b, int64_t i) { return row(p.q, a.nq, a.q_stride, a.q_offset, b, i); };
    const auto k_at = [&](int64_t b, int64_t j) { return row(p.k, a.nk, a.k_stride, a.k_offset, b, j); };
    const auto v_at = [&](int64_t b, int64_t j) { return row(p.v, a.nk, a.v_stride, a.v_offset, b, j); };
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t e = 0; e < a.head_dim; ++e) {
        q_at(b, 0)[e] = e == 0 ? 1.0f : 0.0f;
        q_at(b, 1)[e] = e == 0 ? -1.0f : 0.0f;
      }
    // Samples 0 and 3: keys 0..19 at -inf (row 0 weighs them 0, row 1 scores +inf: NaN). Sample 1:
    // every key at -inf (row 0 all -inf: NaN). Sample 2: V[5][0] = inf, V[33][D - 1] = NaN. Sample
    // 3: also V[3][0] = inf, which row 0 multiplies by a zero probability: NaN, as the MatMul.
    for (int64_t b : {0, 3})
      for (int64_t j = 0; j < 20; ++j) k_at(b, j)[0] = -INFINITY;
    for (int64_t j = 0; j < a.nk; ++j) k_at(1, j)[0] = -INFINITY;
    v_at(2, 5)[0] = INFINITY;
    v_at(2, 33)[a.head_dim - 1] = NAN;
    v_at(3, 3)[0] = INFINITY;
    const Reference ref = reference_attention(p.q.data<float>(), p.k.data<float>(), p.v.data<float>(), a);
    const std::vector<float> y = run_kernel(a, p.q, p.k, p.v, false);
    const auto y_at = [&](int64_t b, int64_t i, int64_t e) { return y[static_cast<size_t>((b * a.nq + i) * a.head_dim + e)]; };
    for (int64_t e = 0; e < a.head_dim; ++e) {
      SCOPED_TRACE("column " + std::to_string(e));
      EXPECT_TRUE(std::isfinite(y_at(0, 0, e)));
      EXPECT_TRUE(std::isnan(y_at(0, 1, e)));
      EXPECT_TRUE(std::isnan(y_at(1, 0, e)));
      EXPECT_TRUE(std::isnan(y_at(1, 1, e)));
      for (int64_t i = 0; i < 2; ++i) {
        if (e == a.head_dim - 1) EXPECT_TRUE(std::isnan(y_at(2, i, e))) << y_at(2, i, e);
        else if (e == 0) EXPECT_EQ(y_at(2, i, e), INFINITY);
        else EXPECT_TRUE(std::isfinite(y_at(2, i, e))) << y_at(2, i, e);
      }
      EXPECT_EQ(std::isnan(y_at(3, 0, e)), e == 0) << y_at(3, 0, e);
      EXPECT_TRUE(std::isnan(y_at(3, 1, e)));
    }
    expect_matches(y, ref, a);
  }
}

TEST_F(CudaAttention, AFirstLaunchInsideAGraphCaptureReplaysAsItRunsEagerly) {
  // The runtime's first run of a batch bucket is its capture, so a shape's first launch (when the
  // tensor-core path asks the runtime its shared-memory limit) happens inside one.
  // D = 40 from aligned buffers with 6 keys: a kernel and block shape no earlier test here launches.
  std::mt19937 rng(73);
  const Problem p = make_problem(Case{37, 9, 6, 5, 40, false, true}, rng);
  const std::vector<float> y = run_kernel(p.args, p.q, p.k, p.v, false, /*in_graph=*/true);
  expect_matches(y, reference_attention(p.q.data<float>(), p.k.data<float>(), p.v.data<float>(), p.args), p.args);
}

TEST_F(CudaAttention, RefusesWhatItCannotRunWithAReason) {
  EXPECT_TRUE(cuda::attention_can_implement(8, 128));
  EXPECT_TRUE(cuda::attention_can_implement(1, 1));
  const Status wide = cuda::attention_can_implement(1, 129);
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.message().find("head_dim=129"), std::string::npos) << wide.message();
  EXPECT_NE(wide.message().find("128"), std::string::npos) << wide.message();
  EXPECT_FALSE(cuda::attention_can_implement(1, 0));
  EXPECT_FALSE(cuda::attention_can_implement(0, 16));

  cuda::AttentionArgs a;
  a.batch = 2, a.nq = 3, a.nk = 4, a.heads = 2, a.head_dim = 8;
  a.q_stride = a.k_stride = a.v_stride = 16;
  EXPECT_TRUE(cuda::attention_check_args(a));
  cuda::AttentionArgs no_keys = a;
  no_keys.nk = 0;
  testing::expect_one_line_error(cuda::attention_check_args(no_keys), {"Nk=0"});
  cuda::AttentionArgs past_row = a;
  past_row.k_offset = 1;  // 1 + 2·8 > 16
  testing::expect_one_line_error(cuda::attention_check_args(past_row), {"K", "16"});
  cuda::AttentionArgs huge_heads = a;
  huge_heads.heads = int64_t{1} << 62;  // heads·head_dim overflows: still refused, not wrapped
  EXPECT_FALSE(cuda::attention_check_args(huge_heads));
  cuda::AttentionArgs negative = a;
  negative.q_offset = -1;
  EXPECT_FALSE(cuda::attention_check_args(negative));

  // Empty batches or query sets launch nothing (null pointers allowed); a real launch needs them.
  cuda::AttentionArgs empty = a;
  empty.batch = 0;
  EXPECT_TRUE(cuda::launch_attention(empty, nullptr));
  empty = a;
  empty.nq = 0;
  EXPECT_TRUE(cuda::launch_attention(empty, nullptr));
  EXPECT_FALSE(cuda::launch_attention(a, nullptr));
  EXPECT_FALSE(cuda::launch_attention(no_keys, nullptr));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ------------------------------------------------- the device op, end to end ---

using Attributes = std::vector<std::pair<std::string, testing::TestAttribute>>;

/// One ai.loka.Attention node over one packed [B, N, 3·H·D] input.
std::string packed_model(int64_t n, int64_t heads, int64_t dim) {
  const int64_t hd = heads * dim;
  testing::ModelBuilder builder(17);
  builder.opset("ai.loka", 1);
  builder.input("qkv", DType::kFloat32, {-1, n, 3 * hd});
  const Attributes attributes = {{"heads", heads},         {"head_dim", dim},
                                 {"scale", 1.0f / std::sqrt(static_cast<float>(dim))},
                                 {"q_offset", int64_t{0}}, {"k_offset", hd},
                                 {"v_offset", 2 * hd}};
  builder.node("Attention", {"qkv", "qkv", "qkv"}, {"y"}, attributes, "attention", "ai.loka");
  builder.output_unshaped("y", DType::kFloat32);
  return builder.serialize();
}

TEST_F(CudaAttention, TheDeviceOpMatchesTheCpuRuntime) {
  std::mt19937 rng(59);
  {
    SCOPED_TRACE("packed: the ranker's 8 heads of 16 over 40 tokens");
    testing::expect_runtimes_agree(packed_model(40, 8, 16), {testing::random_tensor(rng, {300, 40, 384})}, {1, 7, 300}, 2e-5f);
  }
  {
    SCOPED_TRACE("packed: one head of 128 over 24 tokens");
    testing::expect_runtimes_agree(packed_model(24, 1, 128), {testing::random_tensor(rng, {64, 24, 384})}, {1, 64}, 2e-5f);
  }
  {
    SCOPED_TRACE("separate Q, K, V: offsets, wider rows, Nq != Nk");
    testing::ModelBuilder builder(17);
    builder.opset("ai.loka", 1);
    builder.input("q", DType::kFloat32, {-1, 5, 40}).input("k", DType::kFloat32, {-1, 33, 37});
    builder.input("v", DType::kFloat32, {-1, 33, 34});
    const Attributes attributes = {{"heads", int64_t{2}},    {"head_dim", int64_t{17}}, {"scale", 0.25f},
                                   {"q_offset", int64_t{3}}, {"k_offset", int64_t{0}},  {"v_offset", int64_t{0}}};
    builder.node("Attention", {"q", "k", "v"}, {"y"}, attributes, "attention", "ai.loka");
    builder.output_unshaped("y", DType::kFloat32);
    testing::expect_runtimes_agree(builder.serialize(),
                          {testing::random_tensor(rng, {9, 5, 40}), testing::random_tensor(rng, {9, 33, 37}),
                           testing::random_tensor(rng, {9, 33, 34})},
                          {1, 9}, 2e-5f);
  }
}

TEST_F(CudaAttention, TheDeviceOpRefusesAHeadItCannotHoldWhenPlanned) {
  // The CPU runtime takes any head_dim; the CUDA plan says why it cannot, in one line.
  const std::string model = packed_model(4, 1, 129);
  const auto bytes = std::as_bytes(std::span(model.data(), model.size()));
  EngineOptions options;
  options.device = Device::kCuda;
  options.max_batch = 8;  // the engine traces symbolic shapes at batch 3
  auto gpu = Engine::load_bytes(bytes, options);
  Status status = gpu.status();
  if (gpu) {
    std::mt19937 rng(61);
    const std::vector<Tensor> inputs = {testing::random_tensor(rng, {2, 4, 3 * 129})};
    status = (*gpu)->new_session()->run(inputs).status();
  }
  testing::expect_one_line_error(status, {"head_dim=129"});
}

}  // namespace
}  // namespace loka
