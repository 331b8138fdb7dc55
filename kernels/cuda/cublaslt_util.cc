// ============================================================================
// kernels/cuda/cublaslt_util.cc — shared cuBLASLt plumbing.
// ============================================================================
#include "kernels/cuda/cublaslt_util.h"

#include <algorithm>

#include "kernels/registry/cublaslt_tiles.h"

namespace loka::cuda {
namespace {

/// The header's enum value of the rows x cols tile, for the shapes of the registry's menu.
constexpr int header_tile_id(int rows, int cols) {
  if (rows == 128 && cols == 128) return CUBLASLT_MATMUL_TILE_128x128;
  if (rows == 128 && cols == 256) return CUBLASLT_MATMUL_TILE_128x256;
  if (rows == 256 && cols == 128) return CUBLASLT_MATMUL_TILE_256x128;
  if (rows == 128 && cols == 64) return CUBLASLT_MATMUL_TILE_128x64;
  if (rows == 64 && cols == 128) return CUBLASLT_MATMUL_TILE_64x128;
  if (rows == 64 && cols == 256) return CUBLASLT_MATMUL_TILE_64x256;
  if (rows == 256 && cols == 64) return CUBLASLT_MATMUL_TILE_256x64;
  if (rows == 64 && cols == 64) return CUBLASLT_MATMUL_TILE_64x64;
  if (rows == 128 && cols == 32) return CUBLASLT_MATMUL_TILE_128x32;
  if (rows == 64 && cols == 32) return CUBLASLT_MATMUL_TILE_64x32;
  if (rows == 128 && cols == 16) return CUBLASLT_MATMUL_TILE_128x16;
  if (rows == 64 && cols == 16) return CUBLASLT_MATMUL_TILE_64x16;
  if (rows == 128 && cols == 8) return CUBLASLT_MATMUL_TILE_128x8;
  if (rows == 64 && cols == 8) return CUBLASLT_MATMUL_TILE_64x8;
  return -1;
}

// The registry (CPU-side, no cuBLASLt header) names tiles by their enum values: they must be this header's.
static_assert(std::all_of(kernels::kCublasLtTileMenu.begin(), kernels::kCublasLtTileMenu.end(),
                          [](const kernels::CublasLtTile& tile) { return header_tile_id(tile.rows, tile.cols) == tile.id; }),
              "kernels/registry/cublaslt_tiles.h's tile ids differ from cublasLt.h's cublasLtMatmulTile_t");

template <typename T>
T config_value(const cublasLtMatmulAlgo_t& algorithm, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algorithm, attribute, &value, sizeof value, &written);
  return value;
}

/// The ids an array-valued capability lists (tiles, stages); empty when it lists none.
std::vector<uint32_t> capability_ids(const cublasLtMatmulAlgo_t& algorithm, cublasLtMatmulAlgoCapAttributes_t attribute) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algorithm, attribute, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS) return {};
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  if (ids.empty() || cublasLtMatmulAlgoCapGetAttribute(&algorithm, attribute, ids.data(), ids.size() * sizeof(uint32_t),
                                                       &bytes) != CUBLAS_STATUS_SUCCESS)
    return {};
  std::erase(ids, 0u);  // "UNDEFINED" stands for none
  return ids;
}

/// `first`, then `rest` without repeats.
template <typename T>
std::vector<T> first_then(T first, const std::vector<T>& rest) {
  std::vector<T> values{first};
  for (const T value : rest)
    if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
  return values;
}

bool accepted(const CublasLtPlan& plan, const cublasLtMatmulAlgo_t& configured) {
  cublasLtMatmulHeuristicResult_t result{};
  return cublasLtMatmulAlgoCheck(cublaslt_thread_handle(), plan.operation, plan.a, plan.b, plan.c_layout(), plan.d,
                                 &configured, &result) == CUBLAS_STATUS_SUCCESS &&
         result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= kGemmWorkspaceBytes;
}

}  // namespace

