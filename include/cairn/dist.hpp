// cairn/dist.hpp — many MPI ranks, one version: every rank persists its own
// state with any persist strategy, a collective commit makes version V global,
// and after any failure every rank restores the same global version.
//
//   MPI_Init(&argc, &argv);
//   auto ctx = cairn::dist::Context::create(MPI_COMM_WORLD, {.persist = {.strategy = "in-place"}}).value();
//   auto* u = ctx->dual_region("u", bytes).value();
//   ctx->open().value();                                   // collective
//   auto g = ctx->restore();                               // collective: the global version, or no_version
//   if (!g.ok()) init(u->read<double>());                  // fresh start
//   for (;;) {
//     ctx->begin().value();
//     step(u->read<double>(), u->write<double>());         // write every element of write()
//     ctx->commit().value();                               // collective: global once it returns
//   }
//
// Design. The persist strategies restore exactly one version, the newest
// their commit point names; none of them can be asked for the one before it
// (the two-slot strategies hold it in their other slot until their next
// commit, but the interface does not expose it, undo-log discards it with its
// log, and in-place hands that slot to the application as its next write()).
// A rank that has committed V while another died before committing V must
// still give V-1, so dist keeps the previous version itself, without a copy:
// each rank owns two persist::Contexts, lane a and lane b, each with its own
// storage (<dir>/<name>.n<P>.r<rank>.{a,b}*), and version V is committed into
// lane V % 2. Each lane also holds a small region "cairn.dist" written inside
// the same commit: magic, rank, rank count and the global version number V,
// so a lane's number is as durable as its data and torn from it never.
//
// Collective commit of V (every rank):
//   1. lane V % 2: begin, write the header {V}, commit — rank-local commit
//      point (one aligned 8-byte store, as every strategy's);
//   2. MPI_Allreduce(MIN) of "my commit succeeded".
// V is global at the instant the LAST rank's local commit point of V is
// durable: no extra durable write, the all-reduce only tells every rank that
// this has happened. Only after it returns does the application compute V+1,
// which is written into lane (V+1) % 2 = the lane that held V-1.
//
// Invariants:
//   I1  While any rank computes or commits V+1, every rank holds V durably in
//       lane V % 2 (V+1 starts only after the all-reduce of V).
//   I2  Hence at any moment, with G the newest version every rank holds, each
//       rank's newest lane version is G or G+1, and every rank holds G in
//       lane G % 2: lane G % 2 is written again only for G+2, which needs the
//       all-reduce of G+1, i.e. every rank holding G+1.
//   I3  Restore: each rank reads both lanes' headers, G = MIN over ranks of
//       (MAX of its two lane versions), then every rank selects lane G % 2.
//       By I2 that lane holds exactly G on every rank: the same global
//       version on every rank, bit for bit, never a mix. G is the version
//       whose commit returned on some rank, or the one in flight if every
//       rank's local commit point was reached (DESIGN.md's "nothing lost").
//   I4  Two versions per rank and no more: lane V % 2 holds V and the other
//       lane V-1 (or an attempt at V+1 that did not become global); the
//       storage is the strategy's own two-slot storage per lane, so a rank
//       needs twice a single Context's storage, and no extra copy per commit
//       for dual regions.
// Costs. A commit costs one local commit plus an 8-byte all-reduce. A restart
// restores both lanes to read their headers (O(1) for in-place and shadow;
// two state copies for dram-cache, nt-copy and file). undo-log is refused:
// libpmemobj allows one open transaction per thread, and it keeps one open
// from commit to commit in each of the two lanes. Dual regions cost nothing
// extra (their read() is one lane's committed version, their write() the
// other lane's working buffer). Plain regions cost one copy per
// iteration (begin() carries the newest version into the lane being
// written): keep large arrays in dual regions.
//
// Redundancy (ARCHITECTURE.md has the table of what each level survives).
// Nodes are simulated (Options::ranks_per_node: node k keeps its ranks'
// storage and the copies it holds in <dir>/node<k>) or real. With partner
// or xor, a commit is: local commit, agreement, copy or parity of V written
// durably on its holders (pool files with two slots, slot V % 2 holding V),
// agreement; so I1-I4 hold for copies and parity too. restore() rebuilds a
// rank whose storage is missing or damaged from its partner copy or its
// group's parity, writes the lost copies again, and falls back to the
// versions flushed to Options::pfs_dir when that is impossible.
//
// Heartbeat (seed 001 §3.3). When $CAIRN_HEARTBEAT_DIR is set (`cairn
// launch` sets it), every rank writes {version, pid, version restored,
// nanoseconds since its beat before} to heartbeat.<rank> there after restore
// and each commit; the launcher
// declares the job's ranks dead when a file has not changed for T_timeout,
// ends the job and relaunches it.
//
// Caveats. Every rank must call the collective functions (open, restore,
// commit) in the same order. A rank that dies makes the others block in the
// all-reduce until the launcher (mpirun, `cairn launch`) ends the job: this
// Open MPI (4.1.4, Debian) has no ULFM (no MPIX_Comm_revoke/shrink; ompi_info
// "FT Checkpoint support: no"), so recovery is a relaunch at the global
// version, or supervise() restarts the dead compute process in place. Built
// against an MPI with ULFM (Open MPI 5, the ulfm preset), a job started with
// spare ranks (Options::spares) recovers inside the running job instead:
// Context::recover(). A
// fresh job must start on empty storage (Context::remove_storage for its
// rank): an old job's lanes would outrank its versions. Pointers
// inside regions (persist's register_pointer) are not supported: a plain
// region's address alternates between lanes.
#pragma once

