// heartbeat.hpp — the record a dist::Context writes to $CAIRN_HEARTBEAT_DIR/
// heartbeat.<rank> after restore and each commit, and what reads it (`cairn
// launch`, `cairn bench dist`). No MPI here: the readers do not link it.
//
// The file (format 2): {magic "crnbeat2", format, CRC-32C of the values, the
// values} in one pwrite at offset 0, 48 bytes. A reader that finds anything
// else gets a typed error and takes nothing from it: the launcher kills the
// pids its beats name, so a damaged beat must never name a process. Format 1
// (the 32 bytes of values alone) is recognised and refused (wrong_version).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "cairn/error.hpp"
#include "util/crc32c.hpp"

namespace cairn::dist::detail {

struct Heartbeat {
  std::uint64_t version = 0;      // the rank's newest global version
  std::uint64_t pid = 0;          // the process that beat (the compute process when supervised)
  std::uint64_t restored = 0;     // the version its restore selected, 0 if none
  std::uint64_t interval_ns = 0;  // since its beat before, 0 for the first
};
static_assert(sizeof(Heartbeat) == 32);

inline std::string heartbeat_path(const std::string& dir, int rank) {
  return dir + "/heartbeat." + std::to_string(rank);
}

// The record on disk: the values behind a magic, a format and their CRC.
struct HeartbeatRecord {
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t crc;  // CRC-32C of `beat`
  Heartbeat beat;
};
static_assert(sizeof(HeartbeatRecord) == 48);
static_assert(offsetof(HeartbeatRecord, beat) == 16);
inline constexpr std::uint64_t kHeartbeatMagic = 0x32746165626e7263ULL;  // "crnbeat2"
inline constexpr std::uint32_t kHeartbeatFormat = 2;
// A pid beyond Linux's PID_MAX_LIMIT (2^22) is no process's.
inline constexpr std::uint64_t kMaxPid = 1u << 22;

inline HeartbeatRecord heartbeat_record(const Heartbeat& h) {
  return {kHeartbeatMagic, kHeartbeatFormat, util::crc32c(0, &h, sizeof h), h};
}

// One pwrite at offset 0; a lost beat only delays detection (the reader
// looks at the file's modification time).
inline void write_heartbeat(int fd, const Heartbeat& h) {
  const HeartbeatRecord r = heartbeat_record(h);
  [[maybe_unused]] const ssize_t n = ::pwrite(fd, &r, sizeof r, 0);
}

// The beat in the bytes of a heartbeat file `path`. An empty file is
// Errc::no_version (the rank created it and has not beaten yet), format 1
// Errc::wrong_version, anything but a record Errc::foreign_file, a record
// failing its CRC or naming no possible process Errc::corrupted.
inline Result<Heartbeat> parse_heartbeat(std::span<const std::byte> bytes, const std::string& path) {
  const std::string advice = ": remove it (the rank writes it again at its next commit)";
  if (bytes.empty()) return make_error(Errc::no_version, path + ": the rank has not beaten yet");
  if (bytes.size() == sizeof(Heartbeat))
    return make_error(Errc::wrong_version, path +
                                               " is a heartbeat of format 1 (an older cairn, no checksum): "
                                               "relaunch the job with this cairn's ranks" +
                                               advice);
  HeartbeatRecord r{};
  if (bytes.size() >= sizeof r.magic) std::memcpy(&r.magic, bytes.data(), sizeof r.magic);
  if (bytes.size() < sizeof r.magic || r.magic != kHeartbeatMagic)
    return make_error(Errc::foreign_file, path + " is not a cairn heartbeat" + advice);
  if (bytes.size() != sizeof r)
    return make_error(
        bytes.size() < sizeof r ? Errc::truncated : Errc::corrupted,
        path + ": a heartbeat of " + std::to_string(bytes.size()) + " bytes, not " + std::to_string(sizeof r) + advice);
  std::memcpy(&r, bytes.data(), sizeof r);
  if (r.format != kHeartbeatFormat)
    return make_error(Errc::wrong_version, path + ": heartbeat format " + std::to_string(r.format) +
                                               ", this cairn reads format " + std::to_string(kHeartbeatFormat) +
                                               advice);
  if (util::crc32c(0, &r.beat, sizeof r.beat) != r.crc)
    return make_error(Errc::corrupted, path + ": the heartbeat fails its checksum (damaged)" + advice);
  if (r.beat.pid == 0 || r.beat.pid > kMaxPid || r.beat.restored > r.beat.version)
    return make_error(Errc::corrupted, path + ": the heartbeat names pid " + std::to_string(r.beat.pid) + ", version " +
                                           std::to_string(r.beat.version) + " restored from " +
                                           std::to_string(r.beat.restored) + ": no rank beats so" + advice);
  return r.beat;
}

// The writer of one rank's beats: heartbeat.<rank> in $CAIRN_HEARTBEAT_DIR
// (nothing when it is not set), each beat {version, this process, restored,
// nanoseconds since the beat before}.
class HeartbeatWriter {
 public:
  explicit HeartbeatWriter(int rank) {
    if (const char* dir = std::getenv("CAIRN_HEARTBEAT_DIR"); dir != nullptr && *dir != 0)
      fd_ = ::open(heartbeat_path(dir, rank).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~HeartbeatWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;
  // `restored`: the version this process restored (0: none), in every beat.
  void beat(std::uint64_t version, std::uint64_t restored) {
    if (fd_ < 0) return;
    const auto now = std::chrono::steady_clock::now();
    const std::uint64_t interval =
        last_ == std::chrono::steady_clock::time_point{}
            ? 0
            : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count());
    last_ = now;
    write_heartbeat(fd_, {version, static_cast<std::uint64_t>(::getpid()), restored, interval});
  }

 private:
  int fd_ = -1;
  std::chrono::steady_clock::time_point last_{};
};

// The beat in the file `path`: Errc::not_found when it is missing, else
// what parse_heartbeat says.
inline Result<Heartbeat> read_heartbeat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return make_error(errno == ENOENT ? Errc::not_found : Errc::io_error,
                      path + ": cannot open the heartbeat: " + std::strerror(errno));
  // One byte more than a record: a longer file is refused, not cut.
  std::byte buf[sizeof(HeartbeatRecord) + 1];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  const int err = errno;
  ::close(fd);
  if (n < 0) return make_error(Errc::io_error, path + ": cannot read the heartbeat: " + std::strerror(err));
  return parse_heartbeat({buf, static_cast<std::size_t>(n)}, path);
}

}  // namespace cairn::dist::detail
