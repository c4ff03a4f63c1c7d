// c_api.cpp — the C API of the MPI layer (cairn_dist_*, include/cairn/dist.h) over dist::Context.
//
// As src/capi/ckpt_c.cpp for persist: a cairn_dist owns its Context and one
// small handle per registered region, pointing at the Context's Region and
// DualRegion objects (stable for its life). Every entry point checks its
// arguments, runs the C++ call inside guard() and reports an Error as its
// negated code plus the per-thread message of cairn_errormsg().
#include <deque>
#include <memory>
#include <string>

#include "cairn/dist.h"
#include "cairn/dist.hpp"
#include "capi/c_error.hpp"

namespace cd = cairn::dist;
using cairn::capi::fail;
using cairn::capi::guard;
using cairn::capi::null_arg;

struct cairn_dist_region {
  cd::Region* region;
};

struct cairn_dist_dual {
  cd::DualRegion* dual;
};

struct cairn_dist {
  std::unique_ptr<cd::Context> ctx;
  std::deque<cairn_dist_region> regions;  // deque: handles keep their addresses
  std::deque<cairn_dist_dual> duals;
  bool opened = false;
};

namespace {

constexpr unsigned kKnownFlags =
    CAIRN_CKPT_ASYNC_FLUSH | CAIRN_CKPT_INCREMENTAL | CAIRN_CKPT_HDF5 | CAIRN_CKPT_NO_CHECKSUMS;

#define CAIRN_REQUIRE_DIST(fn, h) \
  if ((h) == nullptr || !(h)->ctx) return null_arg(fn, "dist context (cairn_dist*) is NULL")

std::string str(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

// The C++ options of a C options struct, or the message naming the bad field.
cairn::Result<cd::Options> to_options(const cairn_dist_options* in) {
  cairn_dist_options o;
  cairn_dist_options_init(&o);
  if (in != nullptr) o = *in;
  auto bad = [](std::string what) { return cairn::Error{cairn::Errc::invalid_argument, std::move(what)}; };
  if ((o.flags & ~kKnownFlags) != 0)
    return bad("options.flags " + std::to_string(o.flags) + " holds bits that are no CAIRN_CKPT_* flag");
  if (o.ranks_per_node < 0)
    return bad("options.ranks_per_node is " + std::to_string(o.ranks_per_node) + ": 0 (real nodes) or more");
  if (o.xor_group < 2) return bad("options.xor_group is " + std::to_string(o.xor_group) + ": at least 2 nodes");
  cd::Options r;
  switch (o.redundancy) {
    case CAIRN_DIST_LOCAL: r.redundancy = cd::Redundancy::local; break;
    case CAIRN_DIST_PARTNER: r.redundancy = cd::Redundancy::partner; break;
    case CAIRN_DIST_XOR: r.redundancy = cd::Redundancy::xor_parity; break;
    default:
      return bad("options.redundancy is " + std::to_string(o.redundancy) +
                 ": CAIRN_DIST_LOCAL (0), CAIRN_DIST_PARTNER (1) or CAIRN_DIST_XOR (2)");
  }
  r.persist.strategy = str(o.strategy);
  if (o.name != nullptr) r.persist.name = o.name;
  r.persist.dir = str(o.dir);
  r.persist.threads = o.threads;
  r.persist.async_flush = (o.flags & CAIRN_CKPT_ASYNC_FLUSH) != 0;
  r.persist.incremental = (o.flags & CAIRN_CKPT_INCREMENTAL) != 0;
  r.persist.hdf5 = (o.flags & CAIRN_CKPT_HDF5) != 0;
  r.persist.checksums = (o.flags & CAIRN_CKPT_NO_CHECKSUMS) == 0;
  r.ranks_per_node = o.ranks_per_node;
  r.xor_group = o.xor_group;
  r.pfs_dir = str(o.pfs_dir);
  r.pfs_every = o.pfs_every;
  return r;
}

int create(const char* fn, MPI_Comm comm, const cairn_dist_options* options, cairn_dist** out) {
  if (out == nullptr) return null_arg(fn, "out (cairn_dist**) is NULL");
  *out = nullptr;
  if (comm == MPI_COMM_NULL) return null_arg(fn, "comm is MPI_COMM_NULL");
  return guard(fn, [&] {
    auto o = to_options(options);
    if (!o.ok()) return fail(fn, o.error());
    auto c = cd::Context::create(comm, std::move(o.value()));
    if (!c.ok()) return fail(fn, c.error());
    auto h = std::make_unique<cairn_dist>();
    h->ctx = std::move(c.value());
    *out = h.release();
    return 0;
  });
}

}  // namespace

extern "C" {

void cairn_dist_options_init(cairn_dist_options* options) {
  if (options == nullptr) return;
  *options = cairn_dist_options{};
  options->flags = CAIRN_CKPT_DEFAULTS;
  options->redundancy = CAIRN_DIST_LOCAL;
  options->xor_group = 4;
}

int cairn_dist_create(MPI_Comm comm, const cairn_dist_options* options, cairn_dist** out) {
  return create("cairn_dist_create", comm, options, out);
}

int cairn_dist_create_f(MPI_Fint comm, const cairn_dist_options* options, cairn_dist** out) {
  return create("cairn_dist_create_f", MPI_Comm_f2c(comm), options, out);
}

int cairn_dist_delete(cairn_dist** ctx) {
  if (ctx == nullptr || *ctx == nullptr) return 0;
  return guard("cairn_dist_delete", [&] {
    delete *ctx;
    *ctx = nullptr;
    return 0;
  });
}

int cairn_dist_region_create(cairn_dist* ctx, const char* name, size_t bytes, cairn_dist_region** out) {
  static constexpr const char* fn = "cairn_dist_region_create";
  if (out != nullptr) *out = nullptr;
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (out == nullptr) return null_arg(fn, "out (cairn_dist_region**) is NULL");
  if (name == nullptr) return null_arg(fn, "name is NULL");
  if (ctx->opened) return fail(fn, CAIRN_E_NOT_READY, "regions are registered before cairn_dist_open");
  return guard(fn, [&] {
    auto r = ctx->ctx->region(name, bytes);
    if (!r.ok()) return fail(fn, r.error());
    *out = &ctx->regions.emplace_back(cairn_dist_region{r.value()});
    return 0;
  });
}

int cairn_dist_dual_create(cairn_dist* ctx, const char* name, size_t bytes, cairn_dist_dual** out) {
  static constexpr const char* fn = "cairn_dist_dual_create";
  if (out != nullptr) *out = nullptr;
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (out == nullptr) return null_arg(fn, "out (cairn_dist_dual**) is NULL");
  if (name == nullptr) return null_arg(fn, "name is NULL");
  if (ctx->opened) return fail(fn, CAIRN_E_NOT_READY, "regions are registered before cairn_dist_open");
  return guard(fn, [&] {
    auto r = ctx->ctx->dual_region(name, bytes);
    if (!r.ok()) return fail(fn, r.error());
    *out = &ctx->duals.emplace_back(cairn_dist_dual{r.value()});
    return 0;
  });
}

void* cairn_dist_region_data(const cairn_dist_region* region) {
  return region != nullptr ? region->region->data() : nullptr;
}
void* cairn_dist_dual_read(const cairn_dist_dual* dual) { return dual != nullptr ? dual->dual->read() : nullptr; }
void* cairn_dist_dual_write(const cairn_dist_dual* dual) { return dual != nullptr ? dual->dual->write() : nullptr; }

int cairn_dist_open(cairn_dist* ctx) {
  static constexpr const char* fn = "cairn_dist_open";
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (ctx->opened) return fail(fn, CAIRN_E_INVALID_ARGUMENT, "the context is open already (open once)");
  return guard(fn, [&] {
    auto r = ctx->ctx->open();
    if (!r.ok()) return fail(fn, r.error());
    ctx->opened = true;
    return 0;
  });
}

int cairn_dist_restore(cairn_dist* ctx, uint64_t* version) {
  static constexpr const char* fn = "cairn_dist_restore";
  if (version != nullptr) *version = 0;
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (!ctx->opened) return fail(fn, CAIRN_E_NOT_READY, "cairn_dist_open first");
  return guard(fn, [&] {
    auto r = ctx->ctx->restore();
    if (!r.ok()) return fail(fn, r.error());
    if (version != nullptr) *version = r.value();
    return 0;
  });
}

int cairn_dist_begin(cairn_dist* ctx) {
  static constexpr const char* fn = "cairn_dist_begin";
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (!ctx->opened) return fail(fn, CAIRN_E_NOT_READY, "cairn_dist_open first");
  return guard(fn, [&] {
    auto r = ctx->ctx->begin();
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_dist_commit(cairn_dist* ctx, uint64_t* version) {
  static constexpr const char* fn = "cairn_dist_commit";
  if (version != nullptr) *version = 0;
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (!ctx->opened) return fail(fn, CAIRN_E_NOT_READY, "cairn_dist_open first");
  return guard(fn, [&] {
    auto r = ctx->ctx->commit();
    if (!r.ok()) return fail(fn, r.error());
    if (version != nullptr) *version = r.value();
    return 0;
  });
}

int cairn_dist_version(const cairn_dist* ctx, uint64_t* out) {
  static constexpr const char* fn = "cairn_dist_version";
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (out == nullptr) return null_arg(fn, "out is NULL");
  *out = ctx->ctx->version();
  return 0;
}

int cairn_dist_rank(const cairn_dist* ctx, int* out) {
  static constexpr const char* fn = "cairn_dist_rank";
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (out == nullptr) return null_arg(fn, "out is NULL");
  *out = ctx->ctx->rank();
  return 0;
}

int cairn_dist_size(const cairn_dist* ctx, int* out) {
  static constexpr const char* fn = "cairn_dist_size";
  CAIRN_REQUIRE_DIST(fn, ctx);
  if (out == nullptr) return null_arg(fn, "out is NULL");
  *out = ctx->ctx->size();
  return 0;
}

int cairn_dist_remove_storage(const cairn_dist_options* options, int rank, int nranks) {
  static constexpr const char* fn = "cairn_dist_remove_storage";
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ": need 0 <= rank < nranks");
  return guard(fn, [&] {
    auto o = to_options(options);
    if (!o.ok()) return fail(fn, o.error());
    auto r = cd::Context::remove_storage(o.value(), rank, nranks);
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

}  // extern "C"
