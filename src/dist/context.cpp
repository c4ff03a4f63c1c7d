// context.cpp — the collective side of dist: open, restore and commit agreed
// through MPI all-reduces over a duplicate of the application's communicator.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cairn/dist.hpp"
#include "dist/heartbeat.hpp"
#include "dist/protection.hpp"
#include "dist/supervise.hpp"
#include "util/hash.hpp"
#include "util/io.hpp"

#ifdef CAIRN_HAVE_ULFM
#include <mpi-ext.h>
#endif

namespace cairn::dist {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

// Given the lowest failed rank (size: none), every rank returns the local
// error if it has one, else one naming that rank; nothing if all succeeded.
Result<void> verdict(int failed, int size, const Result<void>& local, const std::string& what) {
  if (failed == size) return {};
  if (!local.ok()) return local;
  return make_error(Errc::io_error,
                    what + " failed on rank " + std::to_string(failed) + " (its own message is on its standard error)");
}

Result<void> agree_on(MPI_Comm comm, const Result<void>& local, const std::string& what) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return verdict(first_failed(comm, local.ok()), size, local, what);
}

}  // namespace

bool all_ok(MPI_Comm comm, bool ok) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return first_failed(comm, ok) == size;
}

const char* to_string(Redundancy r) {
  switch (r) {
    case Redundancy::local: return "local";
    case Redundancy::partner: return "partner";
    case Redundancy::xor_parity: return "xor";
  }
  return "?";
}

Result<Redundancy> parse_redundancy(const std::string& s) {
  if (s == "local") return Redundancy::local;
  if (s == "partner") return Redundancy::partner;
  if (s == "xor") return Redundancy::xor_parity;
  return make_error(Errc::invalid_argument, "unknown redundancy level '" + s + "': choose local, partner or xor");
}

#ifdef CAIRN_HAVE_ULFM
namespace {

// The live ranks of `world` after a failure: its shrunk communicator, the
// rank in the job of each of its ranks (spares took the dead ranks' numbers,
// lowest spare to lowest number), and the job's communicator (ranks in job
// order; MPI_COMM_NULL on a rank still spare).
struct Rejoined {
  MPI_Comm world = MPI_COMM_NULL, work = MPI_COMM_NULL;
  std::vector<int> slot_of;
  int slot = -1;
};

// Collective over every live rank of `world`, survivors and spares alike.
Result<Rejoined> rejoin(MPI_Comm world, const std::vector<int>& slot_of) {
  MPIX_Comm_revoke(world);
  Rejoined j;
  if (MPIX_Comm_shrink(world, &j.world) != MPI_SUCCESS)
    return make_error(Errc::io_error, "in-job recovery: MPIX_Comm_shrink failed");
  MPI_Comm_set_errhandler(j.world, MPI_ERRORS_RETURN);
  int n = 0, me = 0;
  MPI_Comm_size(j.world, &n);
  MPI_Comm_rank(j.world, &me);
  MPI_Group before, after;
  MPI_Comm_group(world, &before);
  MPI_Comm_group(j.world, &after);
  std::vector<int> mine(static_cast<std::size_t>(n)), old(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) mine[static_cast<std::size_t>(k)] = k;
  MPI_Group_translate_ranks(after, n, mine.data(), before, old.data());
  MPI_Group_free(&before);
  MPI_Group_free(&after);
  std::vector<char> alive(slot_of.size(), 0);
  for (int o : old) alive[static_cast<std::size_t>(o)] = 1;
  std::vector<int> dead;  // the job's ranks whose process failed, in order
  for (std::size_t r = 0; r < slot_of.size(); ++r)
    if (!alive[r] && slot_of[r] >= 0) dead.push_back(slot_of[r]);
  std::sort(dead.begin(), dead.end());
  j.slot_of.resize(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) j.slot_of[static_cast<std::size_t>(k)] = slot_of[static_cast<std::size_t>(old[k])];
  std::size_t taken = 0;
  for (auto& s : j.slot_of)
    if (s < 0 && taken < dead.size()) s = dead[taken++];
  // The failed set is the one the shrink removed, the same on every live
  // rank; agree that it is, and that the spares cover it.
  int flag = taken == dead.size() ? 1 : 0;
  const int rc = MPIX_Comm_agree(j.world, &flag);
  std::string who;
  for (int d : dead) who += (who.empty() ? "" : ", ") + std::to_string(d);
  if (rc != MPI_SUCCESS || flag == 0) {
    MPI_Comm_free(&j.world);
    return make_error(Errc::io_error, "in-job recovery: rank(s) " + who + " failed and " + std::to_string(taken) +
                                          " spare(s) are left: the job cannot keep its size (relaunch it)");
  }
  j.slot = j.slot_of[static_cast<std::size_t>(me)];
  MPI_Comm_split(j.world, j.slot >= 0 ? 0 : MPI_UNDEFINED, j.slot, &j.work);
  if (j.work != MPI_COMM_NULL) MPI_Comm_set_errhandler(j.work, MPI_ERRORS_RETURN);
  return j;
}

}  // namespace
#endif

namespace {

// MPI_Waitall that, when one request failed (a process died: ULFM,
// MPI_ERRORS_RETURN), revokes `comm` and completes the others (they fail
// at once on the revoked communicator), so that no request outlives its
// buffers or its communicator.
int wait_requests(int n, MPI_Request* req, MPI_Comm comm) {
  const int rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  if (rc == MPI_SUCCESS) return rc;
#ifdef CAIRN_HAVE_ULFM
  MPIX_Comm_revoke(comm);
#else
  (void)comm;
#endif
  for (int i = 0; i < n; ++i)
    if (req[i] != MPI_REQUEST_NULL) MPI_Wait(&req[i], MPI_STATUS_IGNORE);
  return rc;
}

// MPI_Sendrecv as two nonblocking operations: Open MPI 5.0's MPI_Sendrecv
// jumps to a stack address when its peer has died (ULFM, MPI_ERRORS_RETURN),
// which the separate requests do not; used with spares only. The send is
// synchronous: a buffered (eager) send completes at once, and when its
// message then fails to reach a dead peer, Open MPI 5.0 reports "send error
// after request freed" to no communicator's handler, which aborts the job.
int sendrecv_requests(const void* send, int send_count, MPI_Datatype type, int dest, void* recv, int recv_count,
                      int source, int tag, MPI_Comm comm) {
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Irecv(recv, recv_count, type, source, tag, comm, &req[0]);
  MPI_Issend(send, send_count, type, dest, tag, comm, &req[1]);
  return wait_requests(2, req, comm);
}

}  // namespace

