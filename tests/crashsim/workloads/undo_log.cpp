// undo_log.cpp — the `undo-log` strategy under the harness: a persist::Context
// of strategy undo-log (libpmemobj transactions, src/persist/undo_log) whose
// pool file is one of the harness's images (a FileStructure: the library maps
// and persists it itself; mapped_file.hpp routes its mappings, msync calls
// and, under adr/eadr, libpmem's flushes and fences to the simulator). The
// state is the one of the other strategy workloads (strategies.cpp): a dual
// region, a plain region, and a plain region holding two registered pointers
// into it; each step changes a few random words, re-aims the pointers and
// commits. Recovery is a fresh Context: pmemobj_open (which rolls back an
// interrupted transaction), restore, read everything back.
//
// Durability: msync is what runs on a non-DAX file (libpmem's pmem_is_pmem is
// false, libpmemobj persists with pmem_msync); adr and eadr are the path
// PMEM_IS_PMEM_FORCE=1 or real persistent memory takes (pmem_is_pmem true:
// pmem_flush / pmem_drain / pmem_memcpy...).
//
// The setup pool is created by the strategy itself, then two pool features
// are switched off in its header, as `pmempool feature --disable` would:
// SHUTDOWN_STATE and CHECK_BAD_BLOCKS make every pmemobj_open query libndctl
// about the file's NVDIMM (several milliseconds, and there is none: the pool
// is a memfd); neither takes part in transactions or their recovery.
//
// Broken variants (the harness must catch them):
//   .unflushed_data  libpmemobj's persists of the region objects never reach
//                    the durable image (a library whose commit forgets to
//                    flush the ranges): a committed version is lost.
//   .unlogged_write  the application also writes the dual region's read()
//                    buffer, which is not in the transaction (a range missing
//                    from the undo log): a crash before the commit point
//                    recovers a mix.
#include <cstring>
#include <fstream>

#include "cairn/persist.hpp"
#include "tests/crashsim/mapped_file.hpp"
#include "tests/crashsim/workloads/context_state.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

constexpr const char* kName = "state";

enum class Broken { none, unflushed_data, unlogged_write };

// libpmemobj's pool header (common/pool_hdr.h, format 6): features at 12,
// checksum at 4088 over the first 2 KiB (CKSUM_2K), Fletcher-64-like.
constexpr std::size_t kHdrFeatures = 12, kHdrChecksum = 4088, kHdrChecksummed = 2048;
constexpr std::uint32_t kCompatCheckBadBlocks = 0x1, kIncompatCksum2K = 0x2, kIncompatSds = 0x4;

std::uint64_t pool_hdr_checksum(const unsigned char* h) {
  std::uint32_t lo = 0, hi = 0;
  for (std::size_t i = 0; i < 4096 / 4;) {
    if (i == kHdrChecksum / 4 || i >= kHdrChecksummed / 4) {
      i += 2;
      hi += lo;
      hi += lo;
    } else {
      std::uint32_t w;
      std::memcpy(&w, h + 4 * i, 4);
      lo += w;
      ++i;
      hi += lo;
    }
  }
  return std::uint64_t{hi} << 32 | lo;
}

// Clears SHUTDOWN_STATE and CHECK_BAD_BLOCKS in the closed pool's header.
Result<void> disable_ndctl_features(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char h[4096];
  if (!f.read(reinterpret_cast<char*>(h), sizeof h)) return make_error(Errc::io_error, "cannot read " + path);
  std::uint64_t stored;
  std::memcpy(&stored, h + kHdrChecksum, 8);
  std::uint32_t feat[3];
  std::memcpy(feat, h + kHdrFeatures, sizeof feat);
  if (std::memcmp(h, "PMEMOBJ", 8) != 0 || (feat[1] & kIncompatCksum2K) == 0 || pool_hdr_checksum(h) != stored)
    return make_error(Errc::unsupported, path +
                                             ": not the libpmemobj pool header this workload knows (format 6, "
                                             "2 KiB checksum); cannot switch off its NVDIMM features");
  feat[0] &= ~kCompatCheckBadBlocks;
  feat[1] &= ~kIncompatSds;
  std::memcpy(h + kHdrFeatures, feat, sizeof feat);
  const std::uint64_t sum = pool_hdr_checksum(h);
  std::memcpy(h + kHdrChecksum, &sum, 8);
  f.seekp(0);
  if (!f.write(reinterpret_cast<const char*>(h), sizeof h)) return make_error(Errc::io_error, "cannot write " + path);
  return {};
}

