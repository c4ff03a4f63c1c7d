// heartbeat.hpp — the record a dist::Context writes to $CAIRN_HEARTBEAT_DIR/
// heartbeat.<rank> after restore and each commit, and what reads it (`cairn
// launch`, `cairn bench dist`). No MPI here: the readers do not link it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
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