#include <mpi.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/persist.hpp"

namespace cairn::dist {

class RankStore;
namespace detail {
struct Topology;
class SlotFile;
class PfsFlusher;
class HeartbeatWriter;
class Watchdog;
}  // namespace detail

// A region with two versions: read() is the newest global version, write() is
// where the iteration being computed writes (every element of it). Fetch the
// pointers every iteration: they alternate between the lanes.
class DualRegion {
 public:
  const std::string& name() const { return name_; }
  std::size_t bytes() const { return bytes_; }
  void* read() const;
  void* write() const;
  template <class T>
  T* read() const {
    return static_cast<T*>(read());
  }
  template <class T>
  T* write() const {
    return static_cast<T*>(write());
  }

 private:
  friend class RankStore;
  std::string name_;
  std::size_t bytes_ = 0;
  const RankStore* owner_ = nullptr;
  persist::DualRegion* lane_[2] = {nullptr, nullptr};
};

// A region with one working copy, updated in place. Outside an iteration
// data() is the newest version (in a fresh run: where initial values go);
// begin() copies it into the lane being written and data() then points
// there: fetch data() after begin(). Costs a copy per iteration.
class Region {
 public:
  const std::string& name() const { return name_; }
  std::size_t bytes() const { return bytes_; }
  void* data() const;
  template <class T>
  T* as() const {
    return static_cast<T*>(data());
  }

 private:
  friend class RankStore;
  std::string name_;
  std::size_t bytes_ = 0;
  const RankStore* owner_ = nullptr;
  persist::Region* lane_[2] = {nullptr, nullptr};
};

// One rank's two lanes, without MPI: what Context runs on, and what a job
// restarted on another number of ranks uses to read the ranks of the old one
// (scan, select, then read()).
class RankStore {
 public:
  // Storage: <dir>/<base.name>.n<nranks>.r<rank>.a and .b (strategy's suffixes).
  static Result<std::unique_ptr<RankStore>> create(const persist::Options& base, int rank, int nranks);
  ~RankStore();
  RankStore(const RankStore&) = delete;
  RankStore& operator=(const RankStore&) = delete;

  Result<DualRegion*> dual_region(const std::string& name, std::size_t bytes);
  Result<Region*> region(const std::string& name, std::size_t bytes);
  Result<void> open();

  // Restores both lanes and returns the global version each holds (0: none).
  // A lane written by another rank or rank count is Errc::corrupted.
  Result<std::array<std::uint64_t, 2>> scan();
  // After scan(): makes `version` (held by one lane) the current one.
  Result<void> select(std::uint64_t version);
  // Fresh storage continues the numbering after `version` (repartitioning:
  // adopt(G - 1), fill write(), commit G).
  void adopt(std::uint64_t version);