std::string cublaslt_error(cublasStatus_t status, const char* what) {
  return std::string("cuBLASLt ") + what + " failed: " + cublasLtGetStatusString(status);
}

cublasLtHandle_t cublaslt_thread_handle() {
  thread_local struct Holder {
    cublasLtHandle_t handle = nullptr;
    Holder() { cublasLtCreate(&handle); }
    ~Holder() {
      if (handle) cublasLtDestroy(handle);
    }
  } holder;
  return holder.handle;
}

Status set_cublaslt_epilogue(cublasLtMatmulDesc_t operation, GemmEpilogue epilogue, bool has_bias, bool tanh_gelu) {
  cublasLtEpilogue_t value = CUBLASLT_EPILOGUE_DEFAULT;
  switch (epilogue) {
    case GemmEpilogue::kNone: value = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case GemmEpilogue::kRelu: value = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case GemmEpilogue::kGelu:  // CUBLASLT_EPILOGUE_GELU is the tanh approximation; LoKA's gelu is exact (erf)
      if (!tanh_gelu) return Status::error("cuBLASLt has no exact GELU epilogue: apply GELU after the GEMM");
      value = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      break;
  }
  LOKA_LT_CHECK(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &value, sizeof value), "EPILOGUE");
  return Status::ok();
}

Result<std::vector<cublasLtMatmulAlgo_t>> cublaslt_algorithms(const CublasLtPlan& plan, int max_count,
                                                              uint32_t min_alignment_bytes, const std::string& what) {
  cublasLtMatmulPreference_t preference = nullptr;
  LOKA_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference), "PreferenceCreate");
  const size_t workspace = kGemmWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &min_alignment_bytes, sizeof min_alignment_bytes);
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(max_count < 1 ? 1 : max_count));
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublaslt_thread_handle(), plan.operation, plan.a, plan.b,
                                                               plan.c_layout(), plan.d, preference,
                                                               static_cast<int>(results.size()), results.data(), &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status::error("cuBLASLt has no algorithm for " + what +
                         (status != CUBLAS_STATUS_SUCCESS ? std::string(": ") + cublasLtGetStatusString(status) : ""));
  std::vector<cublasLtMatmulAlgo_t> algorithms;
  for (int i = 0; i < found; ++i)
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) algorithms.push_back(results[static_cast<size_t>(i)].algo);
  if (algorithms.empty()) return Status::error("cuBLASLt has no usable algorithm for " + what);
  return algorithms;
}

Result<cublasLtMatmulAlgo_t> configure_split_k(const CublasLtPlan& plan, cublasLtMatmulAlgo_t algorithm, int split_k,
                                               const std::string& what) {
  const std::string refused = what + ": cuBLASLt refuses split-K " + std::to_string(split_k);
  int32_t supported = 0;
  uint32_t schemes = 0;
  size_t written = 0;
  LOKA_LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algorithm, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &supported,
                                                  sizeof supported, &written), "ALGO_CAP_SPLITK_SUPPORT");
  if (supported == 0) return Status::error(refused + " (the heuristic's algorithm has no split-K)");
  LOKA_LT_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algorithm, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof schemes, &written), "ALGO_CAP_REDUCTION_SCHEME_MASK");
  const int32_t splits = split_k;
  for (const uint32_t scheme : {static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE),
                                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE),
                                static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE)}) {
    if ((schemes & scheme) == 0) continue;
    cublasLtMatmulAlgo_t configured = algorithm;
    LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits),
                  "ALGO_CONFIG_SPLITK_NUM");
    LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                       sizeof scheme), "ALGO_CONFIG_REDUCTION_SCHEME");
    if (accepted(plan, configured)) return configured;
  }
  return Status::error(refused + " (no reduction scheme passes cublasLtMatmulAlgoCheck)");
}