namespace detail {

// Options::hang_timeout: a thread stamping this process's alive file and
// killing the processes of ranks whose files stopped changing.
class Watchdog {
 public:
  Watchdog(std::string dir, int rank, int nranks, double timeout)
      : dir_(std::move(dir)), rank_(rank), nranks_(nranks), timeout_(timeout) {
    thread_ = std::thread([this] { run(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::error_code ec;
    std::filesystem::remove(path(rank_), ec);
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string path(int r) const { return dir_ + "/alive." + std::to_string(r); }
  void stamp() const {
    const int fd = ::open(path(rank_).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string pid = std::to_string(::getpid()) + "\n";
    [[maybe_unused]] const ssize_t n = ::write(fd, pid.data(), pid.size());
    ::close(fd);
  }
  // Seconds since rank r's stamp (-1: none) and the pid in it.
  std::pair<double, long> age(int r) const {
    struct stat st {};
    if (::stat(path(r).c_str(), &st) != 0) return {-1, 0};
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const double a = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                     static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
    long pid = 0;
    if (FILE* f = std::fopen(path(r).c_str(), "r")) {
      if (std::fscanf(f, "%ld", &pid) != 1) pid = 0;
      std::fclose(f);
    }
    return {a, pid};
  }
  void run() {
    const auto period = std::chrono::duration<double>(timeout_ / 4);
    std::unique_lock<std::mutex> l(m_);
    while (!stop_) {
      stamp();
      // The lowest rank whose stamp is fresh judges the others.
      int judge = -1;
      std::vector<std::pair<double, long>> ages;
      for (int r = 0; r < nranks_; ++r) {
        ages.push_back(r == rank_ ? std::pair<double, long>{0, ::getpid()} : age(r));
        if (judge < 0 && ages.back().first >= 0 && ages.back().first < timeout_) judge = r;
      }
      for (int r = 0; judge == rank_ && r < nranks_; ++r) {
        const auto [a, pid] = ages[static_cast<std::size_t>(r)];
        if (r == rank_ || a < timeout_ || pid <= 0) continue;
        std::fprintf(stderr,
                     "cairn dist: rank %d (pid %ld) has not run for %.1f s (hang timeout %.1f s): killed, its "
                     "rank is recovered in the job\n",
                     r, pid, a, timeout_);
        std::error_code ec;
        std::filesystem::remove(path(r), ec);  // its replacement stamps anew
        ::kill(static_cast<pid_t>(pid), SIGKILL);
      }
      cv_.wait_for(l, period, [this] { return stop_; });
    }
  }
  std::string dir_;
  int rank_, nranks_;
  double timeout_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace detail

bool ulfm_available() {
#ifdef CAIRN_HAVE_ULFM
  return true;
#else
  return false;
#endif
}

Context::Context() = default;

bool Context::check(int rc) {
  if (rc == MPI_SUCCESS) return true;
  // Only with spares (MPI_ERRORS_RETURN on the communicators): a process of
  // the job failed, or another survivor revoked. Revoking here makes every
  // survivor's pending and future operations fail too, wherever it waits.
  failed_ = true;
#ifdef CAIRN_HAVE_ULFM
  for (MPI_Comm c : {comm_, group_, world_})
    if (c != MPI_COMM_NULL) MPIX_Comm_revoke(c);
#endif
  return false;
}

int Context::reduce_min(int value, std::uint64_t commit_version) {
  if (supervisor_fd_ < 0) {
    int out = -1;
    if (!failed_) check(MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MIN, comm_));
    return out;
  }
  const std::uint64_t v = static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
  std::uint64_t out = 0;
  detail::ask_supervisor(supervisor_fd_, detail::Op::min_int, commit_version, &v, 1, &out, 1);
  return static_cast<int>(static_cast<std::int64_t>(out));
}

void Context::allgather(const std::uint64_t* mine, int n, std::uint64_t* all) {
  if (supervisor_fd_ < 0) {
    if (!failed_) check(MPI_Allgather(mine, n, MPI_UINT64_T, all, n, MPI_UINT64_T, comm_));
    return;
  }
  // Once the compute process has started (restored, or reached its first
  // commit), an all-gather is one of its iteration's exchanges, which the
  // supervisor replays to a replacement that recomputes the iteration. Before
  // that (restore's own), a death ends the job: nothing to replay.
  // {sequence in the iteration}, then the words.
  const std::uint64_t iteration = started_sent_ ? version() + 1 : 0;
  std::vector<std::uint64_t> in(1 + static_cast<std::size_t>(n));
  in[0] = started_sent_ ? next_exchange(iteration) : 0;
  std::copy(mine, mine + n, in.begin() + 1);
  detail::ask_supervisor(supervisor_fd_, detail::Op::allgather, iteration, in.data(), in.size(), all,
                         static_cast<std::size_t>(n) * static_cast<std::size_t>(size()));
}

std::uint64_t Context::next_exchange(std::uint64_t iteration) {
  if (iteration != exchange_iteration_) exchange_iteration_ = iteration, exchange_seq_ = 0;
  return exchange_seq_++;
}

void Context::sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv, std::size_t recv_bytes,
                       int source) {
  if (supervisor_fd_ < 0) {
    if (failed_) return;
    if (world_ != MPI_COMM_NULL)
      check(sendrecv_requests(send, static_cast<int>(send_bytes), MPI_BYTE, dest, recv, static_cast<int>(recv_bytes),
                              source, 41, comm_));
    else
      MPI_Sendrecv(send, static_cast<int>(send_bytes), MPI_BYTE, dest, 41, recv, static_cast<int>(recv_bytes), MPI_BYTE,
                   source, 41, comm_, MPI_STATUS_IGNORE);
    return;
  }
  const std::uint64_t iteration = version() + 1;
  // {dest, source, send bytes, recv bytes, sequence in the iteration}, then the bytes.
  std::vector<std::uint64_t> in(5 + (send_bytes + 7) / 8, 0);
  in[0] = static_cast<std::uint64_t>(static_cast<std::int64_t>(dest));
  in[1] = static_cast<std::uint64_t>(static_cast<std::int64_t>(source));
  in[2] = send_bytes, in[3] = recv_bytes, in[4] = next_exchange(iteration);
  std::memcpy(in.data() + 5, send, send_bytes);
  std::vector<std::uint64_t> out((recv_bytes + 7) / 8);
  detail::ask_supervisor(supervisor_fd_, detail::Op::sendrecv, iteration, in.data(), in.size(), out.data(), out.size());
  std::memcpy(recv, out.data(), recv_bytes);
}

Result<void> Context::agree(const Result<void>& local, const std::string& what, std::uint64_t commit_version) {
  const int failed = reduce_min(local.ok() ? size() : rank(), commit_version);
  if (failed_) return make_error(Errc::io_error, what + ": a process of the job failed (recover() replaces it)");
  return verdict(failed, size(), local, what);
}

void Context::tell_supervisor_started() {
  started_sent_ = true;
  if (supervisor_fd_ < 0) return;
  const std::uint64_t v = version();
  detail::ask_supervisor(supervisor_fd_, detail::Op::started, 0, &v, 1, nullptr, 0);
}

Context::~Context() {
  watchdog_.reset();
  pfs_.reset();  // joins a flush in progress
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    // The job ends: rank 0 releases the spares still waiting in create().
    if (world_ != MPI_COMM_NULL && comm_ != MPI_COMM_NULL && !failed_ && !released_ && rank() == 0) {
      const int done = 0;
      for (std::size_t r = 0; r < slot_of_.size(); ++r)
        if (slot_of_[r] < 0) MPI_Send(&done, 1, MPI_INT, static_cast<int>(r), kReleaseTag, world_);
    }
    // Every live process of the job, spares included, past its last
    // operation on the job's communicators before any of them finalizes.
    if (world_ != MPI_COMM_NULL && !failed_) MPI_Barrier(world_);
    for (MPI_Comm* c : {&group_, &comm_, &world_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

bool Context::protected_() const { return options_.redundancy != Redundancy::local || pfs_; }

void Context::beat() {
  // The launcher reports the versions, ends a hung rank by its pid and takes
  // T_i from the interval. A lost beat only delays detection (mtime).
  if (heartbeat_) heartbeat_->beat(version(), restored_);
}

Result<std::unique_ptr<Context>> Context::create(MPI_Comm comm, Options options) {
  if (options.spares == 0) return build(comm, std::move(options));
  int nworld = 0, me = 0;
  MPI_Comm_size(comm, &nworld);
  MPI_Comm_rank(comm, &me);
  if (!ulfm_available())
    return make_error(Errc::unsupported,
                      "spare ranks need an MPI with ULFM (MPIX_Comm_shrink), and this build's has none: build "
                      "with the ulfm preset, or run without spares");
  if (options.spares < 0 || options.spares >= nworld)
    return make_error(Errc::invalid_argument, std::to_string(options.spares) + " spares of " + std::to_string(nworld) +
                                                  " ranks: at least one rank must compute");
  MPI_Comm world = MPI_COMM_NULL, work = MPI_COMM_NULL;
  MPI_Comm_dup(comm, &world);
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  std::vector<int> slot_of(static_cast<std::size_t>(nworld), -1);
  for (int r = 0; r < nworld - options.spares; ++r) slot_of[static_cast<std::size_t>(r)] = r;
  const int slot = slot_of[static_cast<std::size_t>(me)];
  MPI_Comm_split(world, slot >= 0 ? 0 : MPI_UNDEFINED, slot, &work);
  if (slot < 0) return wait_as_spare(world, std::move(slot_of), std::move(options));
  auto c = build(work, std::move(options));
  MPI_Comm_free(&work);
  if (!c.ok()) {
    MPI_Comm_free(&world);
    return c;
  }
  c.value()->world_ = world;
  c.value()->slot_of_ = std::move(slot_of);
  return c;
}

Result<std::unique_ptr<Context>> Context::wait_as_spare(MPI_Comm world, std::vector<int> slot_of, Options options) {
#ifndef CAIRN_HAVE_ULFM
  (void)slot_of;
  (void)options;
  MPI_Comm_free(&world);
  return make_error(Errc::unsupported, "spare ranks need an MPI with ULFM");
#else
  for (;;) {
    // Polled, not blocking: a spare that spun in MPI's progress loop would
    // take a core from the ranks that compute.
    int message = 0, done = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Irecv(&message, 1, MPI_INT, MPI_ANY_SOURCE, kReleaseTag, world, &req);
    while (rc == MPI_SUCCESS && !done) {
      rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS && !done) {
        const timespec pause{0, 200 * 1000};
        nanosleep(&pause, nullptr);
      }
    }
    if (rc == MPI_SUCCESS) {  // the job ended without needing this spare
      MPI_Barrier(world);     // the job's ranks' in ~Context
      MPI_Comm_free(&world);
      std::unique_ptr<Context> c(new Context());
      c->released_ = true;
      return c;
    }
    if (req != MPI_REQUEST_NULL) {  // it fails at once on the revoked communicator
      MPIX_Comm_revoke(world);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    auto j = rejoin(world, slot_of);
    MPI_Comm_free(&world);
    if (!j.ok()) return std::move(j).error();
    world = j.value().world;
    slot_of = std::move(j.value().slot_of);
    if (j.value().slot < 0) continue;  // still a spare
    auto c = build(j.value().work, options);
    MPI_Comm_free(&j.value().work);
    if (!c.ok()) {
      MPI_Comm_free(&world);
      return c;
    }
    c.value()->world_ = world;
    c.value()->slot_of_ = std::move(slot_of);
    c.value()->joined_ = true;
    return c;
  }
#endif
}

Result<void> Context::attach(MPI_Comm work) {
  // The collectives of build() on a joining spare, in the same order.
  auto topo = detail::make_topology(work, options_.ranks_per_node, options_.xor_group);
  if (!topo.ok()) return std::move(topo).error();
  Result<void> local;
  if (topo.value().rank != rank() || topo.value().nranks != size())
    local = make_error(Errc::io_error, "in-job recovery: rank " + std::to_string(rank()) + " became rank " +
                                           std::to_string(topo.value().rank) + " of " +
                                           std::to_string(topo.value().nranks));
  if (auto r = agree_on(work, local, "creating the lanes"); !r.ok()) return r;
  for (MPI_Comm* c : {&group_, &comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  MPI_Comm_dup(work, &comm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  *topo_ = topo.value();
  if (options_.redundancy == Redundancy::xor_parity) {
    const auto& t = *topo_;
    MPI_Comm_split(comm_, t.group_first * t.ranks_per_node + t.local, t.node, &group_);
    MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN);
  }
  return {};
}

Result<std::uint64_t> Context::recover() {
#ifndef CAIRN_HAVE_ULFM
  return make_error(Errc::unsupported,
                    "in-job recovery needs an MPI with ULFM, and this build's has none (the ulfm preset builds one)");
#else
  if (world_ == MPI_COMM_NULL)
    return make_error(Errc::unsupported, "in-job recovery needs spare ranks (Options::spares), and this job has none");
  const auto t0 = std::chrono::steady_clock::now();
  for (MPI_Comm c : {comm_, group_})
    if (c != MPI_COMM_NULL) MPIX_Comm_revoke(c);
  auto j = rejoin(world_, slot_of_);
  if (!j.ok()) return std::move(j).error();
  MPI_Comm_free(&world_);
  world_ = j.value().world;
  slot_of_ = std::move(j.value().slot_of);
  auto a = attach(j.value().work);
  MPI_Comm_free(&j.value().work);
  if (!a.ok()) return std::move(a).error();
  failed_ = false;
  // Partner deltas assume the holder has the blocks sent before: a new
  // holder has none, so every rank sends whole copies next.
  sent_[0].clear();
  sent_[1].clear();
  // The collectives of the replacement's open(), then restore() with it.
  if (auto r = agree(Result<void>{}, "open"); !r.ok()) return std::move(r).error();
  if (auto r = agree(open_replicas(), "opening the partner copies or parity"); !r.ok()) return std::move(r).error();
  auto g = restore();
  if (g.ok()) {
    ++stats_.recoveries;
    stats_.recover_seconds = seconds_since(t0);
  }
  return g;
#endif
}

Result<std::unique_ptr<Context>> Context::build(MPI_Comm comm, Options options) {
  const std::string job_dir = options.persist.dir;  // before place(): shared by the job's ranks
  // Every rank fails alike: the checks below are collective.
  auto topo = detail::make_topology(comm, options.ranks_per_node, options.xor_group);
  if (!topo.ok()) return std::move(topo).error();
  const auto& t = topo.value();
  if (options.redundancy != Redundancy::local && t.nodes < 2)
    return make_error(Errc::invalid_argument,
                      std::string("redundancy '") + to_string(options.redundancy) +
                          "' keeps copies on other nodes, "
                          "and this job has one node: simulate nodes with a ranks-per-node setting, or use local");
  auto placed = place(std::move(options), t);
  auto c = placed.ok() ? assemble(t, std::move(placed.value())) : Result<std::unique_ptr<Context>>(placed.error());
  Result<void> local;
  if (!c.ok()) local = c.error();
  if (auto r = agree_on(comm, local, "creating the lanes"); !r.ok()) return std::move(r).error();
  MPI_Comm_dup(comm, &c.value()->comm_);
  if (c.value()->options_.spares > 0) MPI_Comm_set_errhandler(c.value()->comm_, MPI_ERRORS_RETURN);
  if (c.value()->options_.redundancy == Redundancy::xor_parity) {
    const int color = t.group_first * t.ranks_per_node + t.local;
    MPI_Comm_split(c.value()->comm_, color, t.node, &c.value()->group_);
    if (c.value()->options_.spares > 0) MPI_Comm_set_errhandler(c.value()->group_, MPI_ERRORS_RETURN);
  }
  const Options& o = c.value()->options_;
  if (o.spares > 0 && o.hang_timeout > 0 && job_dir.find("{numa}") == std::string::npos)
    c.value()->watchdog_ =
        std::make_unique<detail::Watchdog>(job_dir.empty() ? "." : job_dir, t.rank, t.nranks, o.hang_timeout);
  return c;
}

Result<Options> Context::place(Options options, const detail::Topology& t) {
  if (!options.pfs_dir.empty() && options.pfs_every == 0) options.pfs_every = 10;
  auto dir =
      detail::numa_dir(options.persist.dir, t,
                       options.persist.name + ".n" + std::to_string(t.nranks) + ".r" + std::to_string(t.rank) + ".");
  if (!dir.ok()) return dir.error();
  options.persist.dir = detail::node_dir(dir.value(), t);
  std::error_code ec;
  if (t.simulated) std::filesystem::create_directories(options.persist.dir, ec);
  if (!options.pfs_dir.empty())
    if (auto r = util::create_directories_durably(options.pfs_dir, "the flush directory"); !r.ok()) return r.error();
  return options;
}

Result<std::unique_ptr<Context>> Context::assemble(const detail::Topology& t, Options options) {
  auto s = RankStore::create(options.persist, t.rank, t.nranks);
  if (!s.ok()) return std::move(s).error();
  std::unique_ptr<Context> c(new Context());
  c->topo_ = std::make_unique<detail::Topology>(t);
  if (!options.pfs_dir.empty())
    c->pfs_ = std::make_unique<detail::PfsFlusher>(options.pfs_dir, options.persist.name, t.rank, t.nranks);
  c->options_ = std::move(options);
  c->store_ = std::move(s.value());
  c->heartbeat_ = std::make_unique<detail::HeartbeatWriter>(t.rank);
  return c;
}

Result<std::vector<std::string>> Context::remove_storage(const Options& options, int rank, int nranks) {
  namespace fs = std::filesystem;
  detail::Topology t;
  const int rpn = detail::ranks_per_node_setting(options.ranks_per_node);
  if (rpn > 0) {
    t.simulated = true;
    t.ranks_per_node = rpn;
    t.node = rank / rpn;
  }
  std::vector<std::string> removed, files;
  std::error_code ec;
  for (const std::string& dir : detail::numa_dirs(options.persist.dir)) {  // the rank's NUMA node may have changed
    persist::Options p = options.persist;
    p.dir = detail::node_dir(dir, t);
    auto out = RankStore::remove_storage(p, rank, nranks);
    if (!out.ok()) return out;
    removed.insert(removed.end(), out.value().begin(), out.value().end());
    const std::string mine = p.name + ".n" + std::to_string(nranks) + ".r" + std::to_string(rank) + ".";
    for (const auto& e : fs::directory_iterator(p.dir.empty() ? "." : p.dir, ec)) {
      const std::string f = e.path().filename().string();
      if (f.rfind(mine + "copy-of.", 0) == 0 || f == mine + "xor.pool") files.push_back(e.path().string());
    }
  }
  if (!options.pfs_dir.empty())
    for (auto& f : detail::PfsFlusher::files(options.pfs_dir, options.persist.name, rank, nranks)) files.push_back(f);
  for (const auto& f : files) {
    if (!fs::remove(f, ec) && ec) return make_error(Errc::io_error, "cannot remove " + f + ": " + ec.message());
    removed.push_back(f);
  }
  return removed;
}

Result<void> Context::open() {
  Result<void> local = store_->open();
  if (!local.ok() && protected_()) {
    // Storage that cannot be opened (damaged, foreign) is set aside and the
    // rank starts empty: restore() rebuilds it from its partner copy, its
    // group's parity or the flushed versions.
    std::fprintf(stderr, "cairn dist: rank %d: %s; its storage is moved to %s/damaged and rebuilt from %s\n", rank(),
                 local.error().message.c_str(), storage_dir().c_str(),
                 options_.redundancy == Redundancy::local ? "the flushed versions" : to_string(options_.redundancy));
    local = store_->set_aside(local.error().message);
  }
  // In place of a compute process that died: the job agreed on open long
  // ago, and the other ranks are waiting in a commit.
  if (restarted_) return local;
  if (auto r = agree(local, "open"); !r.ok()) return r;
  return agree(open_replicas(), "opening the partner copies or parity");
}

Result<void> Context::open_replicas() {
  const auto& t = *topo_;
  const std::string base = storage_dir() + "/" + options_.persist.name + ".n" + std::to_string(t.nranks) + ".r" +
                           std::to_string(t.rank) + ".";
  auto open_slot = [&](const std::string& path, detail::SlotFile::Kind kind, int source,
                       std::size_t bytes) -> Result<std::unique_ptr<detail::SlotFile>> {
    auto f = detail::SlotFile::open(path, kind, t.rank, source, t.nranks, bytes);
    if (f.ok() || (f.error().code != Errc::corrupted && f.error().code != Errc::foreign_file &&
                   f.error().code != Errc::truncated && f.error().code != Errc::wrong_version))
      return f;
    // A damaged, stale or foreign copy is worth nothing: set it aside, start empty
    // (the restore then sees that this rank does not hold it).
    std::fprintf(stderr, "cairn dist: rank %d: %s; it is moved aside (.damaged) and written anew\n", t.rank,
                 f.error().message.c_str());
    std::error_code ec;
    std::filesystem::rename(path, path + ".damaged", ec);
    return detail::SlotFile::open(path, kind, t.rank, source, t.nranks, bytes);
  };
  if (options_.redundancy == Redundancy::partner) {
    // The holder needs its source's payload size.
    std::uint64_t mine = store_->payload_bytes(), theirs = 0;
    if (!check(sendrecv_requests(&mine, 1, MPI_UINT64_T, t.partner(), &theirs, 1, t.source(), 7, comm_)))
      return make_error(Errc::io_error, "a process of the job failed");
    if (copy_ && copy_->bytes() == theirs) return {};  // after recover(): the copy this rank holds already
    auto f = open_slot(base + "copy-of.r" + std::to_string(t.source()) + ".pool", detail::SlotFile::Kind::partner,
                       t.source(), theirs);
    if (!f.ok()) return std::move(f).error();
    copy_ = std::move(f.value());
  } else if (options_.redundancy == Redundancy::xor_parity) {
    std::uint64_t mine = store_->payload_bytes(), largest = 0;
    if (!check(MPI_Allreduce(&mine, &largest, 1, MPI_UINT64_T, MPI_MAX, group_)))
      return make_error(Errc::io_error, "a process of the job failed");
    const std::size_t g = static_cast<std::size_t>(topo_->group_size);
    chunk_ = ((largest + g - 2) / (g - 1) + 7) / 8 * 8;
    if (parity_ && parity_->bytes() == chunk_) return {};
    auto f = open_slot(base + "xor.pool", detail::SlotFile::Kind::parity, t.rank, chunk_);
    if (!f.ok()) return std::move(f).error();
    parity_ = std::move(f.value());
  }
  return {};
}

Result<void> Context::protect(std::uint64_t version, bool full) {
  if (options_.redundancy == Redundancy::partner) return protect_partner(version, full, true, true);
  if (options_.redundancy == Redundancy::xor_parity) return protect_parity(version);
  return {};
}

Result<void> Context::protect_partner(std::uint64_t version, bool full, bool send, bool recv) {
  if (failed_) return make_error(Errc::io_error, "a process of the job failed");
  constexpr std::size_t B = RankStore::kBlock;
  const auto& t = *topo_;
  const int slot = static_cast<int>(version % 2);
  // Sender: hash every block of the payload (a region's last block padded
  // with zeros in scratch), pick the ones that changed since this slot's.
  std::vector<std::uint64_t> hashes;
  std::vector<std::pair<const std::byte*, std::size_t>> blocks;  // address, index
  std::vector<std::uint64_t> changed;
  std::size_t partial = 0;
  if (send) {
    hashes.resize(store_->payload_bytes() / B);
    blocks.resize(hashes.size());
    std::size_t tails = 0;
    store_->for_each_region(version, [&](std::size_t, const std::byte*, std::size_t n) { tails += n % B ? 1 : 0; });
    scratch_.assign(tails * B, std::byte{0});
    store_->for_each_region(version, [&](std::size_t at, const std::byte* p, std::size_t n) {
      for (std::size_t off = 0; off < n; off += B) {
        const std::byte* b = p + off;
        if (n - off < B) {
          std::byte* tail = scratch_.data() + partial++ * B;
          std::memcpy(tail, b, n - off);
          b = tail;
        }
        const std::size_t i = (at + off) / B;
        blocks[i] = {b, i};
        hashes[i] = util::hash_bytes(b, B, i);
      }
    });
    const auto& prev = sent_[slot];
    for (std::size_t i = 0; i < hashes.size(); ++i)
      if (full || prev.size() != hashes.size() || prev[i] != hashes[i]) changed.push_back(i);
  }
  // Header exchange: {version, blocks, checksum}, then the block list.
  std::uint64_t out_h[3] = {version, changed.size(), send ? detail::payload_checksum(hashes) : 0}, in_h[3] = {0, 0, 0};
  MPI_Request req[2];
  int nreq = 0;
  if (recv) MPI_Irecv(in_h, 3, MPI_UINT64_T, t.source(), 11, comm_, &req[nreq++]);
  if (send) MPI_Isend(out_h, 3, MPI_UINT64_T, t.partner(), 11, comm_, &req[nreq++]);
  if (!check(wait_requests(nreq, req, comm_))) return make_error(Errc::io_error, "a process of the job failed");
  Result<void> result;
  std::vector<std::uint64_t> in_list;
  if (recv) {
    if (in_h[0] != version)
      result = make_error(Errc::corrupted, "rank " + std::to_string(t.source()) + " sent version " +
                                               std::to_string(in_h[0]) + " while " + std::to_string(version) +
                                               " was expected");
    in_list.resize(in_h[1]);
    if (result.ok()) result = copy_->begin(version);
  }
  nreq = 0;
  if (recv)
    MPI_Irecv(in_list.data(), static_cast<int>(in_list.size()), MPI_UINT64_T, t.source(), 12, comm_, &req[nreq++]);
  if (send)
    MPI_Isend(changed.data(), static_cast<int>(changed.size()), MPI_UINT64_T, t.partner(), 12, comm_, &req[nreq++]);
  if (!check(wait_requests(nreq, req, comm_))) return make_error(Errc::io_error, "a process of the job failed");
  // The blocks, straight from the lane into the holder's slot.
  std::vector<MPI_Request> reqs;
  reqs.reserve(in_list.size() + changed.size());
  if (recv)
    for (auto i : in_list) {
      std::byte* dst = copy_->data(slot) + i * B;
      if ((i + 1) * B > copy_->bytes()) {
        result = make_error(Errc::corrupted, "a partner block out of range");
        dst = nullptr;
      }
      reqs.emplace_back();
      MPI_Irecv(dst ? static_cast<void*>(dst) : static_cast<void*>(scratch_.data()), dst ? static_cast<int>(B) : 0,
                MPI_BYTE, t.source(), 13, comm_, &reqs.back());
    }
  for (auto i : changed) {
    reqs.emplace_back();
    MPI_Isend(blocks[i].first, static_cast<int>(B), MPI_BYTE, t.partner(), 13, comm_, &reqs.back());
  }
  if (!check(wait_requests(static_cast<int>(reqs.size()), reqs.data(), comm_)))
    return make_error(Errc::io_error, "a process of the job failed");
  if (recv && result.ok()) result = copy_->publish(version, in_h[2]);
  if (send) {
    stats_.redundancy_blocks_sent += changed.size();
    stats_.redundancy_blocks += hashes.size();
    stats_.redundancy_bytes_sent += changed.size() * B;
    sent_[slot] = std::move(hashes);
  }
  if (!result.ok()) sent_[0].clear(), sent_[1].clear();
  return result;
}

void Context::copy_chunk(std::uint64_t version, std::size_t c, std::byte* out) const {
  // Bytes [c chunk_, (c + 1) chunk_) of the padded payload; zeros past it.
  std::memset(out, 0, chunk_);
  const std::size_t lo = c * chunk_, hi = lo + chunk_;
  store_->for_each_region(version, [&](std::size_t at, const std::byte* p, std::size_t n) {
    const std::size_t from = std::max(lo, at), to = std::min(hi, at + n);
    if (from < to) std::memcpy(out + (from - lo), p + (from - at), to - from);
  });
}

void Context::xor_ring(std::uint64_t version, bool contributes, std::byte* result) {
  std::function<void(std::size_t, std::byte*)> chunk_of;
  if (contributes) chunk_of = [&](std::size_t c, std::byte* out) { copy_chunk(version, c, out); };
  stats_.redundancy_bytes_sent += detail::xor_reduce_scatter(group_, chunk_, chunk_of, result, scratch_);
}

Result<void> Context::protect_parity(std::uint64_t version) {
  Result<void> result = parity_->begin(version);
  std::byte* mine = parity_->data(static_cast<int>(version % 2));
  xor_ring(version, true, mine);
  if (result.ok()) result = parity_->publish(version, detail::payload_checksum(detail::block_hashes(mine, chunk_)));
  return result;
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
  std::chrono::steady_clock::time_point t2 = t1;
  if (options_.redundancy != Redundancy::local) {
    // Copies of V only once every rank holds V locally, and durable on their
    // holders before V is global.
    r = agree(r, "the local commit of version " + std::to_string(v));
    if (r.ok()) r = protect(v, false);
    t2 = std::chrono::steady_clock::now();
  }
  if (!started_sent_) tell_supervisor_started();
  r = agree(r,
            (options_.redundancy == Redundancy::local ? "the local commit of version " : "protecting version ") +
                std::to_string(v),
            v);
  stats_.local_commit_seconds += std::chrono::duration<double>(t1 - t0).count();
  stats_.redundancy_seconds += std::chrono::duration<double>(t2 - t1).count();
  stats_.agree_seconds += seconds_since(t2);
  if (!r.ok()) {
    store_->retry();
    sent_[0].clear();
    sent_[1].clear();
    return std::move(r).error();
  }
  store_->advance();
  ++stats_.commits;
  if (pfs_ && v % options_.pfs_every == 0 && !(options_.skip_flush && options_.skip_flush(v))) {
    // The flush works on a copy: the lane is written again two versions on.
    const auto tp = std::chrono::steady_clock::now();
    auto buf = pfs_->take_buffer();
    buf.resize(store_->payload_bytes());
    store_->for_each_region(
        v, [&](std::size_t at, const std::byte* p, std::size_t n) { std::memcpy(buf.data() + at, p, n); });
    auto f = pfs_->start(v, std::move(buf));
    stats_.pfs_copy_seconds += seconds_since(tp);
    if (!f.ok()) std::fprintf(stderr, "cairn dist: rank %d: %s\n", rank(), f.error().message.c_str());
    ++stats_.pfs_flushes;
  }
  beat();
  return v;
}

namespace {

// What each rank tells the others at restore.
struct Info {
  std::uint64_t held[2];    // its lanes (0, 0: lost or fresh)
  std::uint64_t copy[2];    // partner: the slots of the copy it holds for its source
  std::uint64_t parity[2];  // xor: the slots of its parity segment
  std::uint64_t pfs[2];     // its two newest flushed versions
  std::uint64_t found;      // 1: its storage existed before this process (RankStore::found_storage)
  std::uint64_t newest() const { return std::max(held[0], held[1]); }
};
static_assert(sizeof(Info) == 9 * 8);

}  // namespace

Result<std::uint64_t> Context::restore() {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& t = *topo_;
  stats_.rebuilt_ranks = 0;
  if (restarted_) return restore_in_place(t0);
  auto scanned = store_->scan();
  Result<void> local;
  if (!scanned.ok() && protected_()) {
    // A lane that opened but whose version is unreadable: set aside, rebuilt.
    std::fprintf(stderr, "cairn dist: rank %d: %s; rebuilding it\n", rank(), scanned.error().message.c_str());
    local = store_->set_aside(scanned.error().message);
  } else if (!scanned.ok()) {
    local = scanned.error();
  }
  if (auto r = agree(local, "reading the lanes"); !r.ok()) return std::move(r).error();

  Info mine{};
  mine.held[0] = store_->held()[0];
  mine.held[1] = store_->held()[1];
  for (int i = 0; i < 2; ++i) {
    mine.copy[i] = copy_ ? copy_->held(i) : 0;
    mine.parity[i] = parity_ ? parity_->held(i) : 0;
  }
  if (pfs_) {
    const auto v = pfs_->versions();
    for (std::size_t i = 0; i < 2 && i < v.size(); ++i) mine.pfs[i] = v[i];
  }
  mine.found = store_->found_storage() ? 1 : 0;
  std::vector<Info> all(static_cast<std::size_t>(t.nranks));
  allgather(&mine.held[0], 9, &all[0].held[0]);
  if (failed_) return make_error(Errc::io_error, "restore: a process of the job failed (recover() replaces it)");

  std::uint64_t top = 0;
  for (const auto& i : all) top = std::max(top, i.newest());
  std::vector<char> lost(all.size(), 0);
  bool any_lost = false;
  for (std::size_t r = 0; r < all.size(); ++r) {
    // A rank that holds nothing lost its storage if another holds version 2
    // or later (a rank commits 2 only after every rank committed 1), or if
    // its storage is new. With version 1 at most and its storage found, it
    // only never committed 1 (it died or hung first): 1 was never agreed.
    lost[r] = top > 0 && all[r].newest() == 0 && (top > 1 || !all[r].found) ? 1 : 0;
    any_lost = any_lost || lost[r];
  }
  auto finish = [&](std::uint64_t g, const char* from) -> Result<std::uint64_t> {
    tell_supervisor_started();
    stats_.restore_seconds = seconds_since(t0);
    stats_.restored_from = from;
    restored_ = g;
    beat();
    return g;
  };

  // G: the newest version every surviving rank holds and every lost rank's
  // copy or parity holds (I2: survivors hold G or G + 1).
  std::uint64_t g = UINT64_MAX;
  std::string why;  // why the lanes, copies and parity cannot give G
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!lost[r]) g = std::min(g, all[r].newest());
  const auto group_members = [&](int r) {
    std::vector<int> m;
    const auto [first, count] = t.group_of(r / t.ranks_per_node);
    for (int n = first; n < first + count; ++n) m.push_back(t.rank_of(n, r % t.ranks_per_node));
    return m;
  };
  for (std::size_t r = 0; r < all.size() && why.empty(); ++r) {
    if (!lost[r]) continue;
    const std::string who = "rank " + std::to_string(r) + " (node " + std::to_string(r / t.ranks_per_node) + ")";
    if (options_.redundancy == Redundancy::local) {
      why = "rank " + std::to_string(r) + " lacks the versions the other ranks hold (newest " + std::to_string(top) +
            " on some rank, none on it): its storage was lost, and redundancy is local (no partner copy or parity)";
    } else if (options_.redundancy == Redundancy::partner) {
      const int h = t.partner_of(static_cast<int>(r));
      if (lost[static_cast<std::size_t>(h)])
        why = who + " and rank " + std::to_string(h) + ", which holds its partner copy, both lost their storage";
      else
        g = std::min(g, std::max(all[static_cast<std::size_t>(h)].copy[0], all[static_cast<std::size_t>(h)].copy[1]));
    } else {
      for (int m : group_members(static_cast<int>(r))) {
        if (m == static_cast<int>(r)) continue;
        if (lost[static_cast<std::size_t>(m)])
          why = who + " and rank " + std::to_string(m) +
                " of its parity group both lost their storage (XOR parity "
                "survives one lost node per group)";
        else
          g = std::min(
              g, std::max(all[static_cast<std::size_t>(m)].parity[0], all[static_cast<std::size_t>(m)].parity[1]));
      }
    }
  }
  if (why.empty() && top > 0) {
    // Every survivor must hold G in lane G % 2 and every copy or parity the
    // rebuild reads must hold G in slot G % 2; a newest beyond G + 1 means a
    // rank lost versions it had.
    for (std::size_t r = 0; r < all.size() && why.empty(); ++r) {
      if (lost[r]) continue;
      if (all[r].held[g % 2] != g || all[r].newest() > g + 1 || top > g + 1)
        why = "rank " + std::to_string(r) + " lacks the versions the other ranks hold (newest " + std::to_string(top) +
              " on some rank, " + std::to_string(all[r].newest()) +
              " on it): its storage was lost or replaced; no global version to restore";
    }
    for (std::size_t r = 0; r < all.size() && why.empty() && any_lost; ++r) {
      if (!lost[r]) continue;
      if (options_.redundancy == Redundancy::partner) {
        const int h = t.partner_of(static_cast<int>(r));
        if (all[static_cast<std::size_t>(h)].copy[g % 2] != g)
          why = "the partner copy of rank " + std::to_string(r) + " on rank " + std::to_string(h) +
                " does not hold version " + std::to_string(g);
      } else {
        for (int m : group_members(static_cast<int>(r)))
          if (m != static_cast<int>(r) && all[static_cast<std::size_t>(m)].parity[g % 2] != g)
            why = "the parity of rank " + std::to_string(m) + " does not hold version " + std::to_string(g) +
                  " needed to rebuild rank " + std::to_string(r);
      }
    }
  }
  if (top == 0 || g == 0 || !why.empty()) {
    bool any_pfs = false;
    for (const auto& i : all) any_pfs = any_pfs || i.pfs[0] != 0;
    if ((top == 0 || (g == 0 && why.empty())) && !any_pfs) {
      tell_supervisor_started();
      stats_.restore_seconds = seconds_since(t0);
      return make_error(Errc::no_version, "no version is held by every rank; start from scratch");
    }
    if (!pfs_) return make_error(Errc::corrupted, why);
    auto p = restore_from_pfs(why.empty() ? "no rank holds a version" : why);
    if (!p.ok()) return p;
    return finish(p.value(), "pfs");
  }

  // Rebuild the lost ranks at G.
  Result<void> rebuilt;
  const char* from = "local";
  if (any_lost && options_.redundancy == Redundancy::partner) {
    from = "partner";
    const bool source_lost = lost[static_cast<std::size_t>(t.source())];
    const int slot = static_cast<int>(g % 2);
    int ok = !source_lost || copy_->verify(slot) ? 1 : 0;
    if (!ok)
      rebuilt = make_error(Errc::corrupted, copy_->path() + ": the partner copy of version " + std::to_string(g) +
                                                " of rank " + std::to_string(t.source()) + " fails its checksum");
    if (auto r = agree(rebuilt, "verifying the partner copies"); !r.ok()) {
      if (!pfs_) return std::move(r).error();
      auto p = restore_from_pfs(r.error().message);
      if (!p.ok()) return p;
      return finish(p.value(), "pfs");
    }
    MPI_Request req[2];
    int n = 0;
    std::vector<std::byte> payload;
    if (lost[static_cast<std::size_t>(t.rank)]) {
      payload.resize(store_->payload_bytes());
      MPI_Irecv(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, t.partner(), 21, comm_, &req[n++]);
    }
    if (source_lost)
      MPI_Isend(copy_->data(slot), static_cast<int>(copy_->bytes()), MPI_BYTE, t.source(), 21, comm_, &req[n++]);
    if (!check(wait_requests(n, req, comm_)))
      return make_error(Errc::io_error, "restore: a process of the job failed (recover() replaces it)");
    if (!payload.empty()) rebuilt = store_->rewrite(g, payload.data());
  } else if (any_lost) {
    from = "xor";
    // Groups with a lost member: survivors contribute G, the lost member
    // zeros; member t's parity XOR the result is the lost member's chunk.
    const auto members = group_members(t.rank);
    int lost_member = -1;
    for (int m : members)
      if (lost[static_cast<std::size_t>(m)]) lost_member = m;
    if (lost_member >= 0) {
      const std::size_t k = static_cast<std::size_t>(lost_member / t.ranks_per_node - t.group_first);
      const int slot = static_cast<int>(g % 2);
      Result<void> check;
      if (lost_member != t.rank && !parity_->verify(slot))
        check = make_error(Errc::corrupted,
                           parity_->path() + ": the parity of version " + std::to_string(g) + " fails its checksum");
      int ok = check.ok() ? 1 : 0, all_ok_group = 0;
      MPI_Allreduce(&ok, &all_ok_group, 1, MPI_INT, MPI_MIN, group_);
      if (!all_ok_group)
        rebuilt = check.ok() ? make_error(Errc::corrupted, "a parity segment of the group is damaged") : check;
      if (all_ok_group) {
        std::vector<std::byte> padded;
        const bool me = lost_member == t.rank;
        detail::xor_rebuild(
            group_, static_cast<int>(k), chunk_, [&](std::size_t c, std::byte* out) { copy_chunk(g, c, out); },
            me ? nullptr : parity_->data(slot), me ? &padded : nullptr, scratch_);
        if (me) rebuilt = store_->rewrite(g, padded.data());
      }
    }
  }
  if (auto r = agree(rebuilt, "rebuilding the lost ranks"); !r.ok()) {
    if (!pfs_) return std::move(r).error();
    auto p = restore_from_pfs(r.error().message);
    if (!p.ok()) return p;
    return finish(p.value(), "pfs");
  }
  for (std::size_t r = 0; r < lost.size(); ++r) stats_.rebuilt_ranks += lost[r] ? 1 : 0;
  if (options_.restore_stage) options_.restore_stage("rebuilt");
  const Result<void> selected = lost[static_cast<std::size_t>(t.rank)] ? Result<void>{} : store_->select(g);
  if (auto r = agree(selected, "selecting the global version"); !r.ok()) return std::move(r).error();

  // Protect G again where a copy or parity is missing: the rebuilt ranks'
  // holders' slots, or slots lost with a node.
  if (options_.redundancy == Redundancy::partner) {
    auto needs = [&](int s) {
      const int h = t.partner_of(s);
      return lost[static_cast<std::size_t>(h)] || all[static_cast<std::size_t>(h)].copy[g % 2] != g;
    };
    const bool send = needs(t.rank), recv = needs(t.source());
    if (auto r = agree(protect_partner(g, true, send, recv), "protecting the restored version"); !r.ok())
      return std::move(r).error();
  } else if (options_.redundancy == Redundancy::xor_parity) {
    bool again = false;
    for (int m : group_members(t.rank))
      again = again || lost[static_cast<std::size_t>(m)] || all[static_cast<std::size_t>(m)].parity[g % 2] != g;
    Result<void> r;
    if (again) r = protect_parity(g);
    if (auto a = agree(r, "protecting the restored version"); !a.ok()) return std::move(a).error();
  }
  if (options_.restore_stage) options_.restore_stage("protected");
  return finish(g, any_lost ? from : "local");
}

Result<std::uint64_t> Context::restore_in_place(std::chrono::steady_clock::time_point t0) {
  // The version the supervisor saw agreed last: this rank holds it (its
  // local commit preceded the agreement) in lane G % 2.
  auto scanned = store_->scan();
  if (!scanned.ok()) return std::move(scanned).error();
  tell_supervisor_started();
  stats_.restore_seconds = seconds_since(t0);
  if (restart_version_ == 0)
    return make_error(Errc::no_version, "the compute process died before the first global version; start again");
  if (auto r = store_->select(restart_version_); !r.ok()) return std::move(r).error();
  stats_.restored_from = "local";
  restored_ = restart_version_;
  tell_supervisor_started();  // its exchanges from here on are its predecessor's, replayed
  beat();
  return restart_version_;
}

Result<std::uint64_t> Context::restore_from_pfs(const std::string& why) {
  // Every version each rank has complete (retention keeps more than two of a
  // rank's when another lags: files.hpp), then the versions every rank has,
  // newest first.
  const auto v = pfs_->versions();
  const std::uint64_t count = v.size();
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(size()));
  allgather(&count, 1, counts.data());
  if (failed_) return make_error(Errc::io_error, "restore: a process of the job failed (recover() replaces it)");
  const std::size_t most = static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end()));
  std::vector<std::vector<std::uint64_t>> per_rank(static_cast<std::size_t>(size()));
  if (most > 0) {
    std::vector<std::uint64_t> mine(most, 0), all(most * static_cast<std::size_t>(size()));
    std::copy(v.begin(), v.end(), mine.begin());
    allgather(mine.data(), static_cast<int>(most), all.data());
    if (failed_) return make_error(Errc::io_error, "restore: a process of the job failed (recover() replaces it)");
    for (std::size_t r = 0; r < per_rank.size(); ++r)
      per_rank[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * most),
                         all.begin() + static_cast<std::ptrdiff_t>((r + 1) * most));
  }
  const auto common = detail::flushed_everywhere(per_rank);
  if (common.empty())
    return make_error(Errc::corrupted, why + "; and no flushed version in " + options_.pfs_dir +
                                           " is complete on every rank: no global version to restore");
  // The newest that every rank reads back intact: a damaged or vanished file
  // of one rank sends every rank to the version before.
  std::vector<std::byte> payload(store_->payload_bytes());
  std::string tried;
  std::uint64_t p = 0;
  for (const std::uint64_t candidate : common) {
    Result<void> r = pfs_->read(candidate, payload);
    if (!r.ok()) std::fprintf(stderr, "cairn dist: rank %d: %s\n", rank(), r.error().message.c_str());
    auto a = agree(r, "reading flushed version " + std::to_string(candidate));
    if (failed_) return std::move(a).error();
    if (a.ok()) {
      p = candidate;
      break;
    }
    tried += (tried.empty() ? "" : "; ") + a.error().message;
  }
  if (p == 0)
    return make_error(Errc::corrupted, why + "; and no flushed version in " + options_.pfs_dir +
                                           " complete on every rank reads back intact on every rank (tried " +
                                           std::to_string(common.size()) + ": " + tried +
                                           "): no global version to restore");
  Result<void> r = store_->rewrite(p, payload.data());
  if (auto a = agree(r, "restoring flushed version " + std::to_string(p)); !a.ok()) return std::move(a).error();
  if (rank() == 0)
    std::fprintf(stderr, "cairn dist: %s; restored flushed version %llu from %s\n", why.c_str(),
                 static_cast<unsigned long long>(p), options_.pfs_dir.c_str());
  sent_[0].clear();
  sent_[1].clear();
  if (auto a = agree(protect(p, true), "protecting the restored version"); !a.ok()) return std::move(a).error();
  // Flushed versions after p belong to the run that was rolled back: the
  // run from p flushes them again, and none of them may pair with the new
  // run's files as a version complete everywhere.
  pfs_->remove_newer_than(p);
  stats_.rebuilt_ranks = static_cast<std::uint64_t>(size());
  return p;
}

}  // namespace cairn::dist