  // The committed bytes of version `version` (held by one lane) as the
  // rank's payload: every region in registration order, each padded with
  // zeros to whole kBlock blocks (the unit of partner deltas and parity).
  static constexpr std::size_t kBlock = 64 << 10;
  std::size_t payload_bytes() const;
  // Calls fn(offset, data, bytes) for each region of the lane holding
  // `version`, at its offset in the payload.
  void for_each_region(std::uint64_t version,
                       const std::function<void(std::size_t, const std::byte*, std::size_t)>& fn) const;
  // Makes `version` the current version with the given payload, whatever
  // the lanes held: the other lane is voided first, then the payload is
  // committed into lane version % 2 (rebuilding a lost rank, rolling back
  // to a flushed version). Not collective.
  Result<void> rewrite(std::uint64_t version, const std::byte* payload);
  // Moves both lanes' files aside into <dir>/damaged and starts over on empty
  // storage (regions registered again): for a rank whose storage cannot be
  // opened, when its state can be rebuilt from elsewhere.
  Result<void> set_aside(const std::string& why);

  // Starts iteration version()+1 (lane begin, plain regions carried over).
  Result<void> begin();
  // Rank-local commit of version()+1 into its lane; not yet global: the
  // caller agrees, then advance() (or, after a failed agreement, retry()).
  Result<std::uint64_t> commit_local();
  void advance();
  void retry();