Result<cublasLtMatmulAlgo_t> configure_tile(const CublasLtPlan& plan, cublasLtMatmulAlgo_t algorithm, int tile,
                                            int stages, const std::string& what) {
  const int32_t id = config_value<int32_t>(algorithm, CUBLASLT_ALGO_CONFIG_ID);
  const std::string refused = what + ": cuBLASLt refuses tile " + std::to_string(tile) +
                              (stages > 0 ? " with stages " + std::to_string(stages) : "") + " for algorithm " +
                              std::to_string(id);
  const std::vector<uint32_t> tiles = capability_ids(algorithm, CUBLASLT_ALGO_CAP_TILE_IDS);
  if (std::find(tiles.begin(), tiles.end(), static_cast<uint32_t>(tile)) == tiles.end())
    return Status::error(refused + " (not among its " + std::to_string(tiles.size()) + " tile ids)");
  const std::vector<uint32_t> stage_ids = capability_ids(algorithm, CUBLASLT_ALGO_CAP_STAGES_IDS);
  if (stages > 0 && std::find(stage_ids.begin(), stage_ids.end(), static_cast<uint32_t>(stages)) == stage_ids.end())
    return Status::error(refused + " (not among its " + std::to_string(stage_ids.size()) + " stage ids)");

  // The heuristic's values first, then the alternatives, in a fixed order.
  const std::vector<uint32_t> stage_order =
      stages > 0 ? std::vector<uint32_t>{static_cast<uint32_t>(stages)}
                 : first_then(config_value<uint32_t>(algorithm, CUBLASLT_ALGO_CONFIG_STAGES_ID), stage_ids);
  const std::vector<uint16_t> clusters = first_then<uint16_t>(
      config_value<uint16_t>(algorithm, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), {static_cast<uint16_t>(CUBLASLT_CLUSTER_SHAPE_AUTO)});
  const std::vector<uint32_t> customs =
      first_then<uint32_t>(config_value<uint32_t>(algorithm, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), {0u});
  const uint32_t tile_id = static_cast<uint32_t>(tile);
  size_t tried = 0;
  for (const uint32_t stage : stage_order)
    for (const uint16_t cluster : clusters)
      for (const uint32_t custom : customs) {
        cublasLtMatmulAlgo_t configured = algorithm;
        LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile_id, sizeof tile_id),
                      "ALGO_CONFIG_TILE_ID");
        LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage),
                      "ALGO_CONFIG_STAGES_ID");
        LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                                           sizeof cluster), "ALGO_CONFIG_CLUSTER_SHAPE_ID");
        LOKA_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&configured, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                                           sizeof custom), "ALGO_CONFIG_CUSTOM_OPTION");
        ++tried;
        if (accepted(plan, configured)) return configured;
      }
  return Status::error(refused + " (cublasLtMatmulAlgoCheck accepts none of " + std::to_string(tried) +
                       " stage/cluster/custom-option combinations)");
}

Result<int> choose_algorithm(const CublasLtPlan& plan, std::vector<cublasLtMatmulAlgo_t>& algorithms,
                             const GemmOptions& options, const std::string& what) {
  const int count = static_cast<int>(algorithms.size());
  const int selected = options.algorithm < 0 ? 0 : (options.algorithm >= count ? count - 1 : options.algorithm);
  if (options.split_k > 0 && options.tile > 0) return Status::error(what + ": a tile configuration keeps the heuristic's split-K");
  if (options.split_k <= 0 && options.tile <= 0) return selected;
  const cublasLtMatmulAlgo_t& heuristic = algorithms[static_cast<size_t>(selected)];
  LOKA_ASSIGN_OR_RETURN(const cublasLtMatmulAlgo_t configured,
                        options.split_k > 0 ? configure_split_k(plan, heuristic, options.split_k, what)
                                            : configure_tile(plan, heuristic, options.tile, options.stages, what));
  algorithms = {configured};
  return 0;
}

CublasLtPlan::~CublasLtPlan() {
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (operation) cublasLtMatmulDescDestroy(operation);
}

}  // namespace loka::cuda
