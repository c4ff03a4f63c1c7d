// ckpt_c.cpp — the checkpoint part of the C API (cairn_ckpt_*, include/cairn/cairn.h) over persist::Context.
//
// A cairn_ckpt owns its Context and one small handle per registered region;
// region handles point at the Context's Region / DualRegion objects, whose
// addresses are stable for the Context's life. Every entry point checks its
// arguments, runs the C++ call inside guard() and reports an Error as its
// negated code plus a per-thread message (capi/c_error.hpp).
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cairn/cairn.h"
#include "cairn/persist.hpp"
#include "capi/c_error.hpp"

namespace cps = cairn::persist;
using cairn::capi::fail;
using cairn::capi::guard;
using cairn::capi::null_arg;

struct cairn_ckpt_region {
  cps::Region* region;
};

struct cairn_ckpt_dual {
  cps::DualRegion* dual;
};

struct cairn_ckpt {
  std::unique_ptr<cps::Context> ctx;
  // deque: handles keep their addresses as more are added.
  std::deque<cairn_ckpt_region> regions;
  std::deque<cairn_ckpt_dual> duals;
  std::size_t registered = 0;  // regions of every kind, for default names
  bool opened = false;
};

namespace {

constexpr unsigned kKnownFlags =
    CAIRN_CKPT_ASYNC_FLUSH | CAIRN_CKPT_INCREMENTAL | CAIRN_CKPT_HDF5 | CAIRN_CKPT_NO_CHECKSUMS;

#define CAIRN_REQUIRE_CKPT(fn, h) \
  if ((h) == nullptr || !(h)->ctx) return null_arg(fn, "checkpoint context (cairn_ckpt*) is NULL")

// The name to register under: the caller's, or "region<k>".
std::string region_name(const cairn_ckpt* h, const char* name) {
  return name != nullptr ? std::string(name) : "region" + std::to_string(h->registered);
}

int adopt(const char* fn, cairn::Result<std::unique_ptr<cps::Context>> r, cairn_ckpt** out) {
  if (!r.ok()) return fail(fn, r.error());
  auto h = std::make_unique<cairn_ckpt>();
  h->ctx = std::move(r.value());
  *out = h.release();
  return 0;
}

std::uint64_t to_ns(double seconds) { return seconds <= 0 ? 0 : static_cast<std::uint64_t>(seconds * 1e9 + 0.5); }

// The registry's names, built once (static storage for the C strings).
const std::vector<std::string>& names() {
  static const std::vector<std::string> all = cps::strategy_names();
  return all;
}

}  // namespace

extern "C" {

int cairn_ckpt_create(const char* strategy, const char* name, const char* dir, unsigned threads, unsigned flags,
                      cairn_ckpt** out) {
  static constexpr const char* fn = "cairn_ckpt_create";
  if (out == nullptr) return null_arg(fn, "out (cairn_ckpt**) is NULL");
  *out = nullptr;
  if ((flags & ~kKnownFlags) != 0)
    return guard(fn, [&] {
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  "flags " + std::to_string(flags) +
                      " has unknown bits: combine CAIRN_CKPT_ASYNC_FLUSH, CAIRN_CKPT_INCREMENTAL, CAIRN_CKPT_HDF5 and "
                      "CAIRN_CKPT_NO_CHECKSUMS");
    });
  return guard(fn, [&] {
    cps::Options o;
    if (strategy != nullptr) o.strategy = strategy;
    if (name != nullptr) o.name = name;
    if (dir != nullptr) o.dir = dir;
    o.threads = threads;
    o.async_flush = (flags & CAIRN_CKPT_ASYNC_FLUSH) != 0;
    o.incremental = (flags & CAIRN_CKPT_INCREMENTAL) != 0;
    o.hdf5 = (flags & CAIRN_CKPT_HDF5) != 0;
    o.checksums = (flags & CAIRN_CKPT_NO_CHECKSUMS) == 0;
    return adopt(fn, cps::Context::create(std::move(o)), out);
  });
}

