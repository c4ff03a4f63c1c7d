// mesh.cpp — quadtree leaves: keys, Morton order, neighbour search, checks and
// the adaptation step (refine, coarsen, 2:1 balance).
#include "apps/workflow/mesh.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace cairn::apps::workflow {

namespace {
constexpr std::uint64_t kCoordMask = (std::uint64_t{1} << 29) - 1;
constexpr int kDirs[4][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1}};

// Spreads the low 20 bits of x to the even bit positions.
std::uint64_t spread(std::uint64_t x) {
  x &= 0xFFFFF;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
  x = (x | (x << 2)) & 0x3333333333333333ull;
  x = (x | (x << 1)) & 0x5555555555555555ull;
  return x;
}

std::uint64_t child(const Key& k, int a, int b) {
  return pack({k.level + 1, 2 * k.ix + static_cast<std::uint32_t>(a), 2 * k.iy + static_cast<std::uint32_t>(b)});
}
std::uint64_t parent(const Key& k) { return pack({k.level - 1, k.ix >> 1, k.iy >> 1}); }

void sort_cells(std::vector<Cell>& cells) {
  std::sort(cells.begin(), cells.end(),
            [](const Cell& a, const Cell& b) { return morton_order(a.code) < morton_order(b.code); });
}

void split_into(const Cell& c, std::vector<Cell>& out) {
  const Key k = unpack(c.code);
  for (int b = 0; b < 2; ++b)
    for (int a = 0; a < 2; ++a) out.push_back({child(k, a, b), c.value});
}
}  // namespace

std::uint64_t pack(const Key& k) {
  return (static_cast<std::uint64_t>(k.level) << 58) | ((k.ix & kCoordMask) << 29) | (k.iy & kCoordMask);
}

Key unpack(std::uint64_t code) {
  return {static_cast<int>(code >> 58), static_cast<std::uint32_t>((code >> 29) & kCoordMask),
          static_cast<std::uint32_t>(code & kCoordMask)};
}

double cell_size(int level) { return 1.0 / static_cast<double>(std::uint64_t{1} << level); }

std::array<double, 2> centre(const Key& k) {
  const double h = cell_size(k.level);
  return {(k.ix + 0.5) * h, (k.iy + 0.5) * h};
}

std::uint64_t morton_order(std::uint64_t code) {
  const Key k = unpack(code);
  const int shift = kMaxLevel - k.level;
  return ((spread(k.ix << shift) | (spread(k.iy << shift) << 1)) << 5) | static_cast<std::uint64_t>(k.level);
}

void sort_morton(std::vector<std::uint64_t>& codes) {
  std::sort(codes.begin(), codes.end(),
            [](std::uint64_t a, std::uint64_t b) { return morton_order(a) < morton_order(b); });
}

LeafIndex::LeafIndex(const std::vector<std::uint64_t>& codes) {
  index_.reserve(codes.size() * 2);
  for (std::size_t i = 0; i < codes.size(); ++i) index_.emplace(codes[i], i);
}

long LeafIndex::find(std::uint64_t code) const {
  const auto it = index_.find(code);
  return it == index_.end() ? -1 : static_cast<long>(it->second);
}

bool LeafIndex::neighbours(const Key& k, std::vector<Neighbour>& out) const {
  const long n = 1L << k.level;
  for (const auto& d : kDirs) {
    const long ni = static_cast<long>(k.ix) + d[0], nj = static_cast<long>(k.iy) + d[1];
    if (ni < 0 || nj < 0 || ni >= n || nj >= n) {  // boundary: face h, distance h/2
      out.push_back({kBoundary, 2.0});
      continue;
    }
    const Key same{k.level, static_cast<std::uint32_t>(ni), static_cast<std::uint32_t>(nj)};
    if (const std::uint64_t c = pack(same); contains(c)) {  // face h, distance h
      out.push_back({c, 1.0});
      continue;
    }
    if (k.level > 0) {  // coarser: face h, distance 1.5 h
      if (const std::uint64_t c = parent(same); contains(c)) {
        out.push_back({c, 2.0 / 3.0});
        continue;
      }
    }
    if (k.level >= kMaxLevel) return false;
    // Finer: the two children of `same` on the shared edge; face h/2, distance 0.75 h.
    std::uint64_t c0, c1;
    if (d[0] != 0) {
      const int a = d[0] > 0 ? 0 : 1;
      c0 = child(same, a, 0), c1 = child(same, a, 1);
    } else {
      const int b = d[1] > 0 ? 0 : 1;
      c0 = child(same, 0, b), c1 = child(same, 1, b);
    }
    if (!contains(c0) || !contains(c1)) return false;
    out.push_back({c0, 2.0 / 3.0});
    out.push_back({c1, 2.0 / 3.0});
  }
  return true;
}

