// dist_switches.hpp — the redundancy switches every MPI program of this tree
// takes (jacobi-mpi, npb-cg-mpi, dist_worker), mapped onto dist::Options.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cairn/dist.hpp"

namespace cairn::apps {

struct DistSwitches {
  std::string redundancy = "local", pfs_dir;
  int ranks_per_node = 0, xor_group = 4;
  std::uint64_t pfs_every = 0;

  void add_to(CLI::App& cli) {
    cli.add_option("--redundancy", redundancy, "local | partner | xor (copies or parity on other nodes)")
        ->check(CLI::IsMember({"local", "partner", "xor"}));
    cli.add_option("--ranks-per-node", ranks_per_node, "simulated nodes of this many ranks, each in <dir>/node<k>");
    cli.add_option("--xor-group", xor_group, "nodes per parity group (default 4)");
    cli.add_option("--pfs-dir", pfs_dir, "flush every --pfs-every versions to this directory, asynchronously");
    cli.add_option("--pfs-every", pfs_every, "versions between flushes (default 10 with --pfs-dir)");
  }
  // The programs' dist::Options: one persistence thread per rank, and the
  // switches above.
  dist::Options options(const std::string& strategy, const std::string& dir, const std::string& name) const {
    dist::Options o;
    o.persist.strategy = strategy;
    o.persist.dir = dir;
    o.persist.name = name;
    o.persist.threads = 1;
    o.redundancy = dist::parse_redundancy(redundancy).value();  // checked by the parser
    o.ranks_per_node = ranks_per_node;
    o.xor_group = xor_group;
    o.pfs_dir = pfs_dir;
    o.pfs_every = pfs_every;
    return o;
  }
};

// In-process restart (dist::supervise) for the programs that offer it.
struct SuperviseSwitches {
  bool supervised = false;
  int max_restarts = 3;

  void add_to(CLI::App& cli) {
    cli.add_flag("--supervised", supervised,
                 "compute in a child process of each rank, restarted in place when it dies (no relaunch)");
    cli.add_option("--max-restarts", max_restarts, "--supervised: in-place restarts before the job is ended");
  }
};

}  // namespace cairn::apps
