// internal.hpp — the PM-octree on a pool the caller owns, and the broken
// variants the crash harness must catch (cairn's own tests only).
#pragma once

#include <memory>

#include "cairn/octree.hpp"

namespace cairn::pool {
class Pool;
}

namespace cairn::octree::detail {

struct Internal {
  // Broken: the commit record and root are published before the blocks of
  // the new version are flushed.
  bool publish_before_flush = false;
  // Broken: a block shared with the persistent version is changed in place.
  bool skip_copy_on_write = false;
  // Broken: garbage collection marks only from the working version.
  bool gc_ignores_committed = false;
  // Broken: with keep_previous, garbage collection does not mark from the
  // kept previous version, so its blocks are reused while it is kept.
  bool gc_ignores_previous = false;
  // Broken: a DRAM (C0) block changed after a persist keeps its twin, so the
  // next persist commits the twin's old contents.
  bool stale_twin = false;
};

struct Factory {
  // A new tree in `pool` (root slot 0 must be empty); the pool is borrowed.
  static Result<std::unique_ptr<Octree>> format(pool::Pool& pool, const Options& options,
                                                const Internal& internal = {});
  // The persisted tree of `pool` (as Octree::restore); the pool is borrowed.
  static Result<std::unique_ptr<Octree>> attach(pool::Pool& pool, const Options& options,
                                                const Internal& internal = {});
};

}  // namespace cairn::octree::detail