std::string check_mesh(const std::vector<std::uint64_t>& codes) {
  const LeafIndex index(codes);
  if (index.size() != codes.size()) return "a leaf appears twice";
  std::uint64_t area = 0;  // in units of the finest possible cell
  std::vector<Neighbour> nb;
  for (const std::uint64_t code : codes) {
    const Key k = unpack(code);
    if (k.level > kMaxLevel || k.ix >= (1u << k.level) || k.iy >= (1u << k.level))
      return "leaf outside the unit square";
    area += std::uint64_t{1} << (2 * (kMaxLevel - k.level));
    for (Key a = k; a.level > 0;) {
      a = {a.level - 1, a.ix >> 1, a.iy >> 1};
      if (index.contains(pack(a))) return "a leaf lies inside another leaf";
    }
    nb.clear();
    if (!index.neighbours(k, nb))
      return "not 2:1 balanced (or a hole) next to a leaf of level " + std::to_string(k.level);
  }
  if (area != std::uint64_t{1} << (2 * kMaxLevel)) return "the leaves do not cover the unit square";
  return "";
}

std::vector<Cell> uniform(int level) {
  std::vector<Cell> cells;
  const std::uint32_t n = 1u << level;
  cells.reserve(std::size_t{n} * n);
  for (std::uint32_t j = 0; j < n; ++j)
    for (std::uint32_t i = 0; i < n; ++i) cells.push_back({pack({level, i, j}), 0.0});
  sort_cells(cells);
  return cells;
}

std::vector<Cell> adapt(const std::vector<Cell>& cells, const std::vector<int>& target, int level_min, int level_max) {
  // 1. Refine; remember which of the kept leaves ask to coarsen.
  std::vector<Cell> mesh;
  std::vector<std::uint64_t> wants_coarsen;
  mesh.reserve(cells.size() + cells.size() / 2);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const int level = unpack(cells[i].code).level;
    if (target[i] > level && level < level_max) {
      split_into(cells[i], mesh);
      continue;
    }
    mesh.push_back(cells[i]);
    if (target[i] < level && level > level_min) wants_coarsen.push_back(cells[i].code);
  }

  // 2. Coarsen whole families that all ask to and have no finer neighbour.
  {
    std::vector<std::uint64_t> codes(mesh.size());
    for (std::size_t i = 0; i < mesh.size(); ++i) codes[i] = mesh[i].code;
    const LeafIndex index(codes);
    std::map<std::uint64_t, int> family;  // parent -> children asking (ordered: deterministic)
    std::vector<Neighbour> nb;
    for (const std::uint64_t c : wants_coarsen) {
      const Key k = unpack(c);
      nb.clear();
      index.neighbours(k, nb);
      const bool finer_next = std::any_of(nb.begin(), nb.end(), [&](const Neighbour& n) {
        return n.code != kBoundary && unpack(n.code).level > k.level;
      });
      // A finer neighbour would end up two levels finer than the parent: the
      // family stays (count it past 4 so it never merges).
      family[parent(k)] += finer_next ? 5 : 1;
    }
    std::set<std::uint64_t> merged;  // the children of merged families
    std::vector<Cell> parents;
    for (const auto& [p, count] : family) {
      if (count != 4) continue;
      const Key pk = unpack(p);
      double sum = 0;
      for (int b = 0; b < 2; ++b)
        for (int a = 0; a < 2; ++a) {
          const std::uint64_t c = child(pk, a, b);
          sum += mesh[static_cast<std::size_t>(index.find(c))].value;
          merged.insert(c);
        }
      parents.push_back({p, sum / 4.0});
    }
    if (!merged.empty()) {
      std::erase_if(mesh, [&](const Cell& c) { return merged.count(c.code) != 0; });
      mesh.insert(mesh.end(), parents.begin(), parents.end());
    }
  }

  // 3. 2:1 balance: split every leaf that has a neighbour two or more levels finer.
  for (;;) {
    std::vector<std::uint64_t> codes(mesh.size());
    for (std::size_t i = 0; i < mesh.size(); ++i) codes[i] = mesh[i].code;
    const LeafIndex index(codes);
    std::set<std::uint64_t> split;
    for (const std::uint64_t code : codes) {
      const Key k = unpack(code);
      const long n = 1L << k.level;
      for (const auto& d : kDirs) {
        const long ni = static_cast<long>(k.ix) + d[0], nj = static_cast<long>(k.iy) + d[1];
        if (ni < 0 || nj < 0 || ni >= n || nj >= n) continue;
        for (int up = 2; up <= k.level; ++up) {
          const std::uint64_t c =
              pack({k.level - up, static_cast<std::uint32_t>(ni >> up), static_cast<std::uint32_t>(nj >> up)});
          if (index.contains(c)) {
            split.insert(c);
            break;
          }
        }
      }
    }
    if (split.empty()) break;
    std::vector<Cell> next;
    next.reserve(mesh.size() + 3 * split.size());
    for (const Cell& c : mesh) {
      if (split.count(c.code) != 0)
        split_into(c, next);
      else
        next.push_back(c);
    }
    mesh = std::move(next);
  }
  sort_cells(mesh);
  return mesh;
}

}  // namespace cairn::apps::workflow
