// context.cpp — the collective side of dist: open, restore and commit agreed
// through MPI all-reduces over a duplicate of the application's communicator.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "cairn/dist.hpp"

namespace cairn::dist {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t allreduce(MPI_Comm comm, std::uint64_t v, MPI_Op op) {
  std::uint64_t out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_UINT64_T, op, comm);
  return out;
}

// The lowest rank whose flag is false, or size if none.
int first_failed(MPI_Comm comm, bool ok) {
  int me = 0, size = 0, out = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &size);
  const int mine = ok ? size : me;
  MPI_Allreduce(&mine, &out, 1, MPI_INT, MPI_MIN, comm);
  return out;
}

// Every rank returns the local error if it has one, else one naming the rank
// that failed first; nothing if all succeeded.
Result<void> agree(MPI_Comm comm, const Result<void>& local, const std::string& what) {
  const int failed = first_failed(comm, local.ok());
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (failed == size) return {};
  if (!local.ok()) return local;
  return make_error(Errc::io_error,
                    what + " failed on rank " + std::to_string(failed) + " (its own message is on its standard error)");
}

}  // namespace

bool all_ok(MPI_Comm comm, bool ok) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return first_failed(comm, ok) == size;
}

Context::~Context() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
  if (heartbeat_fd_ >= 0) ::close(heartbeat_fd_);
}

void Context::beat() {
  if (heartbeat_fd_ < 0) return;
  // {version, pid, version restored}: the launcher reports the versions and
  // ends a hung rank by its pid. A lost beat only delays detection (mtime).
  const std::uint64_t beat[3] = {version(), static_cast<std::uint64_t>(::getpid()), restored_};
  [[maybe_unused]] const ssize_t n = ::pwrite(heartbeat_fd_, beat, sizeof beat, 0);
}

Result<std::unique_ptr<Context>> Context::create(MPI_Comm comm, Options options) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto s = RankStore::create(options.persist, rank, size);
  if (!s.ok()) return std::move(s).error();
  std::unique_ptr<Context> c(new Context());
  MPI_Comm_dup(comm, &c->comm_);
  c->options_ = std::move(options);
  c->store_ = std::move(s.value());
  if (const char* dir = std::getenv("CAIRN_HEARTBEAT_DIR"); dir && *dir)
    c->heartbeat_fd_ = ::open((std::string(dir) + "/heartbeat." + std::to_string(rank)).c_str(),
                              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  return c;
}

Result<void> Context::open() { return agree(comm_, store_->open(), "open"); }

Result<std::uint64_t> Context::restore() {
  const auto t0 = std::chrono::steady_clock::now();
  auto scanned = store_->scan();
  Result<void> local;
  if (!scanned.ok()) local = scanned.error();
  if (auto r = agree(comm_, local, "reading the lanes"); !r.ok()) return std::move(r).error();
  const auto held = scanned.value();
  const std::uint64_t newest = std::max(held[0], held[1]);
  // I3: G is the newest version every rank holds.
  const std::uint64_t g = allreduce(comm_, newest, MPI_MIN);
  const std::uint64_t top = allreduce(comm_, newest, MPI_MAX);
  // I2 allows newest in {G, G+1}; more means a rank lost versions it had.
  const bool consistent = newest + 1 >= top && (g == 0 || held[g % 2] == g);
  const int bad = first_failed(comm_, consistent);
  if (bad != size()) {
    // The ranks holding only old versions are the ones whose storage went.
    return make_error(Errc::corrupted, "rank " + std::to_string(bad) +
                                           " lacks the versions the other ranks hold (newest " + std::to_string(top) +
                                           " on some rank, " + std::to_string(g) +
                                           " on it): its storage was lost or replaced; no global version to restore");
  }
  if (g == 0) {
    stats_.restore_seconds = seconds_since(t0);
    return make_error(Errc::no_version, "no version is held by every rank; start from scratch");
  }
  if (auto r = agree(comm_, store_->select(g), "selecting the global version"); !r.ok()) return std::move(r).error();
  stats_.restore_seconds = seconds_since(t0);
  restored_ = g;
  beat();
  return g;
}

Result<std::uint64_t> Context::commit() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t v = store_->version() + 1;
  if (options_.before_local_commit) options_.before_local_commit(v);
  auto local = store_->commit_local();
  if (local.ok() && options_.after_local_commit) options_.after_local_commit(v);
  const auto t1 = std::chrono::steady_clock::now();
  Result<void> r;
  if (!local.ok()) r = local.error();
  r = agree(comm_, r, "the local commit of version " + std::to_string(v));
  stats_.local_commit_seconds += std::chrono::duration<double>(t1 - t0).count();
  stats_.agree_seconds += seconds_since(t1);
  if (!r.ok()) {
    store_->retry();
    return std::move(r).error();
  }
  store_->advance();
  ++stats_.commits;
  beat();
  return v;
}

}  // namespace cairn::dist
