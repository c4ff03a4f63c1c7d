// ref_array.cpp — the harness's reference structure: a persistent array with a
// version word and an undo log, and the catalogue of broken variants the
// harness must catch (README.md, "testing the tester").
//
// Layout of the one extent root slot 0 points to:
//   line 0   Header: magic, version (the commit word), elems, log capacity
//   line 1   LogHeader: target, count, checksum (over target, count, entries)
//   line 2.. LogEntry[kLogCap]: {index, old value}
//   then     uint64_t array[kElems]
// Version words carry the version number in both halves, (k << 32) | k, so
// that every commit changes both 4-byte halves (a torn word is never a valid
// version).
//
// An in-place commit of version k+1, in the order things must become durable:
//   1. the undo log (old values of the elements to change) and its header
//      {target = version k+1, count, checksum}: one flush of the log lines and
//      one fence. The checksum, not ordering, rejects a partly durable log;
//   2. the new values, in place: flush each line, one fence;
//   3. the commit point: one aligned 8-byte store of the version word,
//      flushed and fenced.
// Recovery: if the log's target is the version after the durable version
// word and its checksum holds, the commit was cut short: write the old values
// back, make them durable, then retire the log (target = 0). Retiring last
// makes recovery restartable: a crash in it finds the same log again.
//
// Every 8th commit relocates the array instead (copy-on-write): a new extent
// is written and made durable, then published as root 0 (the pool's commit
// point), then the old extent is freed.
#include <algorithm>
#include <cstring>
#include <thread>

#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

constexpr std::uint64_t kMagic = 0x5952524146455243ULL;  // "CREFARRY"
constexpr std::uint64_t kElems = 512;
constexpr std::uint64_t kLogCap = 16;
constexpr std::uint64_t kStep = 0x100000001ULL;  // version k -> word (k << 32) | k
constexpr unsigned kRelocateEvery = 8;

struct Header {
  std::uint64_t magic;
  std::uint64_t version;
  std::uint64_t elems;
  std::uint64_t log_capacity;
  std::uint64_t reserved[4];
};
struct LogHeader {
  std::uint64_t target;
  std::uint64_t count;
  std::uint64_t checksum;
  std::uint64_t reserved[5];
};
struct LogEntry {
  std::uint64_t index;
  std::uint64_t old;
};
struct Extent {
  Header header;
  LogHeader log;
  LogEntry entries[kLogCap];
  std::uint64_t array[kElems];
};
static_assert(sizeof(Header) == 64 && sizeof(LogHeader) == 64);
static_assert(offsetof(Extent, log) == 64 && offsetof(Extent, entries) == 128);
static_assert(offsetof(Extent, array) % 64 == 0);

enum class Bug {
  none,
  missing_flush,            // the new values are fenced but never flushed
  missing_fence,            // no fence between the new values and the commit word
  wrong_order,              // the new values are made durable before the undo log
  root_before_data,         // relocation publishes the root before the new extent is durable
  torn_commit_word,         // the version word is written as two 4-byte halves
  checksum_not_verified,    // recovery trusts the log header without its checksum
  recovery_not_idempotent,  // recovery retires the log before its rollback is durable
  unflushed_recovery,       // recovery's rollback is never flushed
  drain_on_other_thread,    // new values flushed by a helper thread, fenced by this one
};

std::uint64_t log_checksum(const LogHeader& h, const LogEntry* e) {
  std::uint64_t buf[2] = {h.target, h.count};
  std::uint64_t c = pool::checksum64(buf, sizeof buf);
  return c ^ pool::checksum64(e, sizeof(LogEntry) * std::min(h.count, kLogCap)) * 31;
}

Version make_version(std::uint64_t word, const std::uint64_t* array) {
  Version v;
  v.number = word;
  v.bytes.resize(8 + kElems * 8);
  std::memcpy(v.bytes.data(), &word, 8);
  std::memcpy(v.bytes.data() + 8, array, kElems * 8);
  return v;
}

