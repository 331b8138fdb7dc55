// ============================================================================
// tests/runtime/node_schedule_test.cc — plans run branch by branch, and nodes
// move toward their readers only where no value then lives longer.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>
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

/// The most bytes alive at one step of `order`, as a device session holds them: a value from
/// its maker's step (graph inputs from the start) to its last reader's (an unread one at its
/// maker's step only), a view's output in its input's bytes. Held values: made by no node, a
/// constant (not counted, nor its views); made by one, a graph output, alive to the end with the
/// bytes it is a view of.
size_t peak_live_bytes(const std::vector<ScheduledNode>& nodes, const std::vector<int>& order,
                       const std::vector<bool>& held, const std::vector<size_t>& bytes) {
  const size_t values = held.size(), steps = order.size();
  std::vector<int> root(values);
  for (size_t v = 0; v < values; ++v) root[v] = static_cast<int>(v);
  std::vector<int> first(values, -1), last(values, -1);
  for (size_t t = 0; t < steps; ++t) {  // order is topological: a view's input has its root already
    const ScheduledNode& node = nodes[static_cast<size_t>(order[t])];
    for (int v : node.writes) {
      if (node.is_view && !node.reads.empty()) root[static_cast<size_t>(v)] = root[static_cast<size_t>(node.reads[0])];
      const size_t r = static_cast<size_t>(root[static_cast<size_t>(v)]);
      if (first[r] < 0 && r == static_cast<size_t>(v)) first[r] = static_cast<int>(t);
      last[r] = std::max(last[r], static_cast<int>(t));
    }
    for (int v : node.reads) {
      const size_t r = static_cast<size_t>(root[static_cast<size_t>(v)]);
      last[r] = std::max(last[r], static_cast<int>(t));
    }
  }
  std::vector<bool> made(values, false), constant(values, false);
  for (const ScheduledNode& node : nodes)
    for (int v : node.writes) made[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < values; ++v) {
    const size_t r = static_cast<size_t>(root[v]);
    if (held[v] && made[v]) last[r] = static_cast<int>(steps) - 1;  // a graph output
    if (held[r] && !made[r]) constant[r] = true;
  }
  size_t peak = 0;
  for (size_t t = 0; t < steps; ++t) {
    size_t live = 0;
    for (size_t r = 0; r < values; ++r) {
      if (root[r] != static_cast<int>(r) || constant[r] || last[r] < 0) continue;
      const int from = first[r] < 0 ? 0 : first[r];  // a graph input: from the start
      if (from <= static_cast<int>(t) && static_cast<int>(t) <= last[r]) live += bytes[r];
    }
    peak = std::max(peak, live);
  }
  return peak;
}

/// A failing case in full: each node's reads and writes (value/bytes, h: held) and both orders.
std::string describe(const std::vector<ScheduledNode>& nodes, const std::vector<bool>& held,
                     const std::vector<size_t>& bytes, const std::vector<int>& depth_first, const std::vector<int>& sunk) {
  std::ostringstream text;
  const auto value = [&](int v) {
    text << ' ' << v << (held[static_cast<size_t>(v)] ? "h" : "") << '/' << bytes[static_cast<size_t>(v)];
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    text << 'n' << n << (nodes[n].is_view ? " (view):" : ":");
    for (int v : nodes[n].reads) value(v);
    text << " ->";
    for (int v : nodes[n].writes) value(v);
    text << '\n';
  }
  text << "depth first:";
  for (int n : depth_first) text << " n" << n;
  text << "\nsunk:";
  for (int n : sunk) text << " n" << n;
  return text.str();
}

TEST(NodeSchedule, SinkingNeverRaisesThePeakOfLiveBytes) {
  // Random DAGs with views, values read twice, unread outputs, constants and graph outputs, and
  // random sizes: the order after sinking never holds more bytes at its peak than the
  // depth-first order it started from.
  std::mt19937 rng(23);
  size_t lowered = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int inputs = 1 + static_cast<int>(rng() % 3);
    const int count = 2 + static_cast<int>(rng() % 25);
    std::vector<ScheduledNode> nodes(static_cast<size_t>(count));
    int values = inputs;
    for (ScheduledNode& node : nodes) {
      node.is_view = rng() % 5 == 0;
      const int reads = node.is_view ? 1 : 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < reads; ++r) node.reads.push_back(static_cast<int>(rng() % static_cast<unsigned>(values)));
      const int writes = node.is_view ? 1 : 1 + static_cast<int>(rng() % 4 == 0);
      for (int w = 0; w < writes; ++w) node.writes.push_back(values++);
    }
    std::vector<bool> held(static_cast<size_t>(values), false);
    std::vector<size_t> bytes(static_cast<size_t>(values));
    for (size_t v = 0; v < held.size(); ++v) {
      held[v] = rng() % 8 == 0;
      bytes[v] = 1 + rng() % 100;
    }
    const std::vector<int> depth_first = schedule_nodes(nodes, held, /*sink_toward_readers=*/false);
    const std::vector<int> sunk = schedule_nodes(nodes, held);
    expect_topological(nodes, sunk, held.size());
    const size_t before = peak_live_bytes(nodes, depth_first, held, bytes);
    const size_t after = peak_live_bytes(nodes, sunk, held, bytes);
    if (after > before) {
      ADD_FAILURE() << "trial " << trial << ": peak " << before << " -> " << after << "\n"
                    << describe(nodes, held, bytes, depth_first, sunk);
      return;
    }
    lowered += after < before;
  }
  EXPECT_GT(lowered, 0u) << "sinking never lowered a peak: the test would not see it work";
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
