// main.cpp — `amr-mpi`: the amr app's adaptive interface (apps/amr) on a
// PM-octree partitioned across MPI ranks by Morton ranges, every rank's part
// persisted with pm_persistent and made one global version by agreement. It
// ends with the same checksum as `amr` on one process with the same
// switches, resumes after a kill at the version every rank holds, and
// resumes on another number of ranks (--from-ranks).
//
// Sample runs:
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a
//   amr --size 5 --period 0.5                                    (the same checksum)
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --crash-at 20     (rank 0 SIGKILLed)
//   mpirun -n 4 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --resume          (continues at 20)
//   mpirun -n 3 amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --resume --from-ranks 4
//   cairn launch -n 4 -- amr-mpi --size 5 --period 0.5 --dir /dev/shm/a --crash-at 20
//
// Partition. The octants of level --level-min are the units (64 in 3D at
// level 2); rank r owns a contiguous Morton range of units, chosen so that
// each range holds about the same number of leaves, and every leaf inside
// them. Coarsening never goes above --level-min, so a family never spans two
// ranks and refinement and coarsening are local. The partition is written
// once per job (<name>.n<P>.partition) and read back on restart.
//
// The ghost layer and the distributed balance: mesh.hpp.
//
// Versions (cairn/dist.hpp's agreement, on the octree). Every rank persists
// the same steps; the octree keeps the version before its committed one
// (Options::keep_previous), so when a rank died before committing version
// V while others committed it, every rank can still give V-1. A commit is
// pm_persistent, then an all-reduce; restart takes G = the smallest
// committed version over the ranks and restores G everywhere (a rank that
// holds G+1 goes back to G durably). With --redundancy partner the copies
// of each rank's leaves on the next node (mesh.hpp's Part::protect) follow
// the same rule, and restart rebuilds a lost node's ranks from them; with
// --redundancy xor the parity segments of each group of nodes (parity.hpp)
// do, and restart rebuilds one lost node per group from them.
#include <mpi.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "apps/amr-mpi/mesh.hpp"
#include "apps/amr-mpi/parity.hpp"
#include "apps/amr/amr.hpp"
#include "cairn/dist.hpp"
#include "cairn/octree.hpp"
#include "dist/heartbeat.hpp"
#include "dist/protection.hpp"

namespace {

using namespace cairn::apps::amr_mpi;
namespace amr = cairn::apps::amr;
namespace fs = std::filesystem;
using amr::model::load_step;
using amr::model::read_c;
using amr::model::store_step;
using amr::model::write_c;
using cairn::Errc;
using cairn::Result;
using Clock = std::chrono::steady_clock;
using cairn::dist::detail::PfsFlusher;

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "amr-mpi rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  return 2;
}

bool all_ok(bool ok) { return cairn::dist::all_ok(MPI_COMM_WORLD, ok); }

// A new, empty partner copy: stubs at the partition's level, filled by the
// first protect() (which sends everything) and persisted as `first_version`
// (the copy's versions are its source tree's).
Result<void> fresh_replica(Part& p, const Args& a, int rank, int ranks, std::uint64_t first_version = 1) {
  auto t = fresh_tree(replica_path(a, rank, ranks), a, first_version);
  if (!t.ok()) return t.error();
  if (auto r = t.value()->uniform(a.level_min, nullptr); !r.ok()) return r;
  p.set_replica(std::move(t.value()));
  return {};
}

// A rank's own leaves of its tree's current version, as the parity's payload.
Result<std::vector<std::byte>> own_payload(Part& p) {
  auto leaves = p.own_leaves(p.tree(), false);
  if (!leaves.ok()) return leaves.error();
  return leaf_payload(load_step(p.tree()), leaves.value());
}

// Every rank's parity segment of `version` (whose payload is `payload`) written, agreed.
Result<void> protect_parity(Parity& parity, std::uint64_t version, const Result<std::vector<std::byte>>& payload) {
  Result<void> r = payload.ok() ? Result<void>{} : Result<void>(payload.error());
  // The group's ring runs even for a rank that failed (zeros), so no one waits forever.
  auto w = parity.protect(version, payload.ok() ? payload.value() : std::vector<std::byte>{});
  if (r.ok()) r = w;
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::io_error, "another rank's parity failed") : r.error();
  return {};
}