class RefArray final : public Structure {
 public:
  explicit RefArray(Bug bug) : bug_(bug) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    auto off = pool.arena().alloc(sizeof(Extent));
    if (!off.ok()) return std::move(off).error();
    Extent x{};
    x.header = Header{kMagic, kStep, kElems, kLogCap, {}};
    x.log.checksum = log_checksum(x.log, x.entries);
    for (auto& a : x.array) a = rng() | 1;
    model.begin(make_version(kStep, x.array));
    pool.memcpy_persist(pool.at(off.value()), &x, sizeof x);
    auto r = pool.publish_root(0, off.value(), kStep);
    if (!r.ok()) return r;
    model.end();
    off_ = off.value();
    return {};
  }

  Result<Version> recover(pool::Pool& pool) override {
    const pool::RootSlot root = pool.root(0);
    if (root.offset == 0) return make_error(Errc::corrupted, "refarray: root 0 is empty");
    auto rb = pool.arena().rebuild();
    if (auto m = rb.mark(root.offset, sizeof(Extent)); !m.ok()) return std::move(m).error();
    rb.finish();
    off_ = root.offset;
    Extent* x = extent(pool);
    if (x->header.magic != kMagic || x->header.elems != kElems || x->header.log_capacity != kLogCap)
      return make_error(Errc::corrupted, "refarray: extent at " + std::to_string(off_) + " has a bad header");
    const std::uint64_t v = x->header.version;
    LogHeader& lh = x->log;
    const bool checksum_ok = bug_ == Bug::checksum_not_verified || lh.checksum == log_checksum(lh, x->entries);
    if (lh.target == v + kStep && lh.count <= kLogCap && checksum_ok) {
      // The commit of version v+1 was cut short: undo it.
      if (bug_ == Bug::recovery_not_idempotent) retire_log(pool, x);
      for (std::uint64_t i = lh.count; i-- > 0;) {
        const LogEntry& e = x->entries[i];
        if (e.index >= kElems) return make_error(Errc::corrupted, "refarray: log entry index out of range");
        x->array[e.index] = e.old;
        if (bug_ != Bug::unflushed_recovery) pool.flush(&x->array[e.index], 8);
      }
      if (bug_ != Bug::unflushed_recovery) pool.drain();
      if (bug_ != Bug::recovery_not_idempotent) retire_log(pool, x);
    }
    return make_version(v, x->array);
  }

  Result<void> step(pool::Pool& pool, Model& model, Rng& rng) override {
    Extent* x = extent(pool);
    const std::uint64_t v = x->header.version;
    const std::uint64_t next = v + kStep;
    // Which elements change, and to what.
    const unsigned n = 1 + static_cast<unsigned>(rng.below(6));
    std::uint64_t idx[kLogCap]{}, val[kLogCap]{};
    unsigned u = 0;
    while (u < n) {
      const std::uint64_t i = rng.below(kElems);
      if (std::find(idx, idx + u, i) != idx + u) continue;
      idx[u] = i;
      val[u] = rng() | 1;
      ++u;
    }
    std::uint64_t after[kElems];
    std::memcpy(after, x->array, sizeof after);
    for (unsigned j = 0; j < u; ++j) after[idx[j]] = val[j];
    model.begin(make_version(next, after));
    if (((next & 0xffffffffu) % kRelocateEvery) == 0) {
      auto r = relocate(pool, x, next, after);
      if (!r.ok()) {
        model.abort();
        return r;
      }
      model.end();
      return {};
    }

    auto write_log = [&] {
      // 1. undo log + header, one flush and one fence; the checksum rejects
      // any partly durable combination.
      for (unsigned j = 0; j < u; ++j) x->entries[j] = LogEntry{idx[j], x->array[idx[j]]};
      LogHeader h{};
      h.target = next;
      h.count = u;
      h.checksum = log_checksum(h, x->entries);
      x->log.target = h.target;
      x->log.count = h.count;
      x->log.checksum = h.checksum;
      pool.persist(&x->log, sizeof(LogHeader) + u * sizeof(LogEntry));
    };
    auto write_values = [&] {
      // 2. the new values in place.
      for (unsigned j = 0; j < u; ++j) x->array[idx[j]] = val[j];
      if (bug_ == Bug::drain_on_other_thread) {
        std::thread helper([&] {
          for (unsigned j = 0; j < u; ++j) pool.flush(&x->array[idx[j]], 8);
        });
        helper.join();
        pool.drain();  // orders only this thread's flushes: the helper's are not covered
        return;
      }
      if (bug_ != Bug::missing_flush)
        for (unsigned j = 0; j < u; ++j) pool.flush(&x->array[idx[j]], 8);
      if (bug_ != Bug::missing_fence) pool.drain();
    };
    if (bug_ == Bug::wrong_order) {
      write_values();
      write_log();
    } else {
      write_log();
      write_values();
    }
    // 3. the commit point: one aligned 8-byte store, persisted.
    if (bug_ == Bug::torn_commit_word) {
      auto* halves = reinterpret_cast<std::uint32_t*>(&x->header.version);
      halves[0] = static_cast<std::uint32_t>(next);
      pool.persist(&halves[0], 4);
      halves[1] = static_cast<std::uint32_t>(next >> 32);
      pool.persist(&halves[1], 4);
    } else {
      __atomic_store_n(&x->header.version, next, __ATOMIC_RELEASE);
      pool.persist(&x->header.version, 8);
    }
    pool.marker(devices::Marker::commit_point, "refarray version word persisted");
    model.end();
    return {};
  }

  std::optional<std::uint64_t> blocks_in_use(const Version&) const override {
    return (sizeof(Extent) + pool::kDefaultBlockSize - 1) / pool::kDefaultBlockSize;
  }

 private:
  Extent* extent(pool::Pool& pool) const { return reinterpret_cast<Extent*>(pool.at(off_)); }

  void retire_log(pool::Pool& pool, Extent* x) {
    x->log.target = 0;
    pool.persist(&x->log.target, 8);
  }

  // Copy-on-write commit: new extent durable, then the root, then free.
  Result<void> relocate(pool::Pool& pool, Extent* x, std::uint64_t next, const std::uint64_t* after) {
    auto off = pool.arena().alloc(sizeof(Extent));
    if (!off.ok()) return std::move(off).error();
    Extent* y = reinterpret_cast<Extent*>(pool.at(off.value()));
    Extent fresh{};
    fresh.header = Header{kMagic, next, kElems, kLogCap, {}};
    fresh.log.checksum = log_checksum(fresh.log, fresh.entries);
    std::memcpy(fresh.array, after, sizeof fresh.array);
    if (bug_ == Bug::root_before_data) {
      if (auto r = pool.publish_root(0, off.value(), next); !r.ok()) return r;
      pool.memcpy_persist(y, &fresh, sizeof fresh);
    } else {
      pool.memcpy_persist(y, &fresh, sizeof fresh);
      if (auto r = pool.publish_root(0, off.value(), next); !r.ok()) return r;
    }
    (void)x;
    pool.arena().free(off_, sizeof(Extent));
    off_ = off.value();
    return {};
  }

  Bug bug_;
  std::uint64_t off_ = 0;
};

