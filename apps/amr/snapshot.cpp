// snapshot.cpp — the in-core baseline's snapshot file (snapshot.hpp).
#include "apps/amr/snapshot.hpp"

#include <cmath>
#include <cstring>
#include <unordered_set>

namespace cairn::apps::amr {
namespace {

using octree::Octant;

constexpr char kSnapMagic[8] = {'A', 'M', 'R', 'S', 'N', 'A', 'P', '1'};
constexpr std::size_t kHead = 24, kRec = 24, kSum = 8;

std::uint64_t fnv(const void* p, std::size_t n, std::uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

Result<std::vector<unsigned char>> encode_snapshot(std::uint64_t step, const octree::Octree& tree) {
  std::vector<unsigned char> buf(kHead);
  std::memcpy(buf.data(), kSnapMagic, sizeof kSnapMagic);
  std::memcpy(buf.data() + 8, &step, 8);
  std::uint64_t n = 0;
  auto v = tree.visit_leaves([&](const Octant& o, const std::byte* d) {
    const std::uint32_t rec[4] = {static_cast<std::uint32_t>(o.level), o.x, o.y, o.z};
    const std::size_t at = buf.size();
    buf.resize(at + kRec);
    std::memcpy(buf.data() + at, rec, sizeof rec);
    std::memcpy(buf.data() + at + sizeof rec, d, 8);
    ++n;
  });
  if (!v.ok()) return v.error();
  std::memcpy(buf.data() + 16, &n, 8);
  const std::uint64_t sum = fnv(buf.data(), buf.size());
  buf.resize(buf.size() + kSum);
  std::memcpy(buf.data() + buf.size() - kSum, &sum, kSum);
  return buf;
}

Result<std::uint64_t> decode_snapshot(std::span<const unsigned char> buf, const std::string& path, int level_max,
                                      octree::Octree& fresh) {
  const std::string advice = ": remove it and run without --resume";
  std::uint64_t step = 0, n = 0, sum = 0;
  if (buf.size() < kHead + kSum || std::memcmp(buf.data(), kSnapMagic, sizeof kSnapMagic) != 0)
    return make_error(Errc::foreign_file, path + " is not an amr snapshot" + advice);
  std::memcpy(&step, buf.data() + 8, 8);
  std::memcpy(&n, buf.data() + 16, 8);
  if (n > (buf.size() - kHead - kSum) / kRec || buf.size() != kHead + kSum + n * kRec)
    return make_error(Errc::corrupted, path + " is truncated (" + std::to_string(buf.size()) + " bytes for " +
                                           std::to_string(n) + " leaves)" + advice);
  std::memcpy(&sum, buf.data() + buf.size() - kSum, kSum);
  if (sum != fnv(buf.data(), buf.size() - kSum))
    return make_error(Errc::corrupted, path + " fails its checksum" + advice);
  std::vector<Octant> leaves(n);
  std::unordered_set<std::uint64_t> internal;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint32_t rec[4];
    double c = 0;
    std::memcpy(rec, buf.data() + kHead + i * kRec, sizeof rec);
    std::memcpy(&c, buf.data() + kHead + i * kRec + sizeof rec, sizeof c);
    if (rec[0] > static_cast<std::uint32_t>(octree::kMaxLevel))
      return make_error(Errc::corrupted, path + ": a leaf of level " + std::to_string(rec[0]) + advice);
    if (rec[0] > static_cast<std::uint32_t>(level_max))
      return make_error(Errc::layout_mismatch, path + ": a leaf of level " + std::to_string(rec[0]) +
                                                   ", finer than this run's " + std::to_string(level_max) +
                                                   ": resume with the --size of the run that wrote it");
    const Octant o{static_cast<int>(rec[0]), rec[1], rec[2], rec[3]};
    const std::uint32_t mask = o.length() - 1;
    if (((o.x | o.y | o.z) & mask) != 0 || o.x >= octree::kRootLength || o.y >= octree::kRootLength ||
        o.z >= octree::kRootLength || !std::isfinite(c))
      return make_error(Errc::corrupted,
                        path + ": leaf " + std::to_string(i) + " is not an octant of the domain" + advice);
    leaves[i] = o;
    for (Octant a = o; a.level > 0;) {
      a = octree::parent_of(a);
      if (!internal.insert(octree::morton(a, 3)).second) break;
    }
  }
  // The tree the leaves' ancestors make, then each leaf's payload in visiting
  // order: a leaf missing, repeated or out of order leaves the two apart.
  if (auto r = fresh.refine(
          true, [&](const Octant& q, const std::byte*) { return internal.count(octree::morton(q, 3)) != 0; }, nullptr);
      !r.ok())
    return r.error();
  std::uint64_t i = 0;
  bool mismatch = false;
  if (auto r = fresh.update_leaves([&](const Octant& q, std::byte* d) {
        if (i >= n || !(q == leaves[i])) {
          mismatch = true;
          return false;
        }
        std::memcpy(d, buf.data() + kHead + i * kRec + 16, 8);
        ++i;
        return true;
      });
      !r.ok())
    return r.error();
  if (mismatch || i != n) return make_error(Errc::corrupted, path + ": its leaves do not tile the domain" + advice);
  return step;
}

}  // namespace cairn::apps::amr