  // The current (newest global) version; 0 before the first.
  std::uint64_t version() const { return version_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // The global version each lane holds (after scan() and commits).
  const std::array<std::uint64_t, 2>& held() const { return held_; }
  const persist::Context& lane(int i) const { return *lane_[i]; }
  // Whether the rank's storage existed when the store was created (false:
  // created now, as after a node loss, or set aside since as damaged).
  bool found_storage() const { return found_storage_; }
  // The storage of rank `rank` of an `nranks` job (both lanes); never call
  // it on a store that is open.
  static Result<std::vector<std::string>> remove_storage(const persist::Options& base, int rank, int nranks);

 private:
  friend class DualRegion;
  friend class Region;
  RankStore() = default;
  Result<void> create_lanes();
  Result<void> register_in_lanes(std::size_t index);
  // The "cairn.dist" header of `lane`'s working version (version 0: void).
  void write_header(std::size_t lane, std::uint64_t version);
  struct Registration {
    std::string name;
    std::size_t bytes;
    bool dual;
    std::size_t object;  // index in duals_ or plains_
  };
  persist::Options base_;
  std::vector<Registration> registrations_;
  int rank_ = 0, nranks_ = 1;
  std::unique_ptr<persist::Context> lane_[2];
  persist::Region* header_[2] = {nullptr, nullptr};
  std::vector<std::unique_ptr<DualRegion>> duals_;
  std::vector<std::unique_ptr<Region>> plains_;
  std::array<std::uint64_t, 2> held_{0, 0};  // what each lane holds (scan, commits)
  std::uint64_t version_ = 0;
  bool in_iteration_ = false;
  bool found_storage_ = false;
};

// What survives the loss of a rank's storage (section "Redundancy" above).
enum class Redundancy {
  local,       // the rank's own two lanes only: a lost node loses the job's state (unless pfs_dir)
  partner,     // plus a copy of each rank's global version on the next node
  xor_parity,  // plus XOR parity over a group of nodes (one lost node per group)
};
const char* to_string(Redundancy r);
Result<Redundancy> parse_redundancy(const std::string& s);  // "local" | "partner" | "xor"

struct Options {
  // Strategy, directory (one per rank or shared: names carry the rank),
  // device, threads. name is the job's base name. "{numa}" in the directory
  // stands for the NUMA node the rank runs on ($CAIRN_NUMA_NODE overrides):
  // "/mnt/pmem{numa}/job" keeps each rank's pools on its own socket's NVM.
  // A rank relaunched on another socket finds its files where they are.
  // (Pools on tmpfs need no token: Linux places a page on the node of the
  // CPU that first touches it, the rank's own.)
  persist::Options persist;
  Redundancy redundancy = Redundancy::local;
  // Nodes. > 0: simulated nodes of this many consecutive ranks, node k
  // keeping its ranks' storage and the copies it holds for other nodes in
  // <persist.dir>/node<k> (losing a node = killing its ranks and deleting
  // that directory). 0: $CAIRN_RANKS_PER_NODE if set, else the machine's
  // real nodes (MPI_COMM_TYPE_SHARED), storage in persist.dir on each.
  int ranks_per_node = 0;
  // Nodes per XOR parity group (at least 2; a short last group joins the one
  // before it). Survives one lost node per group.
  int xor_group = 4;
  // Asynchronous flush of every pfs_every-th global version to pfs_dir (a
  // directory standing for the parallel file system, shared by all ranks),
  // by a thread of each rank. A rank keeps every version of its own from the
  // one before the newest version complete on every rank (read from the
  // directory after each flush): a rank whose flushes lag makes the others
  // keep more, never leaves the ranks without a common version. Restore
  // falls back to it when a lost rank cannot be rebuilt otherwise, to the
  // newest version complete and intact on every rank.
  std::string pfs_dir;
  std::uint64_t pfs_every = 0;
  // Fault injection for tests: a rank where this returns true does not
  // flush `version` (a rank whose flushes lag behind the others').
  std::function<bool(std::uint64_t version)> skip_flush;
  // Fault injection for tests: called on the committing rank right after its
  // local commit point of `version`, before the agreement (and `before`
  // right before the local commit).
  std::function<void(std::uint64_t version)> after_local_commit;
  std::function<void(std::uint64_t version)> before_local_commit;
  // Called on every rank during restore(): "rebuilt" once the lost ranks
  // hold the global version again, "protected" once their copies or parity
  // were written again (fault injection during recovery).
  std::function<void(const std::string& stage)> restore_stage;
  // In-job recovery (ULFM builds only, see ulfm_available()): the last
  // `spares` ranks of the communicator given to create() do not compute;
  // they wait in create() until a rank of the job dies, and then one of them
  // takes its place (Context::recover()). 0: no spares, no in-job recovery.
  int spares = 0;
  // With spares: a rank whose process has not run for this many seconds
  // (SIGSTOPped, hung in the kernel) is declared dead and SIGKILLed, and
  // recovered like a dead one (ULFM does not notice a stopped process). Each
  // rank's watchdog thread stamps <persist.dir>/alive.<rank> every quarter of
  // it; the lowest rank still stamping kills the others that stopped. Ranks
  // on one machine only (simulated nodes); 0: off.
  double hang_timeout = 0;
};

// Whether the MPI this library was built against offers ULFM (MPIX_Comm_revoke,
// MPIX_Comm_shrink, MPIX_Comm_agree): in-job recovery onto spare ranks. Open
// MPI 5 built with it (the ulfm build preset) does; Open MPI 4.1 does not.
bool ulfm_available();

struct Stats {
  std::uint64_t commits = 0;
  double local_commit_seconds = 0;          // total, lane begin + header + commit
  double redundancy_seconds = 0;            // total, partner copy or parity, durable on the holder
  double agree_seconds = 0;                 // total, the all-reduce
  double restore_seconds = 0;               // scan + agreement + rebuild + select
  std::uint64_t redundancy_bytes_sent = 0;  // total, partner copies (changed blocks) or parity contributions
  std::uint64_t redundancy_blocks_sent = 0,
                redundancy_blocks = 0;  // partner: changed / all blocks, summed over commits
  std::uint64_t pfs_flushes = 0;
  double pfs_copy_seconds = 0;  // total time the application waited for flushes (snapshot copy + previous flush)
  // restore(): how this rank got the global version.
  std::string restored_from;        // "local", "partner", "xor", "pfs"
  std::uint64_t rebuilt_ranks = 0;  // ranks whose state was rebuilt in the last restore
  // recover(): how many, and the last one's time from its call to its restore's end.
  std::uint64_t recoveries = 0;
  double recover_seconds = 0;
};

// The collective view: one RankStore per rank, agreed through `comm`.
class Context {
 public:
  static Result<std::unique_ptr<Context>> create(MPI_Comm comm, Options options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Result<DualRegion*> dual_region(const std::string& name, std::size_t bytes) {
    return store_->dual_region(name, bytes);
  }
  Result<Region*> region(const std::string& name, std::size_t bytes) { return store_->region(name, bytes); }
  // Collective. Fails on every rank if it fails on one.
  Result<void> open();
  // Collective: every rank restores the same global version G and returns it;
  // Errc::no_version on every rank if no version is global (fresh start). A
  // rank that lacks G (storage lost or corrupted) fails on every rank with a
  // message naming it.
  Result<std::uint64_t> restore();
  void adopt(std::uint64_t version) { store_->adopt(version); }
  Result<void> begin() { return store_->begin(); }
  // Collective: local commit, then agreement; returns the new global version.
  // If any rank's local commit fails, it fails on every rank and the global
  // version stays where it was (the iteration may be recomputed and retried).
  Result<std::uint64_t> commit();

  std::uint64_t version() const { return store_->version(); }
  int rank() const { return store_->rank(); }
  int size() const { return store_->nranks(); }
  MPI_Comm comm() const { return comm_; }
  const Stats& stats() const { return stats_; }
  RankStore& store() { return *store_; }
  // Communication of the application that also works in a supervised
  // compute process (supervise()), where the rank process performs it:
  // MPI_Sendrecv of bytes with ranks of the job's communicator (MPI_PROC_NULL
  // allowed), in the iteration being computed (after begin()); a compute
  // process that replaces a dead one and recomputes that iteration gets the
  // same answers again, its sends not repeated. And an all-gather of n
  // 64-bit words from every rank (collective).
  void sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv, std::size_t recv_bytes, int source);
  void allgather(const std::uint64_t* mine, int n, std::uint64_t* all);
  // In a supervised compute process (supervise()): true when it replaces one
  // that died, and restore() then gives the version the job agreed on last.
  bool restarted() const { return restarted_; }
  // The directory of this rank's storage (its node's, when nodes are simulated).
  const std::string& storage_dir() const { return options_.persist.dir; }