Workload make(const char* name, const char* what, Bug bug, std::uint64_t pool_size = 1u << 20) {
  Workload w;
  w.name = name;
  w.description = what;
  w.pool_size = pool_size;
  w.steps = 24;
  w.broken = bug != Bug::none;
  w.make = [bug] { return std::make_unique<RefArray>(bug); };
  return w;
}

}  // namespace

std::vector<Workload> ref_array_workloads() {
  return {
      make("refarray", "reference structure: persistent array with a version word and an undo log", Bug::none),
      make("refarray_16m", "the reference structure in a 16 MiB pool (benchmark)", Bug::none, 16u << 20),
      make("refarray.missing_flush", "broken: new values fenced but never flushed", Bug::missing_flush),
      make("refarray.missing_fence", "broken: no fence between the new values and the commit word", Bug::missing_fence),
      make("refarray.wrong_order", "broken: new values made durable before the undo log", Bug::wrong_order),
      make("refarray.root_before_data", "broken: relocation publishes the root before the new extent is durable",
           Bug::root_before_data),
      make("refarray.torn_commit_word", "broken: the 8-byte version word written as two 4-byte halves",
           Bug::torn_commit_word),
      make("refarray.checksum_not_verified", "broken: recovery does not verify the log checksum",
           Bug::checksum_not_verified),
      make("refarray.recovery_not_idempotent", "broken: recovery retires the log before its rollback is durable",
           Bug::recovery_not_idempotent),
      make("refarray.unflushed_recovery", "broken: recovery never flushes its rollback", Bug::unflushed_recovery),
      make("refarray.drain_on_other_thread", "broken: a helper thread flushes, the committing thread fences",
           Bug::drain_on_other_thread),
  };
}

}  // namespace cairn::testing::crashsim::builtin
