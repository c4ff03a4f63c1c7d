// layout.hpp — the registered regions and pointers of a Context, the
// descriptor stored with every version, and pointer relocation (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cairn/persist.hpp"

namespace cairn::pool {
class Pool;
}
namespace cairn::devices {
class FaultInjector;
}

namespace cairn::persist {

// Gives strategies access to the private fields of Region and DualRegion.
struct detail_access {
  static void*& data(Region& r) { return r.data_; }
  static bool user_memory(const Region& r) { return r.user_memory; }
  static void*& buf(DualRegion& d, int i) { return d.buf_[i]; }
  static int& read_index(DualRegion& d) { return d.read_; }
};

namespace detail {

// One registered region, plain or dual, in registration order.
struct Entry {
  std::string name;
  std::size_t bytes = 0;
  bool dual = false;
  Region* plain = nullptr;
  DualRegion* pair = nullptr;
  // The buffer holding the latest state (plain: the data; dual: read()).
  void* latest() const;
  // The buffer the current iteration writes (plain: the data; dual: write()).
  void* working() const;
};

// Where a pointer's target was at commit: region index and offset, or null.
// Fixed-width so it can be stored on media as is.
struct PointerRecord {
  std::uint32_t region;  // kNull: the pointer was null
  std::uint32_t reserved;
  std::uint64_t offset;
  static constexpr std::uint32_t kNull = 0xffffffffu;
};
static_assert(sizeof(PointerRecord) == 16);

// On-media region descriptor (part of the layout stored with each version).
struct RegionDesc {
  char name[48];
  std::uint64_t bytes;
  std::uint64_t dual;
};
static_assert(sizeof(RegionDesc) == 64);

// Options of cairn's own harnesses, never set by applications: they reach a
// Context only through create_context() (persist.hpp declares it), and reach
// the strategy with the layout it opens.
struct InternalOptions {
  // The crash simulator's way in: SlotStore attaches to this pool (already
  // open, borrowed, an image on the simulator device) instead of opening
  // <dir>/<name>.pool. The state lives at root slot 0 as usual; a pool whose
  // root slot 0 is empty counts as new.
  pool::Pool* borrowed_pool = nullptr;
  // shadow: behave as if the pool file could not be mapped (its DRAM view).
  bool shadow_dram_view = false;
  // The pool's device is a fault device driven by this injector (the
  // conformance suite's failed write-backs) instead of Options::device.
  std::shared_ptr<devices::FaultInjector> fault_injector;
  // in-place with the helper thread: hand every flush to the helper, however
  // small (the crash harness's regions are all below the size in-place
  // flushes on the calling thread, and its async workload is there to
  // explore the helper's protocol).
  bool in_place_helper_only = false;
};

struct Layout {
  InternalOptions internal;
  std::vector<std::unique_ptr<Region>> plains;
  std::vector<std::unique_ptr<DualRegion>> pairs;
  std::vector<Entry> entries;
  // Where each registered pointer lives: region index and byte offset.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> pointers;

  std::size_t total_bytes() const;
  // Hash of names, sizes, kinds and pointer locations.
  std::uint64_t hash() const;
  std::vector<RegionDesc> descriptors() const;
  // Compares a stored layout with this one; the error lists the differences.
  Result<void> check_same(const std::vector<RegionDesc>& stored, std::uint64_t stored_pointers,
                          std::uint64_t stored_hash) const;

  // Region index and offset of address p within any region's buffers.
  bool locate(const void* p, std::uint32_t& region, std::uint64_t& offset) const;
  // Records every registered pointer's target (pointers read from the latest
  // buffers). Fails if a pointer targets memory outside every region.
  Result<void> capture_pointers(std::vector<PointerRecord>& out) const;
  // Rewrites every registered pointer (in the latest buffers) from records.
  Result<void> apply_pointers(const std::vector<PointerRecord>& records) const;
  // Address of the i-th registered pointer in the latest buffers.
  void** pointer_slot(std::size_t i) const;
};

}  // namespace detail
}  // namespace cairn::persist