  // In-job recovery (Options::spares > 0, ULFM builds). A rank that dies
  // makes the survivors' MPI operations through this Context fail: commit()
  // and restore() return an error, sendrecv() and allgather() return at
  // once, and failed() becomes true. Every survivor then calls recover()
  // (collective over the survivors): they revoke the job's communicators,
  // shrink them, agree on the failed set (MPIX_Comm_agree), and a spare
  // takes each dead rank's number, so the job keeps its size and its
  // decomposition; then every rank restores the global version (the
  // replacement from the dead rank's lanes when its node's storage is
  // there, else from its partner copy or parity, else the flushed versions)
  // and recover() returns it: the application continues from there, inside
  // the same mpirun. Errc::unsupported without spares or ULFM; another error
  // when no spare is left (the job must then end, and `cairn launch`
  // relaunches it).
  bool failed() const { return failed_; }
  Result<std::uint64_t> recover();
  // A spare's create() returns when the job needs it or ends. released():
  // it ended without needing this spare; the application calls nothing of
  // this Context and finalizes MPI. joined(): this rank replaces a dead one
  // (rank() is its number): the application registers its regions, open()
  // and restore() as at a resume, and these join the survivors' recover().
  bool released() const { return released_; }
  bool joined() const { return joined_; }

  // Removes everything a job stored for rank `rank` of `nranks`: its lanes,
  // the partner copy and parity it holds, its flushed versions. Not
  // collective; never on a rank whose Context is open. A fresh job calls it
  // first (an old job's versions would outrank its own).
  static Result<std::vector<std::string>> remove_storage(const Options& options, int rank, int nranks);

