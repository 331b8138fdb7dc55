// ============================================================================
// tests/runtime/node_schedule_test.cc — plans run branch by branch, and nodes
// move toward their readers only where no value then lives longer.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "runtime/node_schedule.h"

namespace loka {
namespace {

/// Names each position of `order` by the node's label, for readable expectations.
std::vector<std::string> labelled(const std::vector<int>& order, const std::vector<std::string>& labels) {
  std::vector<std::string> out;
  for (int n : order) out.push_back(labels[static_cast<size_t>(n)]);
  return out;
}

/// Every node once, each after the nodes making what it reads.
void expect_topological(const std::vector<ScheduledNode>& nodes, const std::vector<int>& order, size_t values) {
  ASSERT_EQ(order.size(), nodes.size());
  std::vector<int> position(nodes.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(position[static_cast<size_t>(order[i])], -1) << "node " << order[i] << " twice";
    position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  }
  std::vector<int> producer(values, -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].writes) producer[static_cast<size_t>(v)] = static_cast<int>(n);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int v : nodes[n].reads) {
      const int maker = producer[static_cast<size_t>(v)];
      if (maker >= 0) {
        EXPECT_LT(position[static_cast<size_t>(maker)], position[n]) << "node " << n << " runs before the maker of value " << v;
      }
    }
}

/// The order schedule_nodes gives `nodes` (checked topological), by label; `held` lists the
/// values held anyway among `values` (below: the join's output, a graph output, and any constant).
std::vector<std::string> scheduled(const std::vector<ScheduledNode>& nodes, const std::vector<std::string>& labels,
                                   size_t values, const std::vector<int>& held) {
  std::vector<bool> held_anyway(values, false);
  for (int v : held) held_anyway[static_cast<size_t>(v)] = true;
  const std::vector<int> order = schedule_nodes(nodes, held_anyway);
  expect_topological(nodes, order, values);
  return labelled(order, labels);
}

TEST(NodeSchedule, BranchesRunOneAfterAnother) {
  // x (value 0, a graph input) feeds three two-node branches joined by one node. The file lists
  // them layer by layer (a0 b0 c0 a1 b1 c1), as an exporter may; the plan runs them branch by
  // branch, so only one branch's intermediate is alive at a time.
  //   a0: 0 -> 1, b0: 0 -> 2, c0: 0 -> 3, a1: 1 -> 4, b1: 2 -> 5, c1: 3 -> 6, join: 4 5 6 -> 7
  const std::vector<ScheduledNode> nodes = {{{0}, {1}}, {{0}, {2}}, {{0}, {3}}, {{1}, {4}},
                                            {{2}, {5}}, {{3}, {6}}, {{4, 5, 6}, {7}}};
  const std::vector<std::string> labels = {"a0", "b0", "c0", "a1", "b1", "c1", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 8, {7}), (std::vector<std::string>{"a0", "a1", "b0", "b1", "c0", "c1", "join"}));
}

TEST(NodeSchedule, ANodeWhoseInputsLiveOnAnywayRunsJustBeforeItsReader) {
  // DHEN's linear module: `lin` reads the shared input x (value 0), which the attention branch
  // reads later too, and a constant weight (value 1). It comes first in the file, but its output
  // is only needed by the join, so it runs just before it.
  //   lin: 0 1 -> 2, att0: 0 -> 3, att1: 3 -> 4, att2: 0 4 -> 5, join: 2 5 -> 6
  const std::vector<ScheduledNode> nodes = {{{0, 1}, {2}}, {{0}, {3}}, {{3}, {4}}, {{0, 4}, {5}}, {{2, 5}, {6}}};
  const std::vector<std::string> labels = {"lin", "att0", "att1", "att2", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 7, {1, 6}), (std::vector<std::string>{"att0", "att1", "att2", "lin", "join"}));
}

TEST(NodeSchedule, ANodeGoesNoFurtherThanTheLastOtherReaderOfItsInputs) {
  // `lin` and `att0` read x (value 0); `att1` does not. Past att0, lin would keep x alive through
  // att1, so it lands right after att0.
  //   lin: 0 -> 1, att0: 0 -> 2, att1: 2 -> 3, join: 1 3 -> 4
  const std::vector<ScheduledNode> nodes = {{{0}, {1}}, {{0}, {2}}, {{2}, {3}}, {{1, 3}, {4}}};
  const std::vector<std::string> labels = {"lin", "att0", "att1", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 5, {4}), (std::vector<std::string>{"att0", "lin", "att1", "join"}));
}

