// io.hpp — system-call helpers every layer shares (internal): the errno →
// Errc mapping behind typed errors, pread/pwrite loops that retry EINTR and
// short transfers, and the one atomic file write every layer commits a file
// with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "cairn/error.hpp"

namespace cairn::util {

// ENOENT, ENOTDIR → not_found; EACCES, EPERM, EROFS → permission_denied;
// EISDIR → is_directory; ENOSPC, EFBIG, EDQUOT → device_full; EEXIST →
// already_exists; ENOMEM → out_of_space; anything else → io_error.
Errc errc_from_errno(int err) noexcept;
// The errno a POSIX-style interface (fclose, a C caller) reports for a code:
// not_found → ENOENT, permission_denied → EACCES, is_directory → EISDIR,
// invalid_argument → EINVAL, out_of_space and device_full → ENOSPC, busy →
// EBUSY, no_version → ENODATA, anything else → EIO.
int errno_from_errc(Errc code) noexcept;

// "PATH: <strerror, lower case> (WHAT)" with the mapped code, and `advice`
// (what to do, appended after "; ") when it is not empty.
Error errno_error(const std::string& path, const std::string& what, int err, const std::string& advice = "");

// Reads up to n bytes at off, retrying EINTR and short reads. Returns the
// bytes read (fewer than n only at end of file), or -errno.
long long pread_full(int fd, void* buf, std::size_t n, std::uint64_t off);

// Writes all n bytes at off in calls of at most `chunk` bytes, retrying EINTR
// and short writes. Returns 0 or an errno (EIO if a call wrote nothing);
// counts the calls made in *calls if given.
int pwrite_full(int fd, const void* buf, std::size_t n, std::uint64_t off, std::size_t chunk = SIZE_MAX,
                std::uint64_t* calls = nullptr);

// ---- atomic file write ----
//
// write_file_atomically(path, ...) replaces `path` by new contents so that
// after a crash at any point the name holds either the old file (or nothing,
// if there was none) or the whole new one. Durability order:
//   1. create <path>.tmp (truncating a stale one) and write the contents;
//   2. fsync it (the data is durable before it has the name);
//   3. rename it to <path> (atomic: the commit point);
//   4. fsync <path>'s directory (the rename is durable).
// A failure in 1-3 removes the temporary and leaves <path> as it was. A
// failure in 4 (the directory cannot be opened, or its fsync fails) leaves the
// new file under its name, but whether it survives a power failure is unknown;
// it is reported all the same, never skipped. Every error names the file, the
// step and what to do; `failed_at` (when given) says which step failed.

enum class WriteStep : std::uint8_t {
  done,       // no failure
  create,     // creating the temporary
  write,      // writing it (the fill callback, or closing it)
  fsync,      // fsync of the temporary
  rename,     // renaming it into place
  open_dir,   // opening the directory for its fsync (the new file is in place)
  fsync_dir,  // fsync of the directory (the new file is in place)
};
const char* write_step_name(WriteStep step) noexcept;

struct AtomicFileOptions {
  // What the file is, for messages: "checkpoint version 3".
  std::string what = "the file";
  // What to do about a failure of the given code, appended to the message;
  // empty: general advice (free space, a writable directory, ...).
  std::function<std::string(Errc)> advice;
  unsigned mode = 0644;
  // An open descriptor of the file's directory to fsync in step 4, or -1 to
  // open (and close) the directory here.
  int dir_fd = -1;
};

// Fills the temporary through its descriptor (opened O_WRONLY at offset 0):
// 0, or the errno of the call that failed.
using FillFd = std::function<int(int fd)>;
Result<void> write_file_atomically(const std::string& path, const FillFd& fill, const AtomicFileOptions& o = {},
                                   WriteStep* failed_at = nullptr);
// The whole file from one buffer.
Result<void> write_file_atomically(const std::string& path, std::span<const std::byte> data,
                                   const AtomicFileOptions& o = {}, WriteStep* failed_at = nullptr);
// For a library that creates and writes a file by name (HDF5): fill(tmp)
// creates and closes the temporary itself, then steps 2-4 follow. A failed
// fill's error is returned as it is (it should name tmp), the temporary
// removed.
using FillPath = std::function<Result<void>(const std::string& tmp)>;
Result<void> write_file_atomically_by_name(const std::string& path, const FillPath& fill,
                                           const AtomicFileOptions& o = {}, WriteStep* failed_at = nullptr);

// Creates `dir` and the missing directories above it (as
// std::filesystem::create_directories), each new one made durable by an fsync
// of its parent: a directory is an entry of its parent, and without that a
// power failure may take it away with every file later committed into it
// (found by the crash explorer, tests/crashsim: the file strategy, dist's
// flush directory, stage out). `what` names the directory in errors. A
// directory another process is creating at the same time may be found before
// its creator's fsync: the caller orders that (dist: an agreement).
Result<void> create_directories_durably(const std::string& dir, const std::string& what);

// Bytes the kernel reports as available for new allocations (MemAvailable in
// /proc/meminfo), 0 if unknown.
std::uint64_t memory_available();

}  // namespace cairn::util
