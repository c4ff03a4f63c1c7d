// cairn/stream.hpp — data streams that replace files between coupled components
// (seed 002), in process memory or in a persistent pool.
//
// A component that exchanges data through files keeps its stdio or iostream
// code and changes only its open call: Stream::open (C: cairn_stream_open)
// returns a real FILE* (glibc fopencookie) and a std::iostream over the same
// bytes. Where the bytes live is chosen by the URI:
//
//   file:PATH        an ordinary file (the baseline); OpenOptions::sync
//                    fsyncs it at close
//   mem:NAME         process memory, named; a reader in the same process
//                    sees what the last writer closed (open_memstream's role)
//   pmem:POOL#NAME   a stream in a cairn pool file, shared by every process
//                    that maps the pool. Closing a writer commits: the data is
//                    made durable, then one aligned 8-byte commit word names
//                    it. A reader, in this process or another, before or
//                    after any crash, sees the last committed content bit for
//                    bit or, if nothing was ever committed, gets
//                    Errc::no_version; never a mix of two versions. Each
//                    version carries a CRC-32C of its bytes, checked when a
//                    reader opens it: damaged media give Errc::corrupted,
//                    never different contents.
//
// A name without a scheme is prefixed with $CAIRN_STREAM_PREFIX (for example
// "pmem:/dev/shm/run.pool#" or "mem:"), else read as file:NAME, so a
// component keeps its own file names while the coupling decides where they go.
// $CAIRN_STREAM_SYNC=1 makes every file: writer fsync at close, as
// OpenOptions::sync does, so the coupling also decides durability.
//
// Sizes: `size_hint` reserves the buffer; without it the buffer starts at the
// length of the stream's last version (at least 64 KiB) and doubles as it
// fills (each growth copies what was written: seed 002's Fig. 5), so a
// component that writes a stream every cycle pays for growth once. Writes
// never truncate silently: when the pool is full the write fails, the FILE*
// reports an error and closing it commits nothing.
//
// Readers see an immutable version: a pmem: writer writes a new extent and the
// old one is kept while any reader (of any process: an OFD lock on the pool
// file pins it, released by the kernel if the reader dies) still has it open.
// view() is that version in place, without a copy.
//
// Writers and readers of one pmem: pool coordinate through an OFD lock on the
// pool file, held only while the stream directory changes (open, growth,
// commit, close); the bytes are written without it. One writer per stream at
// a time (a second gets Errc::busy, naming the writer's pid). A writer is
// alive while it holds an OFD lock on its directory entry's byte of the pool
// file, which the kernel drops when its process ends: no pid is looked up
// in /proc, so a writer in another pid namespace sharing the pool, or hidden
// by hidepid=2, stays alive. A writer that dies leaves the last committed
// version in place; its unfinished extent is reclaimed by the next process
// that opens a stream of the pool.
//
// Closing a writer is its commit, and a commit fails (Errc::poisoned or
// Errc::io_error; fclose returns EOF with errno EIO) when any write-back of
// the pool failed: the previous version stays the last one. A writer whose
// Stream is destroyed by an exception's unwinding commits nothing, as an
// uncommitted LMDB transaction is aborted; Stream::abandon does the same
// explicitly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::stream {

enum class Mode { read, write };

struct OpenOptions {
  // Bytes to reserve for a writer (0: the length of the stream's last
  // committed version, at least 64 KiB; the buffer doubles when full).
  std::uint64_t size_hint = 0;
  // file: fsync the file when a writer closes (also: $CAIRN_STREAM_SYNC=1).
  bool sync = false;
  // pmem: size of the pool file a writer creates when it does not exist yet
  // (0: $CAIRN_STREAM_POOL_SIZE, else 256 MiB). The pool's space is
  // reserved as streams use it (the file is sparse past its first 16 MiB):
  // a device that cannot hold more fails that write or commit with
  // Errc::device_full (ENOSPC from stdio), the committed versions intact.
  std::uint64_t pool_size = 0;
  // Readers: wait up to this many seconds for a first commit instead of
  // failing at once with Errc::no_version / Errc::not_found.
  double wait_seconds = 0;
};

// What one stream holds (pmem: from the pool's directory).
struct Info {
  std::string name;
  std::uint64_t length = 0;    // committed bytes
  std::uint64_t version = 0;   // commits so far (0: never committed)
  std::uint64_t capacity = 0;  // bytes reserved for the committed version
  int writer_pid = 0;          // a live writer, 0 if none
};

class Handle;  // the backend behind one open stream (internal)

class Stream {
 public:
  // Opens `uri` (see above; a name without a scheme goes through
  // $CAIRN_STREAM_PREFIX) for reading or writing.
  static Result<std::unique_ptr<Stream>> open(std::string_view uri, Mode mode, const OpenOptions& options = {});

