// cairn_gerris_dist.cpp — the CairnPersist module's C entry into cairn::dist: one step agreed by every rank.
//
// A parallel Gerris run persists each rank's boxes in that rank's own pools
// (cairn_gerris.c); this file makes a persisted step global through dist's
// collective commit. Each commit writes one small record (the Gerris step,
// the lane of the rank's pools holding it and that lane's PM-octree version)
// into a dist region; dist's commit of version V returns once every rank's
// record of V is durable, and dist's restore gives every rank the same V
// after any failure (include/cairn/dist.hpp, invariants I1-I3). The module
// calls commit only once the rank's own pool holds the step durably, so the
// step a record names is durable on every rank when dist agrees on it.
//
// C only crosses this boundary: every call catches everything and returns
// -1 with a message in `err` (exceptions never cross into C).
#include "cairn_gerris_dist.h"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "cairn/dist.hpp"

namespace {

struct Agreement {
  std::unique_ptr<cairn::dist::Context> ctx;
  cairn::dist::Region* record = nullptr;
};

Agreement* g_agreement = nullptr;

int fail(char* err, std::size_t errlen, const std::string& msg) {
  if (err && errlen) std::snprintf(err, errlen, "%s", msg.c_str());
  return -1;
}

}  // namespace

extern "C" int cp_dist_open(const char* dir, const char* name, int resume, cp_dist_record* restored, int* rank,
                            int* ranks, char* storage_dir, std::size_t storage_len, char* err, std::size_t errlen) {
  try {
    if (g_agreement) return fail(err, errlen, "cairn::dist is already open in this process");
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    cairn::dist::Options o;
    o.persist.strategy = "in-place";
    o.persist.dir = dir;
    o.persist.name = std::string(name) + ".dist";
    o.persist.threads = 1;
    if (!resume)  // a fresh run starts on empty storage: an old run's versions would outrank its own
      if (auto rm = cairn::dist::Context::remove_storage(o, r, n); !rm.ok())
        return fail(err, errlen, rm.error().message);
    auto c = cairn::dist::Context::create(MPI_COMM_WORLD, o);
    if (!c.ok()) return fail(err, errlen, c.error().message);
    auto a = std::make_unique<Agreement>();
    a->ctx = std::move(c.value());
    auto reg = a->ctx->region("cairn.gerris", sizeof(cp_dist_record));
    if (!reg.ok()) return fail(err, errlen, reg.error().message);
    a->record = reg.value();
    if (auto o2 = a->ctx->open(); !o2.ok()) return fail(err, errlen, o2.error().message);
    auto g = a->ctx->restore();  // collective: the same version on every rank, or none on every rank
    std::memset(restored, 0, sizeof *restored);
    if (g.ok()) {
      std::memcpy(restored, a->record->data(), sizeof *restored);
      restored->dist_version = g.value();
    } else if (g.error().code != cairn::Errc::no_version) {
      return fail(err, errlen, g.error().message);
    }
    *rank = a->ctx->rank();
    *ranks = a->ctx->size();
    std::snprintf(storage_dir, storage_len, "%s", a->ctx->storage_dir().c_str());
    g_agreement = a.release();
    return 0;
  } catch (const std::exception& e) {
    return fail(err, errlen, e.what());
  }
}

extern "C" int cp_dist_commit(const cp_dist_record* record, std::uint64_t* version, char* err, std::size_t errlen) {
  try {
    if (!g_agreement) return fail(err, errlen, "cairn::dist is not open");
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return fail(err, errlen, "MPI is finalized");
    auto& ctx = *g_agreement->ctx;
    if (auto b = ctx.begin(); !b.ok()) return fail(err, errlen, b.error().message);
    std::memcpy(g_agreement->record->data(), record, sizeof *record);
    auto v = ctx.commit();  // collective: global once it returns
    if (!v.ok()) return fail(err, errlen, v.error().message);
    *version = v.value();
    return 0;
  } catch (const std::exception& e) {
    return fail(err, errlen, e.what());
  }
}

extern "C" void cp_dist_abort(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
}

extern "C" std::uint64_t cp_dist_version(void) { return g_agreement ? g_agreement->ctx->version() : 0; }

extern "C" void cp_dist_close(void) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) delete g_agreement;  // else its communicators are gone with MPI: the process is ending anyway
  g_agreement = nullptr;
}
