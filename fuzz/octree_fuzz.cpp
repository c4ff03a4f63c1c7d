// octree_fuzz.cpp — libFuzzer target: a PM-octree pool (pool header and
// roots, the tree record, chunk table, family blocks) built from a sparse
// image, read by Octree::versions and Octree::restore, then walked by
// checksum(), previous_checksum(), stats(), visit_leaves(), leaf_count(),
// the flat iteration (leaves()), verify() and gc(); a tree that passes is
// changed by update_leaves, read and written in memory order
// (LeafOrder::memory: its blocks of this generation scanned, the committed
// subtrees below them walked) and persisted, then changed by the bulk writer
// (which copies every block the persist shared) and persisted again. flags
// bits 1..3 pick dims and data_size (fuzz_support.hpp). Any typed error is
// fine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/octree.hpp"
#include "fuzz_support.hpp"

namespace {

namespace octree = cairn::octree;

void exercise(octree::Octree& tree) {
  (void)tree.checksum();
  (void)tree.previous_checksum();
  (void)tree.stats();
  std::uint64_t leaves = 0;
  (void)tree.visit_leaves([&](const octree::Octant&, const std::byte*) { ++leaves; });
  (void)tree.leaf_count();
  for (auto cursor = tree.leaves();;) {  // the flat iteration: a typed error ends it
    auto batch = cursor.next();
    if (!batch.ok() || batch.value().empty()) break;
  }
  if (!tree.verify().ok()) return;
  if (!tree.gc().ok()) return;
  // Only a tree that verified is changed: what an application does after a
  // restore that succeeded.
  const bool has_payload = tree.data_size() > 0;
  (void)tree.update_leaves([&](const octree::Octant& o, std::byte* d) {
    if (!has_payload || o.level == 0) return false;
    d[0] = static_cast<std::byte>(static_cast<unsigned>(d[0]) + 1);
    return true;
  });
  for (auto cursor = tree.leaves(octree::LeafOrder::memory);;) {
    auto batch = cursor.next();
    if (!batch.ok() || batch.value().empty()) break;
  }
  for (auto writer = tree.write_leaves(octree::LeafOrder::memory);;) {
    auto batch = writer.next();
    if (!batch.ok() || batch.value().empty()) break;
    if (has_payload)
      for (const octree::WritableLeaf& l : batch.value())
        l.data[0] = static_cast<std::byte>(static_cast<unsigned>(l.data[0]) + 1);
  }
  if (!tree.persist().ok()) return;
  for (auto writer = tree.write_leaves();;) {  // the bulk writer copies what the persist shares
    auto batch = writer.next();
    if (!batch.ok() || batch.value().empty()) break;
    if (has_payload)
      for (const octree::WritableLeaf& l : batch.value())
        l.data[0] = static_cast<std::byte>(static_cast<unsigned>(l.data[0]) + 1);
  }
  (void)tree.persist();
  (void)tree.checksum();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = cairn::fuzz::scratch_dir() + "/tree.pool";
  const std::uint8_t flags = cairn::fuzz::write_sparse_image(path, {data, size});
  octree::Options o;
  o.dims = (flags & 2) ? 2 : 3;
  o.data_size = cairn::fuzz::kOctreeDataSizes[(flags >> 2) & 3];
  o.background_gc = false;  // one thread: an input replays the same way
  o.dram_budget = 64u << 10;
  (void)octree::Octree::versions(path, o);
  {
    auto tree = octree::Octree::restore(path, o);
    if (tree.ok()) exercise(*tree.value());
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
