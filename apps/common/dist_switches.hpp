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
  void apply(dist::Options& o) const {
    o.redundancy = dist::parse_redundancy(redundancy).value();  // checked by the parser
    o.ranks_per_node = ranks_per_node;
    o.xor_group = xor_group;
    o.pfs_dir = pfs_dir;
    o.pfs_every = pfs_every;
  }
};

}  // namespace cairn::apps
