// cairn_c.cpp — the C API (include/cairn/cairn.h) over cairn::pool::Pool.
//
// Every entry point validates its arguments, runs the C++ call inside guard()
// so that no exception crosses into C, and turns an Error into its negated
// code plus a per-thread message prefixed with the C function's name
// (capi/c_error.hpp, shared with the checkpoint API in ckpt_c.cpp).
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "cairn/cairn.h"
#include "cairn/error.hpp"
#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "capi/c_error.hpp"

using cairn::Errc;
namespace cp = cairn::pool;

// The C codes are the negated C++ codes; a mismatch is a build error.
#define CAIRN_CHECK_CODE(c, e) static_assert((c) == -static_cast<int>(Errc::e), #c " must equal -Errc::" #e)
CAIRN_CHECK_CODE(CAIRN_OK, ok);
CAIRN_CHECK_CODE(CAIRN_E_INVALID_ARGUMENT, invalid_argument);
CAIRN_CHECK_CODE(CAIRN_E_NOT_FOUND, not_found);
CAIRN_CHECK_CODE(CAIRN_E_PERMISSION_DENIED, permission_denied);
CAIRN_CHECK_CODE(CAIRN_E_IS_DIRECTORY, is_directory);
CAIRN_CHECK_CODE(CAIRN_E_TOO_SMALL, too_small);
CAIRN_CHECK_CODE(CAIRN_E_TRUNCATED, truncated);
CAIRN_CHECK_CODE(CAIRN_E_FOREIGN_FILE, foreign_file);
CAIRN_CHECK_CODE(CAIRN_E_WRONG_VERSION, wrong_version);
CAIRN_CHECK_CODE(CAIRN_E_CORRUPTED, corrupted);
CAIRN_CHECK_CODE(CAIRN_E_OUT_OF_SPACE, out_of_space);
CAIRN_CHECK_CODE(CAIRN_E_DEVICE_FULL, device_full);
CAIRN_CHECK_CODE(CAIRN_E_ALREADY_EXISTS, already_exists);
CAIRN_CHECK_CODE(CAIRN_E_IO, io_error);
CAIRN_CHECK_CODE(CAIRN_E_POISONED, poisoned);
CAIRN_CHECK_CODE(CAIRN_E_NOT_READY, not_ready);
CAIRN_CHECK_CODE(CAIRN_E_LAYOUT_MISMATCH, layout_mismatch);
CAIRN_CHECK_CODE(CAIRN_E_NO_VERSION, no_version);
CAIRN_CHECK_CODE(CAIRN_E_UNSUPPORTED, unsupported);
CAIRN_CHECK_CODE(CAIRN_E_BUSY, busy);
#undef CAIRN_CHECK_CODE
static_assert(CAIRN_ROOT_SLOTS == cp::kRootSlots);
static_assert(CAIRN_MIN_POOL_SIZE == cp::kMinPoolSize);
static_assert(CAIRN_DEFAULT_BLOCK_SIZE == cp::kDefaultBlockSize);
static_assert(CAIRN_FLUSH_AUTO == static_cast<int>(cairn::devices::FlushMode::automatic));
static_assert(CAIRN_FLUSH_CPU == static_cast<int>(cairn::devices::FlushMode::cpu));
static_assert(CAIRN_FLUSH_MSYNC == static_cast<int>(cairn::devices::FlushMode::msync));
static_assert(CAIRN_FLUSH_PAGECACHE == static_cast<int>(cairn::devices::FlushMode::pagecache));
static_assert(CAIRN_FLUSH_NONE == static_cast<int>(cairn::devices::FlushMode::none));

struct cairn_pool {
  std::unique_ptr<cp::Pool> pool;
  std::optional<cp::Arena::Rebuild> rebuild;  // between rebuild_begin and rebuild_finish
};

namespace {

using cairn::capi::fail;
using cairn::capi::guard;
using cairn::capi::null_arg;

#define CAIRN_REQUIRE_POOL(fn, h) \
  if ((h) == nullptr || !(h)->pool) return null_arg(fn, "pool handle is NULL")

// Checks that [addr, addr+len) lies in the pool; len 0 is always fine.
int check_range(const char* fn, const cairn_pool* h, const void* addr, std::size_t len, const char* what) noexcept {
  if (len == 0) return 0;
  if (addr == nullptr)
    return guard(fn, [&] { return fail(fn, CAIRN_E_INVALID_ARGUMENT, std::string(what) + " is NULL"); });
  if (!h->pool->contains(addr, len))
    return guard(fn, [&] {
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  std::string(what) + " range of " + std::to_string(len) + " bytes does not lie inside the pool " +
                      h->pool->path() + " (" + std::to_string(h->pool->size()) + " bytes mapped)");
    });
  return 0;
}

