// step5_pointers.cpp — tutorial step 5 (C++): pointers between regions, and the blocked array.
//
// Simulation state is rarely one flat array: particles sit in cell lists,
// mesh cells point at neighbours. cairn persists raw pointers two ways:
//   - Context::register_pointer(&p): p lives in a region and points into a
//     region; at each commit its target is recorded as (region, offset) and
//     restore rewrites it for wherever the regions now live;
//   - BlockedArray<T> (seed 001's 2 MB blocked layout) keeps elements in
//     fixed chunks, each a region; relocate(&T::next) rewrites every pointer
//     between its elements after a restore, however many there are.
// Here: 100 000 nodes in a blocked array, threaded into 16 lists whose heads
// live in a separate region. The first run builds and commits them; a second
// run (a new process: every region at a new address) restores and walks the
// lists. Run it twice:
//   build/release/examples/step5_pointers && build/release/examples/step5_pointers
#include <cstdio>

#include "cairn/extended/blocked_array.hpp"
#include "cairn/persist.hpp"

struct Node {
  double value;
  Node* next;  // the next node of the same list, or null
};

constexpr std::size_t kNodes = 100000, kLists = 16;

int main() {
  using cairn::persist::BlockedArray;
  auto ctx = cairn::persist::Context::create({.name = "step5"}).value();
  auto nodes = BlockedArray<Node>::create(*ctx, "nodes", kNodes, 256 * 1024).value();
  auto* heads = ctx->region("heads", kLists * sizeof(Node*)).value();
  ctx->open().value();
  nodes.attach().value();
  Node** head = heads->as<Node*>();
  for (std::size_t l = 0; l < kLists; ++l) ctx->register_pointer(&head[l]).value();  // region -> array

  const bool resumed = ctx->committed_version().has_value();
  if (resumed) {
    ctx->restore().value();
    head = heads->as<Node*>();
    nodes.relocate(&Node::next).value();  // array -> array
  } else {
    for (std::size_t i = 0; i < kNodes; ++i) {
      Node* n = nodes.push_back({static_cast<double>(i), head[i % kLists]}).value();
      head[i % kLists] = n;
    }
    ctx->commit().value();
  }

  // Walk every list: all nodes, each once, with the values they were given.
  std::size_t count = 0;
  double sum = 0;
  for (std::size_t l = 0; l < kLists; ++l)
    for (const Node* n = head[l]; n != nullptr && count <= kNodes; n = n->next, ++count) sum += n->value;
  const double expect = (kNodes - 1) * kNodes / 2.0;
  const bool ok = count == kNodes && sum == expect;
  std::printf("step5: %s %zu nodes in %zu chunks; walked %zu nodes, sum %.0f (%s)\n", resumed ? "restored" : "built",
              nodes.size(), nodes.chunk_count(), count, sum, ok ? "correct" : "WRONG");
  return ok ? 0 : 1;
}