int cairn_ckpt_create_from_config(const char* config_path, cairn_ckpt** out) {
  static constexpr const char* fn = "cairn_ckpt_create_from_config";
  if (out == nullptr) return null_arg(fn, "out (cairn_ckpt**) is NULL");
  *out = nullptr;
  if (config_path == nullptr) return null_arg(fn, "config_path is NULL");
  return guard(fn, [&] {
    auto o = cps::load_options(config_path);
    if (!o.ok()) return fail(fn, o.error());
    return adopt(fn, cps::Context::create(std::move(o.value())), out);
  });
}

int cairn_ckpt_delete(cairn_ckpt** ckpt) {
  static constexpr const char* fn = "cairn_ckpt_delete";
  if (ckpt == nullptr) return null_arg(fn, "ckpt (cairn_ckpt**) is NULL");
  cairn_ckpt* h = *ckpt;
  *ckpt = nullptr;
  return guard(fn, [&] {
    delete h;
    return 0;
  });
}

const char* cairn_ckpt_strategy(const cairn_ckpt* ckpt) {
  if (ckpt == nullptr || !ckpt->ctx) {
    null_arg("cairn_ckpt_strategy", "checkpoint context (cairn_ckpt*) is NULL");
    return nullptr;
  }
  return ckpt->ctx->strategy().c_str();
}

size_t cairn_ckpt_strategy_count(void) {
  try {
    return names().size();
  } catch (...) {
    fail("cairn_ckpt_strategy_count", CAIRN_E_NO_MEMORY, "out of memory");
    return 0;
  }
}

const char* cairn_ckpt_strategy_name(size_t index) {
  static constexpr const char* fn = "cairn_ckpt_strategy_name";
  const std::size_t n = cairn_ckpt_strategy_count();
  if (index >= n) {
    guard(fn, [&] {
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  "index " + std::to_string(index) + " is past the last strategy (" + std::to_string(n) + " known)");
    });
    return nullptr;
  }
  return names()[index].c_str();
}

int cairn_ckpt_region_create(cairn_ckpt* ckpt, const char* name, size_t bytes, cairn_ckpt_region** out) {
  static constexpr const char* fn = "cairn_ckpt_region_create";
  if (out != nullptr) *out = nullptr;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (out == nullptr) return null_arg(fn, "out (cairn_ckpt_region**) is NULL");
  return guard(fn, [&] {
    auto r = ckpt->ctx->region(region_name(ckpt, name), bytes);
    if (!r.ok()) return fail(fn, r.error());
    ++ckpt->registered;
    *out = &ckpt->regions.emplace_back(cairn_ckpt_region{r.value()});
    return 0;
  });
}

int cairn_ckpt_register_region(cairn_ckpt* ckpt, const char* name, void* base, size_t bytes, cairn_ckpt_region** out) {
  static constexpr const char* fn = "cairn_ckpt_register_region";
  if (out != nullptr) *out = nullptr;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (base == nullptr) return null_arg(fn, "base is NULL");
  return guard(fn, [&] {
    auto r = ckpt->ctx->register_region(region_name(ckpt, name), base, bytes);
    if (!r.ok()) return fail(fn, r.error());
    ++ckpt->registered;
    cairn_ckpt_region* h = &ckpt->regions.emplace_back(cairn_ckpt_region{r.value()});
    if (out != nullptr) *out = h;
    return 0;
  });
}

void* cairn_ckpt_region_data(const cairn_ckpt_region* region) {
  if (region == nullptr) {
    null_arg("cairn_ckpt_region_data", "region handle is NULL");
    return nullptr;
  }
  return region->region->data();
}

size_t cairn_ckpt_region_bytes(const cairn_ckpt_region* region) {
  if (region == nullptr) {
    null_arg("cairn_ckpt_region_bytes", "region handle is NULL");
    return 0;
  }
  return region->region->bytes();
}