class UndoLogState final : public FileStructure {
 public:
  explicit UndoLogState(Broken broken) : broken_(broken) {}
  ~UndoLogState() override {
    // The Context (and libpmemobj) closes before the dropped ranges go.
    state_.close();
    for (const void* b : dropped_) drop_persists_remove(b);
  }

  std::string file_name() const override { return std::string(kName) + ".obj"; }

  Result<void> create(const std::string& dir, Model& model, Rng& rng) override {
    if (auto r = open(dir); !r.ok()) return r;
    if (auto r = state_.fill(rng); !r.ok()) return r;
    if (auto r = state_.commit(model); !r.ok()) return r;
    state_.close();
    return disable_ndctl_features(dir + "/" + file_name());
  }

  Result<Version> recover(const std::string& dir) override {
    if (auto r = open(dir); !r.ok()) return std::move(r).error();
    return state_.restore();
  }

  Result<void> step(Model& model, Rng& rng) override {
    if (auto r = state_.change(rng); !r.ok()) return r;
    if (broken_ == Broken::unlogged_write) {
      // The committed version's buffer, outside the transaction.
      const std::uint64_t v = rng() | 1;
      std::memcpy(static_cast<std::byte*>(state_.dual().read()) + 8 * rng.below(ContextState::kDualBytes / 8), &v, 8);
    }
    return state_.commit(model);
  }

 private:
  Result<void> open(const std::string& dir) {
    persist::Options o;
    o.strategy = "undo-log";
    o.dir = dir;
    o.name = kName;
    o.threads = 1;
    if (auto r = state_.create_context(o); !r.ok()) return r;
    if (auto r = state_.context().open(); !r.ok()) return r;
    if (auto r = state_.register_pointers(); !r.ok()) return r;
    if (broken_ == Broken::unflushed_data) {
      persist::DualRegion& u = state_.dual();
      for (const void* b : {static_cast<const void*>(u.read()), static_cast<const void*>(u.write())})
        drop(b, ContextState::kDualBytes);
      drop(state_.plain().data(), ContextState::kPlainBytes);
      drop(state_.link_region().data(), ContextState::kLinks * sizeof(void*));
    }
    return {};
  }

  void drop(const void* base, std::size_t len) {
    drop_persists_add(base, len);
    dropped_.push_back(base);
  }

  Broken broken_;
  ContextState state_;
  std::vector<const void*> dropped_;
};

Workload make(const std::string& name, const char* what, Broken broken) {
  Workload w;
  w.name = name;
  w.description = what;
  // For `cairn crashsim list` only: the images are as large as the file the
  // strategy creates (about 18 MiB: 16 MiB of slack plus the regions).
  w.pool_size = 18u << 20;
  w.steps = 12;
  w.broken = broken != Broken::none;
  w.make_file = [broken] { return std::make_unique<UndoLogState>(broken); };
  return w;
}

}  // namespace

std::vector<Workload> undo_log_workloads() {
  return {
      make("strategy.undo-log", "undo-log: libpmemobj transactions on the pool file (the library's own mapping)",
           Broken::none),
      make("strategy.undo-log.unflushed_data",
           "broken: libpmemobj's persists of the region objects never become durable", Broken::unflushed_data),
      make("strategy.undo-log.unlogged_write",
           "broken: the application writes a range outside the transaction (the dual region's read buffer)",
           Broken::unlogged_write),
  };
}

}  // namespace cairn::testing::crashsim::builtin
