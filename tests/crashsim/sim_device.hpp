// sim_device.hpp — the crash-simulator device: a third Device beside real and
// emulated. It keeps a durable image next to the working mapping and decides,
// per durability model, what a flush, a drain or a non-temporal copy makes
// durable; at every such call (and every marker) it reports a crash point.
//
// adr (default). flush(range) records, for the calling thread, a copy of each
// 64-byte line as it is at flush time; a non-temporal copy or fill records the
// lines it wrote the same way. drain() by thread T writes T's recorded lines,
// as they were when flushed, into the durable image (a fence orders only its
// own thread's flushes). Lines recorded by other threads stay pending.
// eadr. flush records nothing; drain() makes everything written so far
// durable (caches are in the persistence domain, only the fence orders).
// msync. flush(range) writes the enclosing 4 KiB pages into the durable image
// when it returns (msync); drain() does nothing.
// pagecache. flush(range), a copy or a fill records the enclosing pages;
// drain() by any thread writes every recorded page, as it is then, into the
// durable image (cairn's pagecache device: one write-back per drain).
//
// Pending at a crash point: every aligned 8-byte word (msync, pagecache: 512-byte
// sector) whose working value differs from the durable one, plus every word
// of a flushed-but-undrained line whose flush-time value differs from the
// durable one. Stores are not intercepted: dirty words are found by comparing
// the pages a WriteTracker learned the program writes (image.hpp), so a crash
// point costs time in proportion to the pages written, not to the pool.
//
// Crash points are numbered from 0 while the device is armed. A hook (the
// harness) is called at each one with the device lock held, so the working
// mapping does not change under it from device calls. A crash point reached on
// another thread than the one that armed the device, or inside
// Pool::persist_mt, is flagged `deferred`: the hook must not run pool code
// that may start a parallel persist there (it would wait for this one).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/extended/device.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/crashsim/enumerate.hpp"
#include "tests/crashsim/image.hpp"

namespace cairn::testing::crashsim {

class SimDevice final : public devices::Device {
 public:
  enum class PointKind : std::uint8_t { flush, drain, copy, fill, marker, end };
  struct Point {
    std::uint64_t id = 0;
    PointKind kind = PointKind::flush;
    devices::Marker marker{};
    const char* label = "";
    bool deferred = false;
    std::uint64_t stack = 0;  // call-stack hash; 0 unless stack hashing is on
  };
  using Hook = std::function<void(const Point&)>;

  struct Config {
    Durability durability = Durability::adr;
    // The durable image (same size as the mapping), kept by the caller and
    // equal to the mapping at bind. Null: the device allocates one and copies
    // the mapping into it at bind (what is there is durable).
    std::byte* durable = nullptr;
    // Learns written pages through write faults on this tracker (which covers
    // the mapping); null: the device tracks the mapping itself if
    // track_writes, else compares the whole mapping at each crash point.
    WriteTracker* tracker = nullptr;
    bool track_writes = true;
  };

  explicit SimDevice(Config config);
  ~SimDevice() override;

  std::string name() const override { return "crashsim"; }
  Result<devices::Ops> bind(const devices::Mapping& mapping) override;
  void* context() override { return this; }
  void unbind() override;
  void marker(devices::Marker m, const char* label) override;

  void set_hook(Hook hook) { hook_ = std::move(hook); }
  // While armed, crash points are numbered and reported. The calling thread
  // becomes the arming thread.
  void arm(bool on);
  void set_stack_hashing(bool on) { hash_stacks_ = on; }
  // A crash point after the last operation of a run.
  void end_point();
  std::uint64_t points() const { return points_; }
  Durability durability() const { return config_.durability; }
  // The tracker of the bound mapping (the caller's or the device's own), or null.
  WriteTracker* tracker() const { return tracker_; }

  // ---- valid inside the hook (the device lock is held) ----
  void pending(UnitSet& out);
  // Before bind (a file workload's device waits for the library to map the
  // file): the caller's durable image, with nothing pending.
  const std::byte* durable() const { return durable_ != nullptr ? durable_ : config_.durable; }
  const std::byte* working() const { return base_; }
  std::size_t size() const { return size_; }
  // Increases whenever the durable image changes.
  std::uint64_t durable_generation() const { return generation_; }
  // Appends the pages of the durable image changed since the last call.
  void take_durable_changes(std::vector<std::uint32_t>& pages);

 private:
  struct Record {
    std::uint64_t line;  // offset of the 64-byte line
    std::uint64_t seq;
    std::byte data[64];
  };
  struct ThreadRecords {
    std::thread::id thread;
    std::vector<Record> records;
  };

  static SimDevice& self(void* ctx) { return *static_cast<SimDevice*>(ctx); }
  static void op_flush(void* ctx, const void* addr, std::size_t len);
  static void op_drain(void* ctx);
  static void op_copy(void* ctx, void* dst, const void* src, std::size_t len);
  static void op_fill(void* ctx, void* dst, int c, std::size_t len);

  void crash_point(PointKind kind, devices::Marker m = {}, const char* label = "");
  void after_write(const void* addr, std::size_t len);  // what a flush of [addr, len) does
  void record_lines(const void* addr, std::size_t len);
  void drain_thread();
  void sync_pages(std::uint64_t first, std::uint64_t last);  // durable := working on pages [first, last]
  void sync_dirty_pages();
  void mark_durable_page(std::uint64_t page);
  std::vector<Record>& my_records();
  template <class Fn>
  void for_each_candidate_page(Fn&& fn);
  std::uint64_t stack_hash() const;

  Config config_;
  std::mutex mu_;
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::byte* durable_ = nullptr;
  std::byte* own_durable_ = nullptr;  // mmap'd when Config::durable is null
  std::unique_ptr<WriteTracker> own_tracker_;
  WriteTracker* tracker_ = nullptr;
  std::vector<ThreadRecords> threads_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> recorded_pages_;  // pagecache: [first, last] pages
  std::uint64_t seq_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::uint64_t> changed_bits_;
  std::vector<std::uint32_t> changed_;
  Hook hook_;
  bool armed_ = false;
  bool hash_stacks_ = false;
  std::thread::id arm_thread_;
  std::uint64_t points_ = 0;
  bool in_hook_ = false;
};

}  // namespace cairn::testing::crashsim
