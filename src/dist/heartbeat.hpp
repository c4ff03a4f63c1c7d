// heartbeat.hpp — the record a dist::Context writes to $CAIRN_HEARTBEAT_DIR/
// heartbeat.<rank> after restore and each commit, and what reads it (`cairn
// launch`, `cairn bench dist`). No MPI here: the readers do not link it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

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

// One pwrite at offset 0; a lost beat only delays detection (the reader
// looks at the file's modification time).
inline void write_heartbeat(int fd, const Heartbeat& h) {
  [[maybe_unused]] const ssize_t n = ::pwrite(fd, &h, sizeof h, 0);
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

// The record, or nothing if the file is missing or not written yet.
inline std::optional<Heartbeat> read_heartbeat(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  Heartbeat h;
  const ssize_t n = ::pread(fd, &h, sizeof h, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof h)) return std::nullopt;
  return h;
}

}  // namespace cairn::dist::detail