int cairn_ckpt_dual_create(cairn_ckpt* ckpt, const char* name, size_t bytes, cairn_ckpt_dual** out) {
  static constexpr const char* fn = "cairn_ckpt_dual_create";
  if (out != nullptr) *out = nullptr;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (out == nullptr) return null_arg(fn, "out (cairn_ckpt_dual**) is NULL");
  return guard(fn, [&] {
    auto r = ckpt->ctx->dual_region(region_name(ckpt, name), bytes);
    if (!r.ok()) return fail(fn, r.error());
    ++ckpt->registered;
    *out = &ckpt->duals.emplace_back(cairn_ckpt_dual{r.value()});
    return 0;
  });
}

void* cairn_ckpt_dual_read(const cairn_ckpt_dual* dual) {
  if (dual == nullptr) {
    null_arg("cairn_ckpt_dual_read", "dual region handle is NULL");
    return nullptr;
  }
  return dual->dual->read();
}

void* cairn_ckpt_dual_write(const cairn_ckpt_dual* dual) {
  if (dual == nullptr) {
    null_arg("cairn_ckpt_dual_write", "dual region handle is NULL");
    return nullptr;
  }
  return dual->dual->write();
}

size_t cairn_ckpt_dual_bytes(const cairn_ckpt_dual* dual) {
  if (dual == nullptr) {
    null_arg("cairn_ckpt_dual_bytes", "dual region handle is NULL");
    return 0;
  }
  return dual->dual->bytes();
}

int cairn_ckpt_dual_carry_over(cairn_ckpt_dual* dual, size_t offset, size_t len) {
  static constexpr const char* fn = "cairn_ckpt_dual_carry_over";
  if (dual == nullptr) return null_arg(fn, "dual region handle is NULL");
  return guard(fn, [&] {
    if (dual->dual->read() == nullptr)
      return fail(fn, CAIRN_E_NOT_READY,
                  "dual region '" + dual->dual->name() + "' has no memory before cairn_ckpt_open");
    dual->dual->carry_over(offset, len);
    return 0;
  });
}

int cairn_ckpt_register_pointer(cairn_ckpt* ckpt, void** from) {
  static constexpr const char* fn = "cairn_ckpt_register_pointer";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (from == nullptr) return null_arg(fn, "from (the pointer's address) is NULL");
  return guard(fn, [&] {
    auto r = ckpt->ctx->register_pointer(from);
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_ckpt_register_pointer_to(cairn_ckpt* ckpt, void** from, const void* to) {
  static constexpr const char* fn = "cairn_ckpt_register_pointer_to";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (from == nullptr) return null_arg(fn, "from (the pointer's address) is NULL");
  // Checked before registering, so that a refused call changes nothing.
  if (*from != to)
    return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                "the pointer at `from` does not point to `to` (are the arguments swapped? `from` is the address of "
                "the pointer, `to` its current target)");
  return guard(fn, [&] {
    auto r = ckpt->ctx->register_pointer(from);
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_ckpt_open(cairn_ckpt* ckpt) {
  static constexpr const char* fn = "cairn_ckpt_open";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    auto r = ckpt->ctx->open();
    if (!r.ok()) return fail(fn, r.error());
    ckpt->opened = true;
    return 0;
  });
}

int cairn_ckpt_is_open(const cairn_ckpt* ckpt) {
  CAIRN_REQUIRE_CKPT("cairn_ckpt_is_open", ckpt);
  return ckpt->opened ? 1 : 0;
}

int cairn_ckpt_committed_version(const cairn_ckpt* ckpt, uint64_t* version, int* has_version) {
  static constexpr const char* fn = "cairn_ckpt_committed_version";
  if (version != nullptr) *version = 0;
  if (has_version != nullptr) *has_version = 0;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (has_version == nullptr) return null_arg(fn, "has_version is NULL");
  if (!ckpt->opened) return fail(fn, CAIRN_E_NOT_READY, "the context is not open: call cairn_ckpt_open first");
  return guard(fn, [&] {
    const auto v = ckpt->ctx->committed_version();
    *has_version = v.has_value() ? 1 : 0;
    if (version != nullptr) *version = v.value_or(0);
    return 0;
  });
}

int cairn_ckpt_restore(cairn_ckpt* ckpt, uint64_t* version) {
  static constexpr const char* fn = "cairn_ckpt_restore";
  if (version != nullptr) *version = 0;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    auto r = ckpt->ctx->restore();
    if (!r.ok()) return fail(fn, r.error());
    if (version != nullptr) *version = r.value();
    return 0;
  });
}

int cairn_ckpt_begin(cairn_ckpt* ckpt) {
  static constexpr const char* fn = "cairn_ckpt_begin";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    auto r = ckpt->ctx->begin();
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_ckpt_commit(cairn_ckpt* ckpt, uint64_t* version) {
  static constexpr const char* fn = "cairn_ckpt_commit";
  if (version != nullptr) *version = 0;
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    auto r = ckpt->ctx->commit();
    if (!r.ok()) return fail(fn, r.error());
    if (version != nullptr) *version = r.value();
    return 0;
  });
}