cairn::Result<cairn::devices::FlushMode> flush_mode_from(unsigned flags) {
  switch (flags) {
    case CAIRN_FLUSH_AUTO: return cairn::devices::FlushMode::automatic;
    case CAIRN_FLUSH_CPU: return cairn::devices::FlushMode::cpu;
    case CAIRN_FLUSH_MSYNC: return cairn::devices::FlushMode::msync;
    case CAIRN_FLUSH_PAGECACHE: return cairn::devices::FlushMode::pagecache;
    case CAIRN_FLUSH_NONE: return cairn::devices::FlushMode::none;
    default:
      return cairn::make_error(Errc::invalid_argument,
                               "flags " + std::to_string(flags) +
                                   " is not a flush mode: use CAIRN_FLUSH_AUTO, CAIRN_FLUSH_CPU, "
                                   "CAIRN_FLUSH_PAGECACHE, CAIRN_FLUSH_MSYNC or CAIRN_FLUSH_NONE");
  }
}

// A device from a spec; null when the pool should choose ($CAIRN_DEVICE).
cairn::Result<std::unique_ptr<cairn::devices::Device>> device_from(const char* spec) {
  if (spec == nullptr || *spec == '\0') return std::unique_ptr<cairn::devices::Device>();
  return cairn::devices::make_device(spec);
}

}  // namespace

