// mapped_file.hpp — crash simulation of a file that a library maps and
// persists itself (libpmemobj), for Workload::make_file (internal to
// tests/crashsim).
//
// The harness keeps its usual images (working, durable, scratch: memfds); the
// structure reaches one as a file, `<dir>/<name>`, a symbolic link to
// /proc/self/fd/N of the image's memfd, so the library opens, maps and
// persists the very bytes the harness patches and compares. A FileWatch names
// that file (device and inode) and this file interposes, in the test
// executable, the calls through which the library maps and persists it:
//
//   mmap, munmap   a mapping of the watched file is learned when it is made:
//                  the one covering the whole file (the pool) gets a write
//                  tracker before the library writes a byte, and in an armed
//                  run the SimDevice is bound to it; partial mappings (the
//                  pool header, mapped apart while opening and closing) are
//                  folded into the whole mapping's tracked pages. munmap stops
//                  tracking first.
//   msync          (msync model: libpmem's pmem_msync on a non-DAX file) a
//                  flush of the SimDevice: a crash point, then the enclosing
//                  pages are durable when it returns.
//   pmem_is_pmem, pmem_flush, pmem_drain, pmem_persist, pmem_memcpy,
//   pmem_memmove, pmem_memset, pmem_deep_flush
//                  (adr / eadr: what PMEM_IS_PMEM_FORCE=1 does, for the watched
//                  file only) pmem_is_pmem says yes, so the library persists
//                  with cache-line flushes and fences, and those reach the
//                  SimDevice as flush and drain: crash points, per the model.
//
// libpmemobj calls all of these through its PLT, libpmem calls msync through
// its own, and the executable defines them (interpose.cpp, linked into the
// executables that run file workloads), so its definitions win. Calls on
// anything else (no watch, or another address) go to the real functions.
// calls() counts what was routed, so a test can check the routing works.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tests/crashsim/checker.hpp"
#include "tests/crashsim/crashsim.hpp"
#include "tests/crashsim/image.hpp"

namespace cairn::testing::crashsim {

class SimDevice;

class FileWatch {
 public:
  // Watches the file open as `fd` (its size is `size`). With a device (an
  // armed run), the device is bound to the library's whole-file mapping when
  // it is made and every persist call on the file goes to it; without one (a
  // check), persist calls only write (the image is memory) and the pages the
  // library writes are recorded for written_pages().
  FileWatch(int fd, std::size_t size, Durability durability, SimDevice* device);
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  bool ok() const { return ok_; }
  // What went wrong inside an interposed call (they cannot return errors).
  const std::string& problem() const { return problem_; }
  // The whole-file mapping is live (and the device bound to it, if any).
  bool mapped() const { return primary_ != nullptr; }
  // File pages the library may have written since the watch began (a superset).
  void written_pages(std::vector<std::uint32_t>& out);

  // ---- called by the interposed functions ----
  bool matches(dev_t dev, ino_t ino) const;
  bool cpu_model() const { return durability_ != Durability::msync; }
  bool contains(const void* addr) const;
  void on_map(std::byte* base, std::size_t len, off_t offset);
  void on_unmap(const std::byte* base, std::size_t len);
  // [addr, addr + len) of one of its mappings; false if not ours.
  bool flush(const void* addr, std::size_t len);
  void drain();
  bool has_device() const { return device_ != nullptr; }
  std::uint64_t seq() const { return seq_; }

 private:
  struct Map {
    std::byte* base;
    std::size_t len;
    std::uint64_t offset;
  };
  const Map* find(const void* addr) const;
  WriteTracker* tracker() const;
  void learn_secondaries();
  void harvest();  // the tracker's learned pages into written_

  dev_t dev_{};
  ino_t ino_{};
  std::size_t size_ = 0;
  Durability durability_;
  SimDevice* device_;
  bool ok_ = false;
  std::string problem_;
  std::uint64_t seq_ = 0;
  int slot_ = -1;
  std::vector<Map> maps_;
  std::byte* primary_ = nullptr;
  std::size_t primary_len_ = 0;
  std::unique_ptr<WriteTracker> tracker_;  // checks; armed runs use the device's
  void* ctx_ = nullptr;
  void (*flush_)(void*, const void*, std::size_t) = nullptr;
  void (*drain_)(void*) = nullptr;
  std::vector<std::uint32_t> secondary_pages_, written_;
  std::vector<std::uint64_t> written_bits_;
};

// For interpose.cpp.
namespace interpose {
extern std::atomic<std::uint64_t> msyncs, flushes, drains, maps;
bool any_watch();
FileWatch* watch_at(const void* addr);
FileWatch* innermost();
void on_mapped(void* base, std::size_t len, int fd, off_t offset);
void on_unmapped(void* base, std::size_t len);
}  // namespace interpose

// Test the tester: persist calls (msync, flushes) that touch a range added
// here never reach the simulator's durable image in armed runs, as with a
// library that forgot to persist them. A broken workload variant adds the
// ranges of its own buffers after opening and removes them when it closes.
void drop_persists_add(const void* base, std::size_t len);
void drop_persists_remove(const void* base);

// Whether this executable links interpose.cpp.
bool interposer_linked();

// Persist calls routed to watches since the process started (msync, flush,
// drain), and mappings of watched files learned.
struct InterposeCalls {
  std::uint64_t msyncs = 0, flushes = 0, drains = 0, maps = 0;
};
InterposeCalls interpose_calls();

// A link `<dir>/<name>` to an image's memfd, made on first use per image.
class ImageLinks {
 public:
  ImageLinks();
  ~ImageLinks();
  // The directory holding `name`, a link to the image's memfd.
  Result<std::string> dir_for(const Image& image, const std::string& name);

 private:
  std::string root_;
  std::vector<std::pair<int, std::string>> made_;
};

// Conditions 1 and 3 on one crash image of a file workload (checker.hpp has
// the pool version): recovery through the structure's own library yields a
// version the model allows, K further operations commit, and a clean reopen
// recovers the model's last version. Condition 2 is the library's: every
// open runs its own consistency checks (libpmemobj: lanes and heap) and a
// failure there fails the open. `written` receives the image pages written.
// The image is the memfd `image_fd` of `size` bytes, linked as a file in `dir`.
CheckOutcome check_file_state(int image_fd, std::size_t size, const std::string& dir, Durability durability,
                              const CheckConfig& config, const Expect& expect, std::uint64_t rng_seed,
                              std::vector<std::uint32_t>& written);

// Runs check_file_state in a process forked before the run opens its pool:
// libpmemobj keeps one pool per UUID in a process (a second pmemobj_open of a
// copy fails with EEXIST), and every crash image is a copy of the working
// pool. The images are memfds created before the fork, so the server opens
// the same bytes through the same links. A crash (or abort) of recovery in
// the server is reported as a failure of that state.
class CheckServer {
 public:
  static Result<std::unique_ptr<CheckServer>> start(const Workload& workload);
  ~CheckServer();
  CheckServer(const CheckServer&) = delete;
  CheckServer& operator=(const CheckServer&) = delete;
  CheckOutcome check(int image_fd, std::size_t size, const std::string& dir, Durability durability, unsigned extend_ops,
                     const Expect& expect, std::uint64_t rng_seed, std::vector<std::uint32_t>& written);

 private:
  CheckServer() = default;
  void serve();
  const Workload* workload_ = nullptr;
  std::byte* shared_ = nullptr;
  int req_[2] = {-1, -1}, resp_[2] = {-1, -1};
  pid_t pid_ = -1;
  bool dead_ = false;
};

}  // namespace cairn::testing::crashsim