// Collective commit: every rank's pm_persistent, then the agreement.
Result<std::uint64_t> commit(Part& p, Parity* parity, PfsFlusher* pfs, const Args& a, int rank, std::uint64_t step,
                             double& seconds, std::uint64_t& blocks) {
  if (a.crash_in_commit >= 0 && static_cast<std::uint64_t>(a.crash_in_commit) == step && rank == a.crash_rank &&
      !a.resume) {
    // Dies before its own commit while the others make theirs: on restart,
    // they hold a version this rank never reached and must go back one.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    raise(SIGKILL);
  }
  const auto t0 = Clock::now();
  auto ps = p.tree().persist();
  if (a.commit == "local" && !ps.ok()) return ps.error();
  if (a.commit != "local" && !all_ok(ps.ok()))
    return ps.ok() ? cairn::make_error(Errc::io_error, "another rank's persist failed") : ps.error();
  if (p.replica() != nullptr) {
    // Every rank holds the version; now its copy goes to the partner, and the
    // version is global once every copy is durable too.
    auto r = p.protect(load_step(p.tree()));
    if (!all_ok(r.ok()))
      return r.ok() ? cairn::make_error(Errc::io_error, "another rank's partner copy failed") : r.error();
  }
  // The rank's leaves, serialized once for the parity and the flush.
  const bool flush = pfs != nullptr && ps.value().version % a.pfs_every == 0;
  auto payload = parity != nullptr || flush ? own_payload(p) : Result<std::vector<std::byte>>(std::vector<std::byte>{});
  if (parity != nullptr) {
    // The same for the group's parity of the version.
    if (auto r = protect_parity(*parity, ps.value().version, payload); !r.ok()) return r.error();
  }
  if (flush) {
    // Global now: its leaves go to the flush directory in the background
    // (a failed flush is reported, and the one before it stays).
    auto f = payload.ok() ? pfs->start(ps.value().version, std::move(payload.value())) : Result<void>(payload.error());
    if (!f.ok()) std::fprintf(stderr, "amr-mpi rank %d: %s\n", rank, f.error().message.c_str());
  }
  seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  blocks += ps.value().blocks_written;
  return ps.value().version;
}