extern "C" {

const char* cairn_strerror(int code) {
  switch (code) {
    case CAIRN_OK: return "ok";
    case CAIRN_E_INVALID_ARGUMENT: return "invalid_argument: a bad option, parameter or NULL argument";
    case CAIRN_E_NOT_FOUND: return "not_found: the file, stream or octree does not exist (cairn_errormsg() names it)";
    case CAIRN_E_PERMISSION_DENIED: return "permission_denied: the file cannot be opened with the needed access";
    case CAIRN_E_IS_DIRECTORY: return "is_directory: the path names a directory";
    case CAIRN_E_TOO_SMALL: return "too_small: the pool size is below the minimum";
    case CAIRN_E_TRUNCATED: return "truncated: the file is shorter than its header says";
    case CAIRN_E_FOREIGN_FILE: return "foreign_file: not a cairn pool (bad magic)";
    case CAIRN_E_WRONG_VERSION: return "wrong_version: another on-media layout version";
    case CAIRN_E_CORRUPTED: return "corrupted: checksums fail on both copies";
    case CAIRN_E_OUT_OF_SPACE: return "out_of_space: the pool's arena cannot satisfy the allocation";
    case CAIRN_E_DEVICE_FULL: return "device_full: the file system ran out of space";
    case CAIRN_E_ALREADY_EXISTS: return "already_exists: refusing to overwrite an existing file";
    case CAIRN_E_IO: return "io_error: a system call failed";
    case CAIRN_E_POISONED: return "poisoned: an earlier persist failed; the pool refuses further commits";
    case CAIRN_E_NOT_READY: return "not_ready: a required earlier step has not happened (e.g. arena rebuild)";
    case CAIRN_E_LAYOUT_MISMATCH: return "layout_mismatch: restoring into a different registration layout";
    case CAIRN_E_NO_VERSION: return "no_version: nothing committed yet";
    case CAIRN_E_UNSUPPORTED: return "unsupported: the platform or build lacks a needed feature";
    case CAIRN_E_BUSY: return "busy: another live writer holds it";
    case CAIRN_E_NO_MEMORY: return "no_memory: out of memory";
    case CAIRN_E_INTERNAL: return "internal: an unexpected internal failure";
    default: return "unknown cairn error code";
  }
}

const char* cairn_errormsg(void) { return cairn::capi::current_message(); }

int cairn_pool_create(const char* path, uint64_t size, unsigned flags, const char* device, cairn_pool** out) {
  static constexpr const char* fn = "cairn_pool_create";
  if (out == nullptr) return null_arg(fn, "out (cairn_pool**) is NULL");
  *out = nullptr;
  if (path == nullptr) return null_arg(fn, "path is NULL");
  return guard(fn, [&] {
    auto mode = flush_mode_from(flags);
    if (!mode.ok()) return fail(fn, mode.error());
    auto dev = device_from(device);
    if (!dev.ok()) return fail(fn, dev.error());
    cp::CreateOptions o;
    o.size = size;
    o.flush_mode = mode.value();
    o.device = std::move(dev.value());
    auto h = std::make_unique<cairn_pool>();
    auto r = cp::Pool::create(path, std::move(o));
    if (!r.ok()) return fail(fn, r.error());
    h->pool = std::move(r.value());
    *out = h.release();
    return 0;
  });
}

int cairn_pool_open(const char* path, unsigned flags, const char* device, cairn_pool** out) {
  static constexpr const char* fn = "cairn_pool_open";
  if (out == nullptr) return null_arg(fn, "out (cairn_pool**) is NULL");
  *out = nullptr;
  if (path == nullptr) return null_arg(fn, "path is NULL");
  return guard(fn, [&] {
    auto mode = flush_mode_from(flags);
    if (!mode.ok()) return fail(fn, mode.error());
    auto dev = device_from(device);
    if (!dev.ok()) return fail(fn, dev.error());
    cp::OpenOptions o;
    o.flush_mode = mode.value();
    o.device = std::move(dev.value());
    auto h = std::make_unique<cairn_pool>();
    auto r = cp::Pool::open(path, std::move(o));
    if (!r.ok()) return fail(fn, r.error());
    h->pool = std::move(r.value());
    *out = h.release();
    return 0;
  });
}

int cairn_pool_close(cairn_pool** pool) {
  static constexpr const char* fn = "cairn_pool_close";
  if (pool == nullptr) return null_arg(fn, "pool (cairn_pool**) is NULL");
  cairn_pool* h = *pool;
  *pool = nullptr;
  return guard(fn, [&] {
    delete h;
    return 0;
  });
}

void* cairn_pool_base(const cairn_pool* pool) {
  if (pool == nullptr || !pool->pool) {
    null_arg("cairn_pool_base", "pool handle is NULL");
    return nullptr;
  }
  return pool->pool->base();
}

uint64_t cairn_pool_size(const cairn_pool* pool) {
  if (pool == nullptr || !pool->pool) {
    null_arg("cairn_pool_size", "pool handle is NULL");
    return 0;
  }
  return pool->pool->size();
}

const char* cairn_pool_path(const cairn_pool* pool) {
  if (pool == nullptr || !pool->pool) {
    null_arg("cairn_pool_path", "pool handle is NULL");
    return nullptr;
  }
  return pool->pool->path().c_str();
}

int cairn_pool_is_pmem(const cairn_pool* pool) {
  CAIRN_REQUIRE_POOL("cairn_pool_is_pmem", pool);
  return pool->pool->is_pmem() ? 1 : 0;
}

int cairn_pool_flush_mode(const cairn_pool* pool) {
  CAIRN_REQUIRE_POOL("cairn_pool_flush_mode", pool);
  return static_cast<int>(pool->pool->flush_mode());
}

void* cairn_pool_ptr(const cairn_pool* pool, uint64_t offset) {
  static constexpr const char* fn = "cairn_pool_ptr";
  if (pool == nullptr || !pool->pool) {
    null_arg(fn, "pool handle is NULL");
    return nullptr;
  }
  if (offset == 0 || offset >= pool->pool->size()) {
    guard(fn, [&] {
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  "offset " + std::to_string(offset) + " is null or outside the pool " + pool->pool->path() + " (" +
                      std::to_string(pool->pool->size()) + " bytes)");
    });
    return nullptr;
  }
  return pool->pool->at(offset);
}

uint64_t cairn_pool_offset_of(const cairn_pool* pool, const void* addr) {
  static constexpr const char* fn = "cairn_pool_offset_of";
  if (pool == nullptr || !pool->pool) {
    null_arg(fn, "pool handle is NULL");
    return 0;
  }
  if (addr == nullptr || !pool->pool->contains(addr, 1)) {
    null_arg(fn, "address is NULL or outside the pool");
    return 0;
  }
  return static_cast<uint64_t>(static_cast<const std::byte*>(addr) - pool->pool->base());
}

int cairn_pool_root_get(const cairn_pool* pool, unsigned slot, uint64_t* offset, uint64_t* version) {
  static constexpr const char* fn = "cairn_pool_root_get";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (slot >= CAIRN_ROOT_SLOTS)
    return guard(fn, [&] {
      return fail(
          fn, CAIRN_E_INVALID_ARGUMENT,
          "root slot " + std::to_string(slot) + " out of range (0.." + std::to_string(CAIRN_ROOT_SLOTS - 1) + ")");
    });
  const cp::RootSlot r = pool->pool->root(slot);
  if (offset != nullptr) *offset = r.offset;
  if (version != nullptr) *version = r.version;
  return 0;
}