  // An unclosed writer is closed (committed) here, its errors lost: call
  // close(). But a writer destroyed while an exception unwinds the stack
  // (std::uncaught_exceptions() greater than when it was opened) abandons
  // instead: an exception between open and close never publishes a
  // truncated version. Readers are released.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // The stdio handle; owned by the Stream (do not fclose it: call close()).
  std::FILE* file() const { return file_; }
  // A std::iostream over the same FILE* (formatted I/O, read, write, seekg).
  std::iostream& ios();
  // Readers: the committed bytes in place (valid until close()). Writers: empty.
  std::span<const std::byte> view() const;
  // The URI after prefix mapping.
  const std::string& uri() const { return uri_; }
  Mode mode() const { return mode_; }

  // Writers: flush and commit (pmem: durable, then the commit word; mem:
  // publish; file: close, fsync if asked). Readers: release the version.
  // A writer that saw any error (pool full, I/O error) commits nothing and
  // returns that error.
  Result<void> close();
  // Writers: drop what was written and commit nothing (pmem:, mem: the
  // previous version stays the last one; file:, which has no versions, is
  // closed as it is, without fsync). Readers: as close(). For error paths
  // that return without an exception: a writer left to its destructor
  // would commit.
  Result<void> abandon();
  // Hands the FILE* to the caller (the C API): fclose then commits or
  // releases, and frees everything. The Stream is empty afterwards.
  std::FILE* release();

 private:
  Stream() = default;
  std::FILE* file_ = nullptr;
  std::shared_ptr<Handle> handle_;
  std::unique_ptr<std::iostream> ios_;
  std::unique_ptr<std::streambuf> buf_;
  std::string uri_;
  Mode mode_ = Mode::read;
  int uncaught_at_open_ = 0;  // std::uncaught_exceptions() when opened
};

// The URI `name` maps to: unchanged if it has a scheme, else
// $CAIRN_STREAM_PREFIX + name, else "file:" + name.
std::string resolve(std::string_view name);

// Waits until `uri` has a committed version (pmem:, mem:) or exists (file:),
// up to `timeout_seconds`; Errc::no_version / Errc::not_found on time-out.
Result<void> wait(std::string_view uri, double timeout_seconds);

// Removes a stream (pmem: its directory entry and extents, once no reader
// holds them; mem: the name; file: the file).
Result<void> remove(std::string_view uri);

// The streams of a pmem: pool file, or of this process's mem: names
// ("mem:"), sorted by name.
Result<std::vector<Info>> list(std::string_view where);

// ---- staging (seed 003): node-local persistent memory <-> a file system ----

struct StageOptions {
  unsigned threads = 0;  // copy threads; 0: every hardware thread ($CAIRN_THREADS)
  // Called about every 0.2 s from a copying thread (one at a time), and once
  // at the end.
  std::function<void(std::uint64_t done_bytes, std::uint64_t total_bytes)> progress;
};

struct StageReport {
  std::uint64_t items = 0;  // streams or files copied
  std::uint64_t bytes = 0;
  double seconds = 0;
};

// Copies out to directory `dir` (created if missing): every committed stream
// of `from` = pmem:POOL, one stream pmem:POOL#NAME, or every mem: stream
// ("mem:"), each to DIR/NAME (a name's '/' make subdirectories); or, if
// `from` has no scheme, that file as it is (a whole pool: stage it when no
// writer is active; a file that changes while it is read is refused with
// Errc::busy, one that shrinks with Errc::truncated). Files are written in
// 16 MiB chunks by all threads to DIR/NAME.tmp, fsynced, renamed into place
// and their directories fsynced: a destination is never truncated in place,
// and a stage that fails leaves every destination as it was.
Result<StageReport> stage_out(std::string_view from, const std::string& dir, const StageOptions& options = {});
// Copies in every regular file under directory `from` (or the one file
// `from`) to `to`: pmem:POOL makes each a committed stream named by its path
// relative to `from` (pmem:POOL#NAME for a single file), or, if `to` has no
// scheme, a file in directory `to` (written as stage_out writes). Streams
// are written one per thread. Only a whole, stable copy of a file is
// committed: a file that shrinks while it is read gives Errc::truncated, one
// that grows or is written to meanwhile Errc::busy, and its stream keeps its
// previous version.
Result<StageReport> stage_in(const std::string& from, std::string_view to, const StageOptions& options = {});

// The bytes behind a reader FILE* that Stream::open or cairn_stream_open
// returned (empty for writers); valid until that FILE* is closed.
Result<std::span<const std::byte>> view(std::FILE* f);

// "<code>: <message>" of this thread's last failed stream operation,
// including the FILE* callbacks behind fwrite, fread and fclose (whose own
// failures only set errno: ENOSPC when the pool is full, EBUSY, EIO).
const std::string& last_error_message();

}  // namespace cairn::stream