// Sends `leaves` and `step` to rank `to` while receiving from rank `from`
// (either may be -1: nothing that way).
void exchange_leaves(const std::vector<LeafRec>& leaves, std::uint64_t step, int to, std::vector<LeafRec>& got,
                     std::uint64_t& got_step, int from) {
  std::uint64_t head[2] = {leaves.size(), step}, in[2] = {0, 0};
  MPI_Request req[2];
  int n = 0;
  if (to >= 0) MPI_Isend(head, 2, MPI_UINT64_T, to, 21, MPI_COMM_WORLD, &req[n++]);
  if (from >= 0) MPI_Recv(in, 2, MPI_UINT64_T, from, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (to >= 0)
    MPI_Isend(leaves.data(), static_cast<int>(leaves.size() * sizeof(LeafRec)), MPI_BYTE, to, 22, MPI_COMM_WORLD,
              &req[n++]);
  if (from >= 0) {
    got.resize(in[0]);
    got_step = in[1];
    MPI_Recv(got.data(), static_cast<int>(in[0] * sizeof(LeafRec)), MPI_BYTE, from, 22, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
}

// A lost or damaged tree at `path` (set aside as .damaged, never read
// again; replaced when `damaged` is false) rebuilt from `leaves` and
// committed as version `version` at `step`.
Result<std::unique_ptr<Octree>> rebuild(const std::string& path, const Args& a, std::uint64_t version,
                                        const std::vector<LeafRec>& leaves, std::uint64_t step,
                                        const std::function<bool(const Octant&)>& mine, bool damaged = true) {
  std::error_code ec;
  if (damaged && fs::exists(path, ec)) fs::rename(path, path + ".damaged", ec);
  auto t = fresh_tree(path, a, version);
  if (!t.ok()) return t.error();
  auto r = grow(*t.value(), a.level_min, leaves, mine);
  if (r.ok()) r = store_step(*t.value(), step);
  if (!r.ok()) return r.error();
  if (auto ps = t.value()->persist(); !ps.ok()) return ps.error();
  return std::move(t.value());
}

// The restore of --redundancy xor once every surviving tree holds version g:
// in a group with a lost pool (lost[2r]), the survivors' leaves of g and
// their parity segments give the lost member's leaves back; then every
// group writes its parity of g again (the lost node's segment, and slots a
// crash left behind).
Result<std::uint64_t> rebuild_from_parity(Part& p, Parity& parity, const Args& a, int rank, int ranks, std::uint64_t g,
                                          const std::vector<int>& lost) {
  int lost_member = -1;
  for (int m : parity.members())
    if (lost[2 * static_cast<std::size_t>(m)] != 0) lost_member = m;
  // This rank's leaves of g: its tree's, or those the group gives back.
  auto payload = lost_member == rank ? Result<std::vector<std::byte>>(std::vector<std::byte>{}) : own_payload(p);
  Result<void> r = payload.ok() ? Result<void>{} : Result<void>(payload.error());
  if (lost_member >= 0) {
    auto got = parity.rebuild(g, lost_member, payload.ok() ? payload.value() : std::vector<std::byte>{});
    if (r.ok() && !got.ok()) r = got.error();
    if (r.ok() && lost_member == rank) {
      payload = std::move(got);
      std::vector<LeafRec> leaves;
      std::uint64_t step = 0;
      r = read_leaf_payload(payload.value(), step, leaves);
      if (r.ok()) {
        auto t = rebuild(pool_path(a, rank, ranks), a, g, leaves, step, [&](const Octant& q) { return p.owns(q); });
        if (t.ok()) {
          p.set_tree(std::move(t.value()));
          std::printf("amr-mpi rank %d: rebuilt version %" PRIu64 " (%zu leaves) from its group's parity\n", rank, g,
                      leaves.size());
        } else {
          r = t.error();
        }
      }
    }
  }
  if (!all_ok(r.ok()))
    return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild from parity") : r.error();
  if (auto w = protect_parity(parity, g, payload); !w.ok()) return w.error();
  return g;
}

// Restart on the job's own ranks: the version every rank holds. With partner
// copies, a rank whose pool is missing or damaged (a lost node) is rebuilt
// from the copy its partner holds, and the copy it held is sent again by its
// source; with parity, from its group's parity segments, which are then
// written again. Either is committed as the global version before the job
// goes on.
Result<std::uint64_t> restore(Part& p, Parity* parity, const Args& a, int rank, int ranks) {
  const bool partnered = a.redundancy == "partner";
  const std::string path = pool_path(a, rank, ranks);
  const auto v = Octree::versions(path, tree_options(a));
  const auto rv = partnered ? Octree::versions(replica_path(a, rank, ranks), tree_options(a))
                            : cairn::Result<cairn::octree::Versions>(cairn::octree::Versions{});
  const auto pv = parity != nullptr ? parity->held() : cairn::Result<std::array<std::uint64_t, 2>>({0, 0});
  // Who lost what: [2r] its pool, [2r + 1] the copy or parity it holds.
  const int mine[2] = {v.ok() ? 0 : 1, rv.ok() && pv.ok() ? 0 : 1};
  std::vector<int> lost(2 * static_cast<std::size_t>(ranks));
  MPI_Allgather(mine, 2, MPI_INT, lost.data(), 2, MPI_INT, MPI_COMM_WORLD);
  const auto own_lost = [&](int r) { return lost[2 * static_cast<std::size_t>(r)] != 0; };
  const auto copy_lost = [&](int r) { return lost[2 * static_cast<std::size_t>(r) + 1] != 0; };
  for (int r = 0; r < ranks; ++r) {
    if (!own_lost(r) && !copy_lost(r)) continue;
    if (r == rank)
      std::fprintf(stderr, "amr-mpi rank %d: lost %s\n", rank,
                   (!v.ok()    ? v.error().message
                    : !rv.ok() ? replica_path(a, rank, ranks) + ": " + rv.error().message
                               : pv.error().message)
                       .c_str());
    if (!partnered && parity == nullptr) {
      if (!v.ok()) return v.error();
      return cairn::make_error(Errc::not_found, "rank " + std::to_string(r) +
                                                    " lost its pool and redundancy is local (no partner copy or "
                                                    "parity to rebuild it from)");
    }
    if (!own_lost(r)) continue;
    if (partnered && copy_lost(partner_of(a, r, ranks)))
      return cairn::make_error(Errc::not_found, "rank " + std::to_string(r) +
                                                    "'s pool is lost and so is its partner "
                                                    "copy on rank " +
                                                    std::to_string(partner_of(a, r, ranks)) +
                                                    " (two neighbouring nodes lost): nothing to rebuild it from");
    if (parity != nullptr)
      for (int m : parity->members_of(r))
        if (m != r && (own_lost(m) || copy_lost(m)))
          return cairn::make_error(Errc::not_found, "rank " + std::to_string(r) + "'s pool is lost and so is rank " +
                                                        std::to_string(m) + "'s " + (own_lost(m) ? "pool" : "parity") +
                                                        ", in the same parity group: XOR parity rebuilds one lost "
                                                        "node per group (--xor-group)");
  }
  std::uint64_t g = ~0ull;
  if (v.ok()) g = v.value().committed;
  if (partnered && rv.ok()) g = std::min(g, rv.value().committed);
  if (parity != nullptr && pv.ok()) g = std::min(g, std::max(pv.value()[0], pv.value()[1]));
  MPI_Allreduce(MPI_IN_PLACE, &g, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (g == 0)
    return cairn::make_error(Errc::no_version,
                             "the job stopped before its first version was protected everywhere: start it afresh");
  const auto gives = [&](const cairn::Result<cairn::octree::Versions>& x) {
    return !x.ok() || x.value().committed == g || x.value().previous == g;
  };
  const bool own_gives = gives(v),
             copy_gives = (!partnered || gives(rv)) && (parity == nullptr || !pv.ok() || pv.value()[g % 2] == g);
  if (!all_ok(own_gives && copy_gives)) {
    if (own_gives && copy_gives)
      return cairn::make_error(Errc::no_version, "another rank lacks the global version " + std::to_string(g));
    if (own_gives && parity != nullptr)
      return cairn::make_error(Errc::no_version,
                               parity->path() + " holds no parity of the global version " + std::to_string(g));
    const auto& x = own_gives ? rv : v;
    return cairn::make_error(Errc::no_version,
                             (own_gives ? replica_path(a, rank, ranks) : path) + " holds version " +
                                 std::to_string(x.value().committed) +
                                 (x.value().previous != 0 ? " and " + std::to_string(x.value().previous) : "") +
                                 ", not the global version " + std::to_string(g) +
                                 " that another rank stopped at: it cannot go back (was it written with "
                                 "keep_previous?)");
  }
  auto o = tree_options(a);
  o.version = g;
  cairn::Result<void> r;
  if (v.ok()) {
    auto t = Octree::restore(path, o);
    if (t.ok())
      p.set_tree(std::move(t.value()));
    else
      r = t.error();
  }
  if (r.ok() && partnered && rv.ok()) {
    auto t = Octree::restore(replica_path(a, rank, ranks), o);
    if (t.ok())
      p.set_replica(std::move(t.value()));
    else
      r = t.error();
  }
  if (a.crash_in_restore && rank == a.crash_rank) raise(SIGKILL);  // its restore done, the others' maybe not
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to restore") : r.error();
  if (v.ok() && v.value().committed != g)
    std::printf("amr-mpi rank %d: back from version %" PRIu64 " to the global version %" PRIu64 "\n", rank,
                v.value().committed, g);
  if (parity != nullptr) return rebuild_from_parity(p, *parity, a, rank, ranks, g, lost);
  if (!partnered) return g;
  // Lost pools, from the copies their partners hold; then lost copies, from
  // their sources' trees. Each is committed as version g.
  const int source = source_of(a, rank, ranks), partner = partner_of(a, rank, ranks);
  std::vector<LeafRec> got;
  std::uint64_t step = 0;
  auto sent = own_lost(source) ? p.own_leaves(*p.replica(), true) : std::vector<LeafRec>{};
  if (!all_ok(sent.ok())) return sent.ok() ? cairn::make_error(Errc::corrupted, "another rank failed") : sent.error();
  exchange_leaves(sent.value(), p.replica() != nullptr ? load_step(*p.replica()) : 0, own_lost(source) ? source : -1,
                  got, step, own_lost(rank) ? partner : -1);
  if (own_lost(rank)) {
    auto t = rebuild(path, a, g, got, step, [&](const Octant& q) { return p.owns(q); });
    if (t.ok()) {
      p.set_tree(std::move(t.value()));
      std::printf("amr-mpi rank %d: rebuilt version %" PRIu64 " (%zu leaves) from its partner copy on rank %d\n", rank,
                  g, got.size(), partner);
    } else {
      r = t.error();
    }
  }
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  got.clear();
  sent = copy_lost(partner) ? p.own_leaves(p.tree(), false) : std::vector<LeafRec>{};
  if (!all_ok(sent.ok())) return sent.ok() ? cairn::make_error(Errc::corrupted, "another rank failed") : sent.error();
  exchange_leaves(sent.value(), load_step(p.tree()), copy_lost(partner) ? partner : -1, got, step,
                  copy_lost(rank) ? source : -1);
  if (copy_lost(rank)) {
    auto t = rebuild(replica_path(a, rank, ranks), a, g, got, step, [&](const Octant& q) { return p.source_owns(q); });
    if (t.ok())
      p.set_replica(std::move(t.value()));
    else
      r = t.error();
  }
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  return g;
}

// When the pools, copies and parity cannot give a version every rank holds
// (`why`): every rank goes back to the newest version all of them flushed
// to --pfs-dir completely, rebuilt from its leaves there, and protects it
// again (copies and parity written afresh: their slots hold later versions).
Result<std::uint64_t> restore_from_pfs(Part& p, Parity* parity, const PfsFlusher& pfs, const Args& a, int rank,
                                       int ranks, const std::string& why) {
  std::uint64_t mine[2] = {0, 0};
  const auto held = pfs.versions();
  for (std::size_t i = 0; i < 2 && i < held.size(); ++i) mine[i] = held[i];
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(ranks));
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  // The newest version every rank flushed and reads back intact.
  std::uint64_t f = 0;
  std::vector<std::byte> payload;
  Result<void> r;
  for (const std::uint64_t candidate : cairn::dist::detail::flushed_everywhere(all)) {
    payload.clear();
    r = pfs.read(candidate, payload);
    if (!r.ok()) std::fprintf(stderr, "amr-mpi rank %d: %s\n", rank, r.error().message.c_str());
    if (all_ok(r.ok())) {
      f = candidate;
      break;
    }
  }
  if (f == 0)
    return cairn::make_error(Errc::not_found, why + "; and no version in " + a.pfs_dir +
                                                  " was flushed completely and intact by every rank: nothing to "
                                                  "restore");
  std::vector<LeafRec> leaves;
  std::uint64_t step = 0;
  if (r.ok()) r = read_leaf_payload(payload, step, leaves);
  if (r.ok()) {
    auto t = rebuild(
        pool_path(a, rank, ranks), a, f, leaves, step, [&](const Octant& q) { return p.owns(q); }, false);
    if (t.ok())
      p.set_tree(std::move(t.value()));
    else
      r = t.error();
  }
  if (r.ok() && a.redundancy == "partner") r = fresh_replica(p, a, rank, ranks, f);
  if (!all_ok(r.ok()))
    return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to restore its flushed version")
                  : r.error();
  if (rank == 0)
    std::printf("amr-mpi: %s; every rank restored version %" PRIu64 " (step %" PRIu64 ") flushed to %s\n", why.c_str(),
                f, step, a.pfs_dir.c_str());
  if (a.redundancy == "partner") {
    p.resend_all();
    auto c = p.protect(step);
    if (!all_ok(c.ok()))
      return c.ok() ? cairn::make_error(Errc::io_error, "another rank's partner copy failed") : c.error();
  }
  if (parity != nullptr) {
    parity->remove();
    if (auto c = protect_parity(*parity, f, payload); !c.ok()) return c.error();
  }
  return f;
}

// A job's layout on `ranks` ranks: its partition made durable (rank 0), then
// each rank's part with a fresh tree. Collective.
Result<void> new_layout(std::unique_ptr<Part>& part, const Args& a, const Partition& p, int rank, int ranks) {
  const std::string path = job_file(a, ranks, ".partition");
  if (!all_ok(rank != 0 || write_partition(path, p).ok()))
    return cairn::make_error(Errc::io_error, "cannot write " + path);
  part = std::make_unique<Part>(a, p, rank, ranks);
  auto t = fresh_tree(pool_path(a, rank, ranks), a);
  if (!all_ok(t.ok()))
    return t.ok() ? cairn::make_error(Errc::io_error, "another rank cannot create its pool") : t.error();
  part->set_tree(std::move(t.value()));
  return {};
}

// Restart on another number of ranks: the old job's ranks are read (new
// rank i reads old ranks i, i+P, ...) at the version all of them hold, their
// leaves go to their new owners (a new partition by their counts), and the
// new trees are committed before the old job's files are removed.
Result<std::uint64_t> repartition(std::unique_ptr<Part>& part, Parity* parity, PfsFlusher* pfs, const Args& a, int rank,
                                  int ranks) {
  auto old = read_partition(job_file(a, a.from_ranks, ".partition"), a.from_ranks, a.level_min);
  if (!all_ok(old.ok()))
    return old.ok() ? cairn::make_error(Errc::not_found, "the old partition is unreadable") : old.error();
  std::vector<cairn::octree::Versions> held;
  bool ok = true;
  std::string error;
  for (int j = rank; j < a.from_ranks; j += ranks) {
    auto v = Octree::versions(pool_path(a, j, a.from_ranks), tree_options(a));
    if (!v.ok()) {
      ok = false;
      error = "old rank " + std::to_string(j) + ": " + v.error().message;
      break;
    }
    held.push_back(v.value());
  }
  if (!all_ok(ok))
    return cairn::make_error(Errc::not_found, error.empty() ? "another rank cannot read the old job" : error);
  std::uint64_t mine = ~0ull, g = 0;
  for (const auto& h : held) mine = std::min(mine, h.committed);
  MPI_Allreduce(&mine, &g, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  for (const auto& h : held) ok = ok && (h.committed == g || h.previous == g);
  if (!all_ok(ok)) return cairn::make_error(Errc::no_version, "the old job's ranks hold no version all of them have");
  // Their own leaves, and the counts per unit for the new partition.
  const std::uint64_t units = std::uint64_t{1} << (3 * a.level_min);
  std::vector<std::uint64_t> count(units, 0);
  std::vector<LeafRec> leaves;
  std::uint64_t step_min = ~0ull, step_max = 0;
  for (int j = rank; j < a.from_ranks; j += ranks) {
    auto o = tree_options(a);
    o.version = g;
    auto t = Octree::restore(pool_path(a, j, a.from_ranks), o);
    if (!t.ok()) {
      ok = false;
      error = "old rank " + std::to_string(j) + ": " + t.error().message;
      break;
    }
    step_min = std::min(step_min, load_step(*t.value()));
    step_max = std::max(step_max, load_step(*t.value()));
    auto own = Part(a, old.value(), j, a.from_ranks).own_leaves(*t.value(), false);
    if (!own.ok()) {
      ok = false;
      error = "old rank " + std::to_string(j) + ": " + own.error().message;
      break;
    }
    for (const LeafRec& l : own.value()) ++count[unit_of(l.octant(), a.level_min)];
    leaves.insert(leaves.end(), own.value().begin(), own.value().end());
  }
  if (!all_ok(ok))
    return cairn::make_error(Errc::corrupted, error.empty() ? "another rank cannot read the old job" : error);
  MPI_Allreduce(MPI_IN_PLACE, count.data(), static_cast<int>(units), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &step_min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &step_max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (step_min != step_max)
    return cairn::make_error(Errc::corrupted,
                             "the old job's ranks hold different steps at version " + std::to_string(g));
  const Partition fresh = Partition::split(a.level_min, count, ranks);
  // Each leaf to its new owner.
  std::vector<std::vector<LeafRec>> out(static_cast<std::size_t>(ranks));
  for (const LeafRec& l : leaves)
    out[static_cast<std::size_t>(fresh.owner(unit_of(l.octant(), a.level_min)))].push_back(l);
  const std::vector<LeafRec> mine_leaves = to_owners(out);
  if (auto n = new_layout(part, a, fresh, rank, ranks); !n.ok()) return n.error();
  Octree& tree = part->tree();
  auto r = grow(tree, a.level_min, mine_leaves, [&](const Octant& q) { return part->owns(q); });
  if (r.ok()) r = part->refresh_ghosts();
  if (r.ok()) r = store_step(tree, step_min);
  if (r.ok() && a.redundancy == "partner") r = fresh_replica(*part, a, rank, ranks);
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed to rebuild") : r.error();
  double s = 0;
  std::uint64_t b = 0;
  auto v = commit(*part, parity, pfs, a, rank, ~0ull, s, b);
  if (!v.ok()) return v.error();
  // Global in the new layout: the old job's files can go (its partition
  // first, so a restart never reads a half-removed old job).
  if (rank == 0) fs::remove(job_file(a, a.from_ranks, ".partition"));
  MPI_Barrier(MPI_COMM_WORLD);
  for (int j = rank; j < a.from_ranks; j += ranks) {
    fs::remove(pool_path(a, j, a.from_ranks));
    fs::remove(replica_path(a, j, a.from_ranks));
    fs::remove(parity_path(a, j, a.from_ranks));
    if (!a.pfs_dir.empty())
      for (const auto& f : PfsFlusher::files(a.pfs_dir, a.name, j, a.from_ranks)) fs::remove(f);
  }
  if (rank == 0)
    std::printf("amr-mpi: repartitioned step %" PRIu64 " (version %" PRIu64 ") from %d ranks to %d\n", step_min, g,
                a.from_ranks, ranks);
  return v.value();
}

// The initial sphere: units split by the leaves the initial refinement gives
// them (without balance: an estimate), then the mesh amr.cpp builds.
Result<void> initial(std::unique_ptr<Part>& part, const Args& a, int rank, int ranks) {
  const std::uint64_t units = std::uint64_t{1} << (3 * a.level_min);
  std::vector<std::uint64_t> count(units, 0);
  std::function<std::uint64_t(const Octant&)> leaves = [&](const Octant& o) -> std::uint64_t {
    if (o.level >= a.level_min && (o.level == a.size || !amr::model::touches_surface(o))) return 1;
    std::uint64_t n = 0;
    for (int k = 0; k < 8; ++k) n += leaves(cairn::octree::child_of(o, k));
    return n;
  };
  // Each rank counts a share of the units; the sum is the same everywhere.
  for (std::uint64_t u = static_cast<std::uint64_t>(rank); u < units; u += static_cast<std::uint64_t>(ranks)) {
    Octant o{a.level_min, 0, 0, 0};
    const std::uint32_t len = o.length();
    for (int b = 0; b < a.level_min; ++b) {
      const std::uint64_t c = (u >> (3 * b)) & 7;
      o.x += (c & 1) ? len << b : 0;
      o.y += (c & 2) ? len << b : 0;
      o.z += (c & 4) ? len << b : 0;
    }
    count[u] = leaves(o);
  }
  MPI_Allreduce(MPI_IN_PLACE, count.data(), static_cast<int>(units), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (auto n = new_layout(part, a, Partition::split(a.level_min, count, ranks), rank, ranks); !n.ok()) return n.error();
  Octree& tree = part->tree();
  auto r = tree.uniform(a.level_min, nullptr);
  if (r.ok())
    r = tree.refine(
        true, [&](const Octant& q, const std::byte*) { return part->owns(q) && amr::model::touches_surface(q); },
        nullptr, a.size);
  if (!all_ok(r.ok())) return r.ok() ? cairn::make_error(Errc::corrupted, "another rank failed") : r;
  auto b = part->balance(nullptr);
  if (!b.ok()) return b.error();
  r = tree.update_leaves([&](const Octant& q, std::byte* d) {
    if (!part->owns(q)) return false;
    write_c(d, amr::sphere_fraction(q));
    return true;
  });
  if (r.ok()) r = part->refresh_ghosts();  // the ghosts' fractions
  if (r.ok()) r = store_step(tree, 0);
  if (r.ok() && a.redundancy == "partner") r = fresh_replica(*part, a, rank, ranks);
  return r;
}

int run(const Args& a) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (a.level_min < 1 || a.level_min > a.size || a.size > 12)
    return fail(rank, "levels must satisfy 1 <= --level-min <= --size <= 12");
  if ((std::uint64_t{1} << (3 * a.level_min)) < static_cast<std::uint64_t>(ranks))
    return fail(rank, "more ranks than octants at --level-min " + std::to_string(a.level_min));
  if (a.commit == "none" && a.resume) return fail(rank, "--commit none persists nothing to resume from");
  if (a.redundancy != "local" && (a.ranks_per_node < 1 || ranks % a.ranks_per_node != 0 ||
                                  ranks / a.ranks_per_node < 2 || a.commit != "collective"))
    return fail(rank,
                "--redundancy " + a.redundancy +
                    " needs --ranks-per-node K dividing the ranks into at least two nodes, and collective commits");
  if (a.xor_group < 2) return fail(rank, "--xor-group must be at least 2 nodes");
  if (!(a.period > 0) || !(a.cfl > 0 && a.cfl <= 0.5) || a.persist_every == 0)
    return fail(rank, "period > 0, 0 < cfl <= 0.5 and persist-every >= 1 are required");
  std::error_code ec;
  fs::create_directories(a.dir, ec);
  const auto t0 = Clock::now();
  // The amr app's step count and dt (amr.cpp's run).
  const double h_min = 1.0 / static_cast<double>(1u << a.size);
  const std::uint64_t steps = static_cast<std::uint64_t>(std::ceil(a.period / (a.cfl * h_min / 2.0)));
  const double dt = a.period / static_cast<double>(steps);

  std::unique_ptr<Part> part;
  std::unique_ptr<Parity> parity;
  if (a.redundancy == "xor") {
    auto p = Parity::create(a, rank, ranks);
    if (!p.ok()) return fail(rank, p.error().message);
    parity = std::move(p.value());
    if (!a.resume) parity->remove();  // a fresh job: an old job's parity would outrank its versions
  }
  std::unique_ptr<PfsFlusher> pfs;
  if (!a.pfs_dir.empty() && a.commit == "collective") {
    fs::create_directories(a.pfs_dir, ec);
    pfs = std::make_unique<PfsFlusher>(a.pfs_dir, a.name, rank, ranks);
    if (!a.resume)  // a fresh job: an old job's flushed versions would outrank its own
      for (const auto& f : PfsFlusher::files(a.pfs_dir, a.name, rank, ranks)) fs::remove(f, ec);
  }
  double persist_s = 0, restore_ms = 0;
  std::uint64_t blocks = 0, version = 0;
  if (!a.resume) {
    if (auto r = initial(part, a, rank, ranks); !all_ok(r.ok()))
      return fail(rank, r.ok() ? "another rank failed" : r.error().message);
    if (a.commit != "none") {
      auto v = commit(*part, parity.get(), pfs.get(), a, rank, 0, persist_s, blocks);
      if (!v.ok()) return fail(rank, v.error().message);
      version = v.value();
    }
  } else if (a.from_ranks > 0 && a.from_ranks != ranks) {
    auto v = repartition(part, parity.get(), pfs.get(), a, rank, ranks);
    if (!v.ok()) return fail(rank, v.error().message);
    version = v.value();
  } else {
    auto p = read_partition(job_file(a, ranks, ".partition"), ranks, a.level_min);
    if (!all_ok(p.ok())) return fail(rank, p.ok() ? "another rank cannot read the partition" : p.error().message);
    part = std::make_unique<Part>(a, p.value(), rank, ranks);
    auto v = restore(*part, parity.get(), a, rank, ranks);
    if (!v.ok() && pfs) v = restore_from_pfs(*part, parity.get(), *pfs, a, rank, ranks, v.error().message);
    if (!v.ok()) return fail(rank, v.error().message);
    version = v.value();
    // The restored ghost leaves are current; which ones they are is not persisted.
    if (auto r = part->refresh_ghosts(); !all_ok(r.ok()))
      return fail(rank, r.ok() ? "another rank failed" : r.error().message);
  }
  if (a.resume) restore_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  // The heartbeat `cairn launch` watches, as a dist::Context writes it:
  // after restore and after each global commit.
  cairn::dist::detail::HeartbeatWriter heartbeat(rank);
  const std::uint64_t restored = a.resume ? version : 0;
  heartbeat.beat(version, restored);
  Octree& tree = part->tree();
  const std::uint64_t first = load_step(tree);
  amr::Config cfg;
  cfg.pool = pool_path(a, rank, ranks);
  cfg.step_limit = a.step_limit;
  const auto last = amr::model::last_step(cfg, first, steps);
  if (!last.ok()) return fail(rank, last.error().message);
  int rounds = 0;
  const auto loop0 = Clock::now();
  for (std::uint64_t s = first; s < last.value(); ++s) {
    // Not in the first step of a resumed run: a relaunch with the same
    // switches (cairn launch) resumes there and must get past it.
    const bool fault_here = rank == a.crash_rank && !(a.resume && s == first);
    if (fault_here && a.crash_at >= 0 && static_cast<std::uint64_t>(a.crash_at) == s) raise(SIGKILL);
    if (fault_here && a.stop_at >= 0 && static_cast<std::uint64_t>(a.stop_at) == s) raise(SIGSTOP);  // hangs
    auto r = part->transport(static_cast<double>(s) * dt, dt);
    if (r.ok()) r = part->adapt();
    if (!all_ok(r.ok())) return fail(rank, r.ok() ? "another rank failed" : r.error().message);
    auto b = part->balance(amr::model::inherit);
    if (!b.ok()) return fail(rank, b.error().message);
    rounds += b.value();
    if (auto w = store_step(tree, s + 1); !w.ok()) return fail(rank, w.error().message);
    if (a.commit != "none" && ((s + 1) % a.persist_every == 0 || s + 1 == last.value())) {
      auto v = commit(*part, parity.get(), pfs.get(), a, rank, s + 1, persist_s, blocks);
      if (!v.ok()) return fail(rank, v.error().message);
      version = v.value();
      heartbeat.beat(version, restored);
    }
  }

  double loop_s = std::chrono::duration<double>(Clock::now() - loop0).count();

  // The checksum, volume and shape error of the whole mesh, chained through
  // the ranks in Morton order: the same sums, in the same order, as one process.
  struct Chain {
    std::uint64_t h, leaves;
    double volume, shape;
  } chain{amr::model::Checksum{}.h, 0, 0, 0};
  if (rank > 0) MPI_Recv(&chain, sizeof chain, MPI_BYTE, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  amr::model::Checksum sum;
  sum.h = chain.h;
  std::uint64_t own = 0;
  auto v = tree.visit_leaves([&](const Octant& o, const std::byte* d) {
    if (!part->owns(o)) return;
    const double c = read_c(d);
    chain.volume += c * amr::model::volume(o);
    chain.shape += std::fabs(c - amr::sphere_fraction(o)) * amr::model::volume(o);
    sum.add(o, c);
    ++own;
  });
  if (!v.ok()) return fail(rank, v.error().message);
  chain.h = sum.h;
  chain.leaves += own;
  if (rank + 1 < ranks) MPI_Send(&chain, sizeof chain, MPI_BYTE, rank + 1, 7, MPI_COMM_WORLD);
  std::uint64_t own_min = own, own_max = own, ghosts = part->ghosts();
  MPI_Allreduce(MPI_IN_PLACE, &own_min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &own_max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &ghosts, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &persist_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &loop_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &blocks, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::uint64_t partner[3] = {part->bytes_sent(), part->units_sent(), part->units_owned()};
  MPI_Allreduce(MPI_IN_PLACE, partner, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::uint64_t xored[2] = {parity ? parity->bytes_sent() : 0, parity ? parity->bytes_stored() : 0};
  MPI_Allreduce(MPI_IN_PLACE, xored, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank + 1 == ranks) {
    const double volume0 = amr::model::reference_volume(a.size);
    const double rel = std::fabs(chain.volume - volume0) / volume0;
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!a.quiet)
      std::printf("amr-mpi: %d ranks, levels %d-%d, %" PRIu64 " steps of %.6g from step %" PRIu64 " (version %" PRIu64
                  "), %" PRIu64 " leaves (%" PRIu64 "-%" PRIu64 " per rank, %" PRIu64
                  " ghosts), %d balance rounds; persist %.3f s of %.3f s, %" PRIu64 " blocks written%s\n",
                  ranks, a.level_min, a.size, steps, dt, first, version, chain.leaves, own_min, own_max, ghosts, rounds,
                  persist_s, seconds, blocks,
                  a.resume ? (", restored in " + std::to_string(restore_ms) + " ms").c_str() : "");
    if (part->replica() != nullptr && partner[2] > 0)
      std::printf("amr-mpi: partner copies: %" PRIu64 " bytes sent in all, %" PRIu64 " of %" PRIu64
                  " units sent (%.1f %%: only the units that changed since the partner's copy)\n",
                  partner[0], partner[1], partner[2],
                  100.0 * static_cast<double>(partner[1]) / static_cast<double>(partner[2]));
    if (parity)
      std::printf("amr-mpi: XOR parity: %" PRIu64 " bytes sent and %" PRIu64
                  " bytes stored in all (groups of %zu nodes)\n",
                  xored[0], xored[1], parity->members().size());
    std::printf("amr-mpi: loop %.6f s for %" PRIu64 " steps, commit %.6f s (slowest rank), commit mode %s\n", loop_s,
                last.value() - first, persist_s, a.commit.c_str());
    std::printf(
        "amr: volume %.12g (initial %.12g, relative change %.2e), shape error at T %.6e, checksum %016llx: %s\n",
        chain.volume, volume0, rel, chain.shape, static_cast<unsigned long long>(chain.h),
        rel < 1e-10 ? "VERIFIED" : "NOT VERIFIED (volume not conserved)");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Args a;
  CLI::App cli{"amr-mpi: the amr app's adaptive interface on a PM-octree partitioned across MPI ranks"};
  cli.add_option("--size", a.size, "finest level (the interface's), as amr --size")->check(CLI::Range(1, 12));
  cli.add_option("--level-min", a.level_min, "coarsest level; its octants are the partition's units");
  cli.add_option("--period", a.period, "T: the flow reverses at T/2");
  cli.add_option("--cfl", a.cfl, "dt = cfl * h_min / max|u|");
  cli.add_option("--persist-every", a.persist_every, "steps between collective commits");
  cli.add_option("--steps", a.step_limit, "stop after this step (0: all)");
  cli.add_option("--dir", a.dir, "directory of the ranks' pools and the partition")->required();
  cli.add_option("--name", a.name, "base name of the job's files");
  cli.add_option("--pool-size", a.pool_size, "bytes of each rank's pool");
  cli.add_option("--crash-at", a.crash_at, "SIGKILL --crash-rank at the start of this step");
  cli.add_option("--stop-at", a.stop_at, "SIGSTOP --crash-rank at the start of this step (a hung rank)");
  cli.add_option("--crash-in-commit", a.crash_in_commit,
                 "SIGKILL --crash-rank during the commit of this step, before its own persist");
  cli.add_option("--redundancy", a.redundancy,
                 "local (default) | partner: a copy of each rank's leaves on the next node | xor: XOR parity over "
                 "groups of nodes")
      ->check(CLI::IsMember({"local", "partner", "xor"}));
  cli.add_option("--xor-group", a.xor_group, "--redundancy xor: nodes per parity group (one lost node each)");
  cli.add_option("--pfs-dir", a.pfs_dir,
                 "flush every --pfs-every-th global version here in the background (the parallel file system); "
                 "--resume falls back to it when a lost rank cannot be rebuilt otherwise");
  cli.add_option("--pfs-every", a.pfs_every, "versions between flushes to --pfs-dir (default 10)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--ranks-per-node", a.ranks_per_node, "simulated nodes of this many ranks, each in <dir>/node<k>");
  cli.add_flag("--crash-in-restore", a.crash_in_restore,
               "--resume: SIGKILL --crash-rank right after its own restore, before the others agree");
  cli.add_option("--crash-rank", a.crash_rank, "the rank --crash-at and --crash-in-commit kill (default 0)");
  cli.add_flag("--resume", a.resume, "continue from the version every rank holds");
  cli.add_option("--from-ranks", a.from_ranks, "--resume: the old job ran on this many ranks (repartition)");
  cli.add_flag("--quiet", a.quiet, "only the verification line");
  cli.add_option("--commit", a.commit,
                 "collective (default) | local: each rank persists, no agreement | none: nothing persisted")
      ->check(CLI::IsMember({"collective", "local", "none"}));
  int code = 0;
  try {
    cli.parse(argc, argv);
    code = run(a);
  } catch (const CLI::ParseError& e) {
    code = cli.exit(e) == 0 ? 0 : 2;
  }
  if (code != 0) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
  return code;
}
