// step7_octree.cpp — tutorial step 7 (C++): an adaptive mesh persisted at every step, resumed after a crash.
//
// A quadtree follows the edge of a disc that moves across the unit square:
// each step refines the leaves the edge passes through (down to level 7),
// coarsens families far from it, balances the mesh 2:1 and stores in every
// leaf the distance of its centre to the edge. The PM-octree keeps the mesh
// itself in persistent memory, so making a step durable is one call, and
// writes only what the step changed. The changes for resilience, marked:
//   (1) restore() brings back the last persisted version; a missing pool, or
//       one whose first persist never happened (a crash before it), means a
//       fresh start with create();
//   (2) the step counter lives in the root octant's payload, so it is
//       persisted with the mesh;
//   (3) persist() at the end of every step.
// At the end the same steps run in a second tree from scratch: a resumed run
// must give the same checksum as an uninterrupted one.
//
// Run it twice: the second run finds the finished mesh and computes nothing.
// `--crash-after N` kills the process (SIGKILL) right after step N's persist:
// the next run resumes at step N.
//   build/release/examples/step7_octree --crash-after 17; build/release/examples/step7_octree
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cairn/octree.hpp"

using cairn::Errc;
using cairn::octree::Octant;
using cairn::octree::Octree;

constexpr int kMaxLevel = 7;
constexpr long kSteps = 40;

struct Cell {
  double distance;  // leaves: centre to the disc's edge; root: unused
  long steps_done;  // root: steps persisted so far; leaves: unused
};

double size_of(const Octant& o) { return static_cast<double>(o.length()) / cairn::octree::kRootLength; }
double centre(std::uint32_t at, const Octant& o) {
  return (at + 0.5 * o.length()) / static_cast<double>(cairn::octree::kRootLength);
}
// Signed distance of the octant's centre to the edge of the disc at `step`.
double distance(const Octant& o, long step) {
  const double cx = 0.2 + 0.6 * static_cast<double>(step) / kSteps, cy = 0.5, r = 0.2;
  return std::hypot(centre(o.x, o) - cx, centre(o.y, o) - cy) - r;
}

// One step of the mesh: adapt to the edge at `step`, then fill the leaves.
void advance(Octree& t, long step) {
  auto near_edge = [&](const Octant& o) { return std::abs(distance(o, step)) < size_of(o); };
  auto init = [](const Octant&, std::byte* data, const std::byte*) { *reinterpret_cast<Cell*>(data) = Cell{0, 0}; };
  t.refine(
       true, [&](const Octant& o, const std::byte*) { return near_edge(o); }, init, kMaxLevel)
      .value();
  t.coarsen(
       false,
       [&](const Octant& parent, std::span<const cairn::octree::LeafView>) {
         return std::abs(distance(parent, step)) > 2 * size_of(parent);
       },
       [](const Octant&, std::byte* data, std::span<const cairn::octree::LeafView>) {
         *reinterpret_cast<Cell*>(data) = Cell{0, 0};
       })
      .value();
  t.balance(cairn::octree::Connect::face, init).value();
  t.update_leaves([&](const Octant& o, std::byte* data) {
     reinterpret_cast<Cell*>(data)->distance = distance(o, step);
     return true;
   }).value();
  t.update_root([&](const Octant&, std::byte* data) {  // (2)
     reinterpret_cast<Cell*>(data)->steps_done = step + 1;
     return true;
   })
      .value();
}

int main(int argc, char** argv) {
  const long crash_after = argc == 3 && std::string(argv[1]) == "--crash-after" ? std::atol(argv[2]) : -1;
  const char* env = std::getenv("CAIRN_POOL_DIR");
  const std::string dir = env != nullptr ? env : "/dev/shm/cairn";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/step7.pool";
  cairn::octree::Options o;
  o.dims = 2;
  o.data_size = sizeof(Cell);
  o.pool_size = 64u << 20;

  auto restored = Octree::restore(path, o);  // (1)
  if (!restored.ok() && restored.error().code == Errc::no_version) Octree::remove(path).value();
  if (!restored.ok() && restored.error().code != Errc::not_found && restored.error().code != Errc::no_version) {
    std::fprintf(stderr, "step7: %s\n", restored.error().message.c_str());
    return 1;
  }
  std::unique_ptr<Octree> t = restored.ok() ? std::move(restored.value()) : Octree::create(path, o).value();
  const long start = reinterpret_cast<const Cell*>(t->root_data())->steps_done;
  for (long s = start; s < kSteps; ++s) {
    advance(*t, s);
    t->persist().value();  // (3) durable: a crash from here on resumes at step s + 1
    if (s + 1 == crash_after) std::raise(SIGKILL);
  }

  // The same steps in a tree that never stopped give the same bits.
  const std::string again = dir + "/step7-uninterrupted.pool";
  std::filesystem::remove(again);
  auto u = Octree::create(again, o).value();
  for (long s = 0; s < kSteps; ++s) advance(*u, s);
  const bool same = t->checksum().value() == u->checksum().value();
  std::printf("step7: resumed at step %ld of %ld, version %llu, %llu leaves; mesh %s the uninterrupted run's\n", start,
              kSteps, static_cast<unsigned long long>(t->version()),
              static_cast<unsigned long long>(t->leaf_count().value()), same ? "equals" : "DIFFERS FROM");
  u.reset();
  Octree::remove(again).value();
  return same ? 0 : 1;
}
