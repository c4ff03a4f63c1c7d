// mesh.hpp — the adaptive quadtree mesh the workflow's components pass along:
// leaves of a 2D quadtree over the unit square, each with one value.
//
// A leaf is named by its key (level, ix, iy): the cell [ix, ix+1) x [iy, iy+1)
// of the uniform 2^level x 2^level grid. A mesh is a set of leaves that tile
// the square without overlap; the components keep it 2:1 balanced (leaves that
// share an edge differ by at most one level), which bounds each leaf to at
// most two neighbours per side and lets neighbour search be three lookups.
// Morton order (the Z curve through the leaves' lower-left corners) is the
// mesh's canonical order: the rebalance step cuts it into per-process ranges.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace cairn::apps::workflow {

inline constexpr int kMaxLevel = 20;

struct Key {
  int level = 0;
  std::uint32_t ix = 0, iy = 0;
  friend bool operator==(const Key&, const Key&) = default;
};

// Packed: level in the top 6 bits, ix in the next 29, iy in the low 29.
std::uint64_t pack(const Key& k);
Key unpack(std::uint64_t code);
// Edge length and centre of a leaf.
double cell_size(int level);
std::array<double, 2> centre(const Key& k);
// The position of a packed key on the Z curve (coarser before finer at a
// shared corner); sorting by it gives Morton order.
std::uint64_t morton_order(std::uint64_t code);
void sort_morton(std::vector<std::uint64_t>& codes);

// One neighbour across an edge, or the domain boundary (code == kBoundary).
inline constexpr std::uint64_t kBoundary = ~std::uint64_t{0};
struct Neighbour {
  std::uint64_t code = kBoundary;
  double weight = 0;  // face length / centre distance (finite volumes)
};

// The leaves of a mesh by packed key, for neighbour search.
class LeafIndex {
 public:
  LeafIndex() = default;
  explicit LeafIndex(const std::vector<std::uint64_t>& codes);
  void insert(std::uint64_t code, std::size_t index) { index_.emplace(code, index); }
  bool contains(std::uint64_t code) const { return index_.count(code) != 0; }
  // Index given at insertion, or -1.
  long find(std::uint64_t code) const;
  std::size_t size() const { return index_.size(); }

  // Appends the neighbours of `leaf` across its four edges (left, right,
  // bottom, top; two per edge where the neighbours are finer). Returns false
  // if an edge has no leaf at the same, the next coarser or the next finer
  // level: the mesh is not 2:1 balanced there.
  bool neighbours(const Key& leaf, std::vector<Neighbour>& out) const;

 private:
  std::unordered_map<std::uint64_t, std::size_t> index_;
};

// Checks that `codes` tile the unit square exactly (areas sum to 1 with no
// leaf inside another) and are 2:1 balanced; "" if so, else what is wrong.
std::string check_mesh(const std::vector<std::uint64_t>& codes);

// Leaf -> value, what the adapter works on.
struct Cell {
  std::uint64_t code = 0;
  double value = 0;
};

// One adaptation step: leaves whose target level is above their level are
// split (children take the parent's value); families of four sibling leaves
// that all ask to coarsen are merged (the parent takes their mean) unless a
// neighbour would end up two levels finer; then the mesh is 2:1 balanced by
// splitting leaves next to much finer ones. Levels stay in [level_min,
// level_max]. The result is in Morton order.
std::vector<Cell> adapt(const std::vector<Cell>& cells, const std::vector<int>& target, int level_min, int level_max);

// The uniform mesh of 4^level leaves, value 0, in Morton order.
std::vector<Cell> uniform(int level);

}  // namespace cairn::apps::workflow
