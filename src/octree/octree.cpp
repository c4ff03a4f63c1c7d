// octree.cpp — PM-octree (include/cairn/octree.hpp): octant geometry and
// the tree's accessors. The tree itself is spread over this folder along its
// seams; impl.hpp says which file holds what.
#include "cairn/octree.hpp"

#include "octree/impl.hpp"

namespace cairn::octree {

std::uint64_t morton(const Octant& o, int dims) {
  std::uint64_t m = 0;
  for (int b = kMaxLevel - 1; b >= 0; --b) {
    m = (m << dims) | ((o.x >> b) & 1u) | (((o.y >> b) & 1u) << 1);
    if (dims == 3) m |= static_cast<std::uint64_t>((o.z >> b) & 1u) << 2;
  }
  return (m << 5) | static_cast<std::uint64_t>(o.level);
}

Octant child_of(const Octant& o, int c) { return detail::child_octant(o, c); }

Octant parent_of(const Octant& o) {
  const std::uint32_t mask = ~((o.length() << 1) - 1);
  return {o.level - 1, o.x & mask, o.y & mask, o.z & mask};
}

int Octree::dims() const { return impl_->dims(); }
std::uint32_t Octree::data_size() const { return impl_->data_size(); }
std::uint64_t Octree::version() const { return impl_->version(); }
const std::string& Octree::path() const { return impl_->file(); }

}  // namespace cairn::octree
