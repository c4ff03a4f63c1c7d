// supervise.cpp — in-process restart: the rank process forks the compute
// process, relays its collectives and forks a new one when it dies
// (cairn/dist.hpp, supervise.hpp).
#include "dist/supervise.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cairn/dist.hpp"
#include "dist/protection.hpp"

namespace cairn::dist {
namespace detail {
namespace {

bool read_full(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_full(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

void ask_supervisor(int fd, Op op, std::uint64_t commit_version, const std::uint64_t* in, std::size_t in_words,
                    std::uint64_t* out, std::size_t out_words) {
  const Request q{op, static_cast<std::uint32_t>(in_words), commit_version};
  if (!write_full(fd, &q, sizeof q) || !write_full(fd, in, in_words * 8) ||
      (out_words && !read_full(fd, out, out_words * 8))) {
    std::fprintf(stderr, "cairn dist: the rank process that supervises this compute process is gone\n");
    std::fflush(nullptr);
    ::_exit(3);
  }
}

}  // namespace detail

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int supervise(MPI_Comm comm, Options options, const std::function<int(Context&)>& compute, int max_restarts) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto topo = detail::make_topology(comm, options.ranks_per_node, options.xor_group);
  const char* refused = nullptr;
  if (!topo.ok())
    refused = topo.error().message.c_str();
  else if (options.redundancy != Redundancy::local)
    refused =
        "supervised compute processes keep the local level only (the partner copies and parity exchange data the "
        "supervisor does not relay): use local, with pfs_dir for node losses";
  if (refused) {
    if (rank == 0) std::fprintf(stderr, "cairn dist: %s\n", refused);
    return 2;
  }
  const detail::Topology t = topo.value();
  auto placed = Context::place(std::move(options), t);
  if (!placed.ok()) std::fprintf(stderr, "cairn dist: rank %d: %s\n", t.rank, placed.error().message.c_str());
  if (!all_ok(comm, placed.ok())) return 2;
  options = std::move(placed.value());
  MPI_Comm job;
  MPI_Comm_dup(comm, &job);

  std::uint64_t global = 0;  // the newest version the job agreed on
  bool started = false;
  std::chrono::steady_clock::time_point died{};  // when the last compute process was found dead
  // The newest iteration's exchanges (sendrecv, all-gather) and their
  // answers, in order, for a replacement that recomputes it.
  struct Exchange {
    detail::Op op;
    std::size_t words;  // of the request
    std::vector<std::uint64_t> answer;
  };
  std::uint64_t replay_iteration = 0;
  std::vector<Exchange> replay;
  int restarts = 0;
  for (;;) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      std::fprintf(stderr, "cairn dist: rank %d: socketpair: %s\n", rank, std::strerror(errno));
      MPI_Abort(comm, 3);
    }
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) {
      std::fprintf(stderr, "cairn dist: rank %d: fork: %s\n", rank, std::strerror(errno));
      MPI_Abort(comm, 3);
    }
    if (child == 0) {
      // The compute process: never calls MPI, leaves with _exit (no MPI or
      // atexit teardown of the rank process's state).
      ::close(sv[0]);
      int rc = 2;
      {
        auto c = Context::assemble(t, options);
        if (!c.ok()) {
          std::fprintf(stderr, "cairn dist: rank %d: %s\n", rank, c.error().message.c_str());
        } else {
          c.value()->supervisor_fd_ = sv[1];
          c.value()->restarted_ = restarts > 0;
          c.value()->restart_version_ = global;
          rc = compute(*c.value());
        }
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    ::close(sv[1]);
    const int fd = sv[0];
    // Serve the compute process until it closes its end (exit or death).
    const bool restarting = restarts > 0;
    bool reported = false;
    std::vector<std::uint64_t> in, out;
    detail::Request q{};
    while (detail::read_full(fd, &q, sizeof q)) {
      in.resize(q.words);
      if (!detail::read_full(fd, in.data(), in.size() * 8)) break;
      if (q.op == detail::Op::started) {
        started = true;
        global = in.empty() ? global : in[0];
        continue;
      }
      if (q.op == detail::Op::min_int) {
        int mine = static_cast<int>(static_cast<std::int64_t>(in.at(0))), result = 0;
        if (q.commit_version != 0 && q.commit_version <= global) {
          result = size;  // agreed before the compute process died: answer again
        } else {
          MPI_Allreduce(&mine, &result, 1, MPI_INT, MPI_MIN, job);
          if (q.commit_version != 0 && result == size) global = q.commit_version;
        }
        out.assign(1, static_cast<std::uint64_t>(static_cast<std::int64_t>(result)));
        if (restarting && !reported && q.commit_version != 0) {
          // The first agreement after the restart: how long the others waited
          // for this rank beyond an ordinary iteration.
          std::printf("restarted rank=%d version=%llu restart_ms=%.3f\n", rank,
                      static_cast<unsigned long long>(q.commit_version - 1), ms_since(died));
          std::fflush(stdout);
          reported = true;
        }
      } else if ((q.op == detail::Op::sendrecv && in.size() >= 5) || (q.op == detail::Op::allgather && !in.empty())) {
        // Exchange `seq` of iteration q.commit_version: answered again if the
        // compute process before this one made it, else made now and logged.
        // An all-gather of restore (iteration 0) is never replayed.
        const std::uint64_t seq = q.op == detail::Op::sendrecv ? in[4] : in[0];
        const bool logged = q.op == detail::Op::sendrecv || q.commit_version != 0;
        if (logged && q.commit_version != replay_iteration) replay_iteration = q.commit_version, replay.clear();
        if (logged && seq < replay.size()) {
          const Exchange& e = replay[seq];
          if (e.op != q.op || e.words != in.size()) {
            std::fprintf(stderr,
                         "cairn dist: rank %d: the restarted compute process's exchange %llu of iteration %llu is not "
                         "its predecessor's (an iteration must make the same sendrecv and allgather calls when it is "
                         "computed again); ending the job\n",
                         rank, static_cast<unsigned long long>(seq), static_cast<unsigned long long>(q.commit_version));
            std::fflush(nullptr);
            MPI_Abort(comm, 3);
          }
          out = e.answer;
        } else if (q.op == detail::Op::sendrecv) {
          out.assign((in[3] + 7) / 8, 0);
          MPI_Sendrecv(in.data() + 5, static_cast<int>(in[2]), MPI_BYTE,
                       static_cast<int>(static_cast<std::int64_t>(in[0])), 41, out.data(), static_cast<int>(in[3]),
                       MPI_BYTE, static_cast<int>(static_cast<std::int64_t>(in[1])), 41, job, MPI_STATUS_IGNORE);
        } else {
          const int n = static_cast<int>(in.size() - 1);
          out.resize((in.size() - 1) * static_cast<std::size_t>(size));
          MPI_Allgather(in.data() + 1, n, MPI_UINT64_T, out.data(), n, MPI_UINT64_T, job);
        }
        if (logged && seq == replay.size()) replay.push_back({q.op, in.size(), out});
      }
      if (!detail::write_full(fd, out.data(), out.size() * 8)) break;
    }
    ::close(fd);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) {
      MPI_Comm_free(&job);
      return WEXITSTATUS(status);
    }
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (!started || restarts >= max_restarts) {
      std::fprintf(stderr,
                   "cairn dist: rank %d: compute process %d died (signal %d, %s) %s; ending the job for the launcher "
                   "to relaunch it\n",
                   rank, static_cast<int>(child), sig, strsignal(sig),
                   started ? "once more than --max-restarts allows" : "before its first restore or commit");
      std::fflush(nullptr);
      MPI_Abort(comm, 3);
    }
    ++restarts;
    std::fprintf(stderr,
                 "cairn dist: rank %d: compute process %d died (signal %d, %s) after global version %llu; restarting "
                 "it in place (%d of %d)\n",
                 rank, static_cast<int>(child), sig, strsignal(sig), static_cast<unsigned long long>(global), restarts,
                 max_restarts);
    died = std::chrono::steady_clock::now();
  }
}

}  // namespace cairn::dist