 private:
  Context();
  // The options on this node: the rank's node directory (created; "{numa}"
  // in it resolved, see Options::persist) and the flush interval's default.
  // Then the Context of one rank around its lanes, without MPI (create()
  // adds the communicators; a supervised compute process has none).
  static Result<Options> place(Options options, const detail::Topology& t);
  static Result<std::unique_ptr<Context>> assemble(const detail::Topology& t, Options options);
  void beat();
  bool protected_() const;
  Result<void> open_replicas();
  // Partner copy or parity of `version` (held by a lane) on the holders, of
  // every rank (full: whole copies, not the changed blocks).
  Result<void> protect(std::uint64_t version, bool full);
  // send/recv: whether this rank sends its copy to its partner and receives
  // its source's.
  Result<void> protect_partner(std::uint64_t version, bool full, bool send, bool recv);
  Result<void> protect_parity(std::uint64_t version);
  // Bytes of chunk c of the padded payload of `version`.
  void copy_chunk(std::uint64_t version, std::size_t c, std::byte* out) const;
  // Reduce-scatter with XOR over the parity group: `result` gets this
  // member's segment of `version` (contributes = false: zeros from here).
  void xor_ring(std::uint64_t version, bool contributes, std::byte* result);
  // Restore paths beyond the local lanes.
  Result<std::uint64_t> restore_from_pfs(const std::string& why);
  Result<std::uint64_t> restore_in_place(std::chrono::steady_clock::time_point t0);
  // The collectives of the local level, through MPI or, in a supervised
  // compute process, through its supervisor (the rank process).
  int reduce_min(int value, std::uint64_t commit_version);
  Result<void> agree(const Result<void>& local, const std::string& what, std::uint64_t commit_version = 0);
  void tell_supervisor_started();
  friend int supervise(MPI_Comm, Options, const std::function<int(Context&)>&, int);
  // In-job recovery: one failed operation marks the Context failed and
  // revokes its communicators; the helpers below run one MPI call so.
  bool check(int rc);
  Result<void> attach(MPI_Comm work);  // after a shrink: the job's communicators again
  static Result<std::unique_ptr<Context>> build(MPI_Comm work, Options options);
  static Result<std::unique_ptr<Context>> wait_as_spare(MPI_Comm world, std::vector<int> slot_of, Options options);
  static constexpr int kReleaseTag = 4711;
  bool failed_ = false, released_ = false, joined_ = false;
  MPI_Comm world_ = MPI_COMM_NULL;  // spares: the job and its spares
  std::vector<int> slot_of_;        // spares: the rank in the job of each rank of world_ (-1: spare)
  int supervisor_fd_ = -1;
  bool restarted_ = false, started_sent_ = false;
  std::uint64_t restart_version_ = 0;
  std::uint64_t exchange_iteration_ = 0, exchange_seq_ = 0;  // the place of sendrecvs and all-gathers, for replays
  std::uint64_t next_exchange(std::uint64_t iteration);
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm group_ = MPI_COMM_NULL;  // xor: my parity group
  std::unique_ptr<detail::Topology> topo_;
  std::unique_ptr<detail::SlotFile> copy_;    // partner: the copy of my source's versions
  std::unique_ptr<detail::SlotFile> parity_;  // xor: my parity segment
  std::unique_ptr<detail::PfsFlusher> pfs_;
  std::vector<std::uint64_t> sent_[2];  // partner: block hashes last sent into each of the holder's slots
  std::size_t chunk_ = 0;               // xor: bytes per chunk (a parity segment)
  std::vector<std::byte> scratch_;
  std::unique_ptr<detail::HeartbeatWriter> heartbeat_;
  std::unique_ptr<detail::Watchdog> watchdog_;  // Options::hang_timeout
  std::uint64_t restored_ = 0;                  // the version restore() selected, for the heartbeat
  Options options_;
  std::unique_ptr<RankStore> store_;
  Stats stats_;
};

// In-process restart (seed 001 §3.3, without ULFM). Runs compute(ctx) in a
// child process of the calling rank, the compute process; the rank process
// stays behind as its supervisor and performs the collectives of ctx on its
// behalf (the compute process never calls MPI: the application's own
// communication goes through ctx.sendrecv and ctx.allgather, which the rank
// process relays, replaying the current iteration's exchanges to a
// replacement). When the compute process dies (SIGKILL,
// SIGSEGV, SIGBUS...) after its first restore or commit, the supervisor
// forks a new one at once, up to max_restarts times: its restore() selects
// the version the job agreed on last, which its lanes hold, it recomputes
// from there, and its next commit joins the agreement the other ranks are
// waiting in. They see one slow commit, no failure. A death earlier, or one
// too many, ends the job (MPI_Abort) for the launcher to relaunch.
// Collective: every rank calls it. Only the local level (and pfs_dir): the
// partner copies and parity exchange data the supervisor does not relay.
// Returns compute's exit code. Reports each restart on standard error and as
// "restarted rank=R version=G restart_ms=T" on standard output.
int supervise(MPI_Comm comm, Options options, const std::function<int(Context&)>& compute, int max_restarts = 3);

// MIN of a flag over comm: true when every rank passes true.
bool all_ok(MPI_Comm comm, bool ok);

}  // namespace cairn::dist