int cairn_ckpt_flush_async(cairn_ckpt* ckpt) {
  static constexpr const char* fn = "cairn_ckpt_flush_async";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    ckpt->ctx->flush_async();
    return 0;
  });
}

int cairn_ckpt_flush_async_region(cairn_ckpt* ckpt, const cairn_ckpt_region* region) {
  static constexpr const char* fn = "cairn_ckpt_flush_async_region";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (region == nullptr) return null_arg(fn, "region handle is NULL");
  return guard(fn, [&] {
    ckpt->ctx->flush_async(*region->region);
    return 0;
  });
}

int cairn_ckpt_flush_async_dual(cairn_ckpt* ckpt, const cairn_ckpt_dual* dual) {
  static constexpr const char* fn = "cairn_ckpt_flush_async_dual";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (dual == nullptr) return null_arg(fn, "dual region handle is NULL");
  return guard(fn, [&] {
    ckpt->ctx->flush_async(*dual->dual);
    return 0;
  });
}

int cairn_ckpt_stream(cairn_ckpt* ckpt, void* dst, const void* src, size_t len) {
  static constexpr const char* fn = "cairn_ckpt_stream";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (len > 0 && (dst == nullptr || src == nullptr)) return null_arg(fn, "dst or src is NULL");
  return guard(fn, [&] {
    ckpt->ctx->stream(dst, src, len);
    return 0;
  });
}

int cairn_ckpt_stream_fence(cairn_ckpt* ckpt) {
  static constexpr const char* fn = "cairn_ckpt_stream_fence";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    ckpt->ctx->stream_fence();
    return 0;
  });
}

int cairn_ckpt_streamed_dual(cairn_ckpt* ckpt, const cairn_ckpt_dual* dual) {
  static constexpr const char* fn = "cairn_ckpt_streamed_dual";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (dual == nullptr) return null_arg(fn, "dual region handle is NULL");
  return guard(fn, [&] {
    ckpt->ctx->streamed(*dual->dual);
    return 0;
  });
}

int cairn_ckpt_flush_barrier(cairn_ckpt* ckpt) {
  static constexpr const char* fn = "cairn_ckpt_flush_barrier";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  return guard(fn, [&] {
    ckpt->ctx->flush_barrier();
    return 0;
  });
}

int cairn_ckpt_stats_get(const cairn_ckpt* ckpt, cairn_ckpt_stats* out) {
  static constexpr const char* fn = "cairn_ckpt_stats_get";
  CAIRN_REQUIRE_CKPT(fn, ckpt);
  if (out == nullptr) return null_arg(fn, "out (cairn_ckpt_stats*) is NULL");
  const cps::Stats& s = ckpt->ctx->stats();
  out->commits = s.commits;
  out->restores = s.restores;
  out->version = ckpt->ctx->version();
  out->last_commit_ns = to_ns(s.last_commit_seconds);
  out->total_commit_ns = to_ns(s.total_commit_seconds);
  out->last_restore_ns = to_ns(s.last_restore_seconds);
  out->bytes_copied = s.bytes_copied;
  out->nvm_bytes_written = s.nvm_bytes_written;
  out->nvm_lines_written = s.nvm_lines_written;
  out->incremental_bytes_saved = s.incremental_bytes_saved;
  return 0;
}

}  // extern "C"
