// ============================================================================
// passes/ir/graph_algorithms.cc — ordering and cycle checks through Boost.Graph.
// ============================================================================
#include "passes/ir/graph_algorithms.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>

#include <queue>

namespace loka::ir {
namespace {

using BglGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

/// Dense vertex index per live node (insertion order) and the edges between them.
struct BglView {
  BglGraph graph;
  std::vector<Node*> vertices;
};

BglView make_view(const Graph& graph) {
  BglView view;
  view.vertices = graph.nodes();
  std::vector<int> vertex_of(graph.node_id_bound(), -1);
  for (size_t v = 0; v < view.vertices.size(); ++v) vertex_of[view.vertices[v]->id()] = static_cast<int>(v);
  view.graph = BglGraph(view.vertices.size());
  for (size_t v = 0; v < view.vertices.size(); ++v)
    for (Value* input : view.vertices[v]->inputs())
      if (input && input->producer()) boost::add_edge(vertex_of[input->producer()->id()], v, view.graph);
  return view;
}

}  // namespace

bool has_cycle(const Graph& graph) {
  const BglView view = make_view(graph);
  const size_t n = view.vertices.size();
  if (n == 0) return false;
  // A cycle exists iff some strongly connected component has >1 vertex or a self-loop.
  std::vector<int> component(n);
  const int components = boost::strong_components(
      view.graph, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, view.graph)));
  if (static_cast<size_t>(components) != n) return true;
  for (size_t v = 0; v < n; ++v)
    if (boost::edge(v, v, view.graph).second) return true;
  return false;
}

Result<std::vector<Node*>> topological_order(const Graph& graph) {
  const BglView view = make_view(graph);
  const size_t n = view.vertices.size();
  // Kahn's algorithm with a min-heap on insertion index keeps the order stable
  // (the input order when it is already topological), which golden tests rely on.
  std::vector<size_t> in_degree(n, 0);
  for (auto [it, end] = boost::edges(view.graph); it != end; ++it) ++in_degree[boost::target(*it, view.graph)];
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t v = 0; v < n; ++v)
    if (in_degree[v] == 0) ready.push(v);
  std::vector<Node*> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t v = ready.top();
    ready.pop();
    order.push_back(view.vertices[v]);
    for (auto [it, end] = boost::out_edges(v, view.graph); it != end; ++it)
      if (--in_degree[boost::target(*it, view.graph)] == 0) ready.push(boost::target(*it, view.graph));
  }
  if (order.size() != n) {
    for (size_t v = 0; v < n; ++v)
      if (in_degree[v] > 0) return Status::error("the graph has a cycle through node '" + view.vertices[v]->name() + "'");
  }
  return order;
}

}  // namespace loka::ir
