// io.hpp — system-call helpers every layer shares (internal): the errno →
// Errc mapping behind typed errors, and pread/pwrite loops that retry EINTR
// and short transfers.
#pragma once

#include <cstddef>
#include <cstdint>
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

// Bytes the kernel reports as available for new allocations (MemAvailable in
// /proc/meminfo), 0 if unknown.
std::uint64_t memory_available();

}  // namespace cairn::util
