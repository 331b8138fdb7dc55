// ============================================================================
// examples/serving/batches.h — the batches loka-serve serves.
//
// Either read from a data directory (the layout the LoKA tools use, through
// the public loka/test_data.h reader) or generated at random from the shapes
// the model declares for its inputs. Reading comes in two steps because a
// CUDA Engine must know the largest batch before it loads: read the data sets
// first, load the model, then match the data sets to its inputs.
// ============================================================================
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"
#include "loka/test_data.h"

namespace serving {

/// One request: the model's inputs in Engine::inputs() order.
struct Batch {
  std::string label;                 ///< "test_data_set_1", "random 2" (for messages)
  std::vector<loka::Tensor> inputs;
  int64_t rows = 1;                  ///< leading dim of the first input (1 for scalars)
};

/// Reads at most `limit` data sets of `data` (all when it holds fewer); errors name the file.
loka::Result<std::vector<loka::DataSet>> read_data_sets(const std::filesystem::path& data, size_t limit);

/// The largest leading dim among the data sets' inputs (1 when all are scalars).
int64_t largest_rows(const std::vector<loka::DataSet>& data_sets);

/// Arranges each data set's inputs in the engine's input order; errors name the data set and input.
loka::Result<std::vector<Batch>> batches_from_data(const std::vector<loka::DataSet>& data_sets,
                                                   const loka::Engine& engine);

/// How random batches are drawn.
struct RandomSpec {
  int64_t rows = 256;       ///< the symbolic leading dim of every input
  int64_t int_range = 100;  ///< integer inputs are uniform in [0, int_range)
  uint64_t seed = 1;
  size_t count = 4;         ///< distinct batches
};

/// Random batches of the engine's declared input shapes: floats standard normal, integers
/// uniform in [0, int_range), bools fair coins. A leading symbolic dim becomes `rows`; any
/// other symbolic dim, a missing shape or a dtype with no generator is an error naming the input.
loka::Result<std::vector<Batch>> random_batches(const loka::Engine& engine, const RandomSpec& spec);

}  // namespace serving