int cairn_pool_root_publish(cairn_pool* pool, unsigned slot, uint64_t offset, uint64_t version) {
  static constexpr const char* fn = "cairn_pool_root_publish";
  CAIRN_REQUIRE_POOL(fn, pool);
  return guard(fn, [&] {
    auto r = pool->pool->publish_root(slot, offset, version);
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_pool_root_generation(const cairn_pool* pool, uint64_t* generation) {
  static constexpr const char* fn = "cairn_pool_root_generation";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (generation == nullptr) return null_arg(fn, "generation is NULL");
  *generation = pool->pool->root_generation();
  return 0;
}

int cairn_pool_alloc(cairn_pool* pool, uint64_t bytes, uint64_t* offset) {
  static constexpr const char* fn = "cairn_pool_alloc";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (offset == nullptr) return null_arg(fn, "offset is NULL");
  *offset = 0;
  return guard(fn, [&] {
    auto r = pool->pool->arena().alloc(bytes);
    if (!r.ok()) return fail(fn, r.error());
    *offset = r.value();
    return 0;
  });
}

int cairn_pool_free(cairn_pool* pool, uint64_t offset, uint64_t bytes) {
  static constexpr const char* fn = "cairn_pool_free";
  CAIRN_REQUIRE_POOL(fn, pool);
  return guard(fn, [&] {
    auto& a = pool->pool->arena();
    if (bytes == 0 || offset < a.offset() || (offset - a.offset()) % a.block_size() != 0 ||
        (offset - a.offset()) / a.block_size() + a.blocks_for(bytes) > a.block_count())
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  "extent at " + std::to_string(offset) + " of " + std::to_string(bytes) +
                      " bytes is not an extent of the arena");
    a.free(offset, bytes);
    return 0;
  });
}

int cairn_pool_rebuild_begin(cairn_pool* pool) {
  static constexpr const char* fn = "cairn_pool_rebuild_begin";
  CAIRN_REQUIRE_POOL(fn, pool);
  return guard(fn, [&] {
    pool->rebuild.reset();
    pool->rebuild.emplace(pool->pool->arena().rebuild());
    return 0;
  });
}

int cairn_pool_rebuild_mark(cairn_pool* pool, uint64_t offset, uint64_t bytes) {
  static constexpr const char* fn = "cairn_pool_rebuild_mark";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (!pool->rebuild) return fail(fn, CAIRN_E_NOT_READY, "no rebuild in progress: call cairn_pool_rebuild_begin first");
  return guard(fn, [&] {
    auto r = pool->rebuild->mark(offset, bytes);
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_pool_rebuild_finish(cairn_pool* pool) {
  static constexpr const char* fn = "cairn_pool_rebuild_finish";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (!pool->rebuild) return fail(fn, CAIRN_E_NOT_READY, "no rebuild in progress: call cairn_pool_rebuild_begin first");
  return guard(fn, [&] {
    pool->rebuild->finish();
    pool->rebuild.reset();
    return 0;
  });
}

int cairn_pool_arena_reset(cairn_pool* pool) {
  static constexpr const char* fn = "cairn_pool_arena_reset";
  CAIRN_REQUIRE_POOL(fn, pool);
  return guard(fn, [&] {
    pool->rebuild.reset();
    pool->pool->arena().reset_empty();
    return 0;
  });
}

int cairn_pool_arena_info(const cairn_pool* pool, uint64_t* block_size, uint64_t* block_count,
                          uint64_t* blocks_in_use) {
  static constexpr const char* fn = "cairn_pool_arena_info";
  CAIRN_REQUIRE_POOL(fn, pool);
  return guard(fn, [&] {
    auto& a = pool->pool->arena();
    if (block_size != nullptr) *block_size = a.block_size();
    if (block_count != nullptr) *block_count = a.block_count();
    if (blocks_in_use != nullptr) *blocks_in_use = a.blocks_in_use();
    return 0;
  });
}

namespace {

// A primitive whose write-back failed (the device's io_errno(): an msync that
// returned EIO, or ENOSPC on a sparse file) must not return 0, or the caller
// publishes roots over data that may not be on the media. The device keeps
// the first error, so every call after it fails too; publish_root poisons
// the pool when it sees the error (it holds the lock that poisoning needs).
int write_back_status(const char* fn, cp::Pool& pool) {
  const int err = pool.device().io_errno();
  if (err == 0) return 0;
  return fail(fn, CAIRN_E_IO,
              pool.path() + ": a write-back to the pool failed (" + std::strerror(err) +
                  "); what was written since the last publish may not be on the media, and every later publish "
                  "fails with CAIRN_E_POISONED. Fix the device, then close and reopen the pool to get back the "
                  "last committed roots");
}

}  // namespace

int cairn_pool_flush(cairn_pool* pool, const void* addr, size_t len) {
  static constexpr const char* fn = "cairn_pool_flush";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, addr, len, "addr")) return rc;
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->flush(addr, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_drain(cairn_pool* pool) {
  CAIRN_REQUIRE_POOL("cairn_pool_drain", pool);
  return guard("cairn_pool_drain", [&] {
    pool->pool->drain();
    return write_back_status("cairn_pool_drain", *pool->pool);
  });
}

int cairn_pool_persist(cairn_pool* pool, const void* addr, size_t len) {
  static constexpr const char* fn = "cairn_pool_persist";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, addr, len, "addr")) return rc;
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->persist(addr, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_memcpy_persist(cairn_pool* pool, void* dst, const void* src, size_t len) {
  static constexpr const char* fn = "cairn_pool_memcpy_persist";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, dst, len, "dst")) return rc;
  if (len != 0 && src == nullptr) return null_arg(fn, "src is NULL");
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->memcpy_persist(dst, src, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_memcpy_nodrain(cairn_pool* pool, void* dst, const void* src, size_t len) {
  static constexpr const char* fn = "cairn_pool_memcpy_nodrain";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, dst, len, "dst")) return rc;
  if (len != 0 && src == nullptr) return null_arg(fn, "src is NULL");
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->memcpy_nodrain(dst, src, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_memset_persist(cairn_pool* pool, void* dst, int c, size_t len) {
  static constexpr const char* fn = "cairn_pool_memset_persist";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, dst, len, "dst")) return rc;
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->memset_persist(dst, c, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_memset_nodrain(cairn_pool* pool, void* dst, int c, size_t len) {
  static constexpr const char* fn = "cairn_pool_memset_nodrain";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, dst, len, "dst")) return rc;
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->memset_nodrain(dst, c, len);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_persist_mt(cairn_pool* pool, const void* addr, size_t len, unsigned threads) {
  static constexpr const char* fn = "cairn_pool_persist_mt";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, addr, len, "addr")) return rc;
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->persist_mt(addr, len, threads);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_memcpy_persist_mt(cairn_pool* pool, void* dst, const void* src, size_t len, unsigned threads) {
  static constexpr const char* fn = "cairn_pool_memcpy_persist_mt";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (int rc = check_range(fn, pool, dst, len, "dst")) return rc;
  if (len != 0 && src == nullptr) return null_arg(fn, "src is NULL");
  if (len == 0) return 0;
  return guard(fn, [&] {
    pool->pool->memcpy_persist_mt(dst, src, len, threads);
    return write_back_status(fn, *pool->pool);
  });
}

int cairn_pool_stats(const cairn_pool* pool, cairn_stats* out) {
  static constexpr const char* fn = "cairn_pool_stats";
  CAIRN_REQUIRE_POOL(fn, pool);
  if (out == nullptr) return null_arg(fn, "out (cairn_stats*) is NULL");
  const cp::PoolStats s = pool->pool->stats();
  out->flush_calls = s.device.flush_calls;
  out->lines_flushed = s.device.lines_flushed;
  out->bytes_flushed = s.device.bytes_flushed;
  out->nt_bytes = s.device.nt_bytes;
  out->copied_bytes = s.device.copied_bytes;
  out->drains = s.device.drains;
  out->msyncs = s.device.msyncs;
  out->injected_delay_ns = s.device.injected_delay_ns;
  out->nvm_bytes_written = s.device.nvm_bytes_written();
  out->roots_published = s.roots_published;
  return 0;
}

int cairn_pool_stats_reset(cairn_pool* pool) {
  CAIRN_REQUIRE_POOL("cairn_pool_stats_reset", pool);
  pool->pool->device().reset_stats();
  return 0;
}

const char* cairn_default_pool_dir(void) {
  thread_local std::string dir;
  try {
    dir = cp::default_pool_dir();
  } catch (...) {
    return "/dev/shm/cairn";
  }
  return dir.c_str();
}

}  // extern "C"