TEST(NodeSchedule, ANodeLandingBeforeViewsGoesPastThem) {
  // `relu` may go no further than x's other reader `abs`, but abs's view follows it: its step
  // holds no new bytes, so relu goes past it too and the view stays next to abs (an early
  // ConcatQuant encode of the view waits for it).
  //   relu: 0 -> 1, abs: 0 -> 2, view: 2 -> 3 (a view), join: 1 3 -> 4
  std::vector<ScheduledNode> nodes = {{{0}, {1}}, {{0}, {2}}, {{2}, {3}}, {{1, 3}, {4}}};
  nodes[2].is_view = true;
  const std::vector<std::string> labels = {"relu", "abs", "view", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 5, {4}), (std::vector<std::string>{"abs", "view", "relu", "join"}));
}

TEST(NodeSchedule, ANodeWhoseInputWouldLiveLongerStaysPut) {
  // The negative twin: `lin` is x's only reader (the other branch starts from a second graph
  // input). Moved down, it would keep x alive through that branch, so it stays where the
  // depth-first order put it.
  //   lin: 0 -> 1, att0: 2 -> 3, att1: 3 -> 4, join: 1 4 -> 5   (value 2: a second graph input)
  const std::vector<ScheduledNode> nodes = {{{0}, {1}}, {{2}, {3}}, {{3}, {4}}, {{1, 4}, {5}}};
  const std::vector<std::string> labels = {"lin", "att0", "att1", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 6, {5}), (std::vector<std::string>{"lin", "att0", "att1", "join"}));
}

TEST(NodeSchedule, ANodeWithAnOutputNobodyReadsStaysPut) {
  // `n` could go past `a` (x is read there anyway), but its second output d is read by nobody:
  // it is allocated at n's step and dead after it, and would land in a step where a is alive.
  //   n: 0 -> 1 2 (2 unread), a: 0 -> 3, b: 3 -> 4, join: 1 4 -> 5
  const std::vector<ScheduledNode> nodes = {{{0}, {1, 2}}, {{0}, {3}}, {{3}, {4}}, {{1, 4}, {5}}};
  const std::vector<std::string> labels = {"n", "a", "b", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 6, {5}), (std::vector<std::string>{"n", "a", "b", "join"}));
  // The twin: with d a graph output (held anyway), n moves.
  EXPECT_EQ(scheduled(nodes, labels, 6, {2, 5}), (std::vector<std::string>{"a", "n", "b", "join"}));
}

TEST(NodeSchedule, AViewThatCannotMoveDoesNotClimbPastTheViewsAfterIt) {
  // v1 is the last reader of x and s; it must not move past v2 (another view) on the strength of
  // the views-are-free rule, which only extends a move already made.
  //   v1: 0 1 -> 2 (a view), v2: 3 -> 4 (a view), join: 2 4 -> 5
  std::vector<ScheduledNode> nodes = {{{0, 1}, {2}}, {{3}, {4}}, {{2, 4}, {5}}};
  nodes[0].is_view = nodes[1].is_view = true;
  const std::vector<std::string> labels = {"v1", "v2", "join"};
  EXPECT_EQ(scheduled(nodes, labels, 6, {5}), (std::vector<std::string>{"v1", "v2", "join"}));
}

TEST(NodeSchedule, RandomGraphsGetATopologicalOrderAndCyclesAreLeftOut) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    // Values 0..inputs-1 are graph inputs; node n writes value inputs + n and reads up to three
    // earlier values. Nodes are listed in a shuffled order.
    const int inputs = 1 + static_cast<int>(rng() % 3);
    const int count = 1 + static_cast<int>(rng() % 40);
    std::vector<ScheduledNode> made(static_cast<size_t>(count));
    for (int n = 0; n < count; ++n) {
      made[static_cast<size_t>(n)].writes = {inputs + n};
      const int reads = 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < reads; ++r)
        made[static_cast<size_t>(n)].reads.push_back(static_cast<int>(rng() % static_cast<unsigned>(inputs + n)));
    }
    std::vector<int> listing(static_cast<size_t>(count));
    for (int n = 0; n < count; ++n) listing[static_cast<size_t>(n)] = n;
    std::shuffle(listing.begin(), listing.end(), rng);
    std::vector<ScheduledNode> nodes;
    for (int n : listing) nodes.push_back(made[static_cast<size_t>(n)]);
    std::vector<bool> held(static_cast<size_t>(inputs + count), false);
    for (size_t v = 0; v < held.size(); ++v) held[v] = rng() % 5 == 0;
    const std::vector<int> order = schedule_nodes(nodes, held);
    expect_topological(nodes, order, held.size());
    if (::testing::Test::HasFailure()) return;

    // A cycle: the first node listed also reads what it writes. It, and whatever reads it,
    // never runs.
    nodes.front().reads.push_back(nodes.front().writes.front());
    const std::vector<int> partial = schedule_nodes(nodes, held);
    EXPECT_LT(partial.size(), nodes.size());
  }
}

}  // namespace
}  // namespace loka
