// main.cpp — `amr`: a sphere advected through the time-reversing 3D
// deformation field on an adaptive PM-octree, persisted with pm_persistent
// (see amr.hpp). Options: `amr --help`.
//
// Sample runs:
//   amr --size 5                                  # levels 2-5, T = 3: the sphere comes back
//   amr --size 5 --crash-at 200                   # SIGKILLed at the start of step 200
//   amr --size 5 --resume                         # continues from the last persisted step;
//                                                 # the final checksum equals an uninterrupted run's
//   amr --size 6 --emit-vtk out --vtk-every 50    # leaves and fraction for ParaView
// Exit status: 0 verified (fluid volume conserved to 1e-10), 1 failed or not verified, 2 bad options.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apps/amr/amr.hpp"
#include "cairn/extended/pool.hpp"
#include "util/json.hpp"

int main(int argc, char** argv) {
  namespace amr = cairn::apps::amr;
  amr::Config c;
  std::string dir = cairn::pool::default_pool_dir(), name = "amr", strategy = "pm-octree", json;
  bool quiet = false;
  CLI::App cli("amr: an interface advected by a reversing deformation field on an adaptive PM-octree");
  cli.add_option("--size", c.level_max, "finest level (the interface's)")->check(CLI::Range(3, 10));
  cli.add_option("--level-min", c.level_min, "coarsest level away from the interface")->check(CLI::Range(1, 10));
  cli.add_option("--period", c.period, "T: the flow reverses at T/2; the sphere is back at T")
      ->check(CLI::PositiveNumber);
  cli.add_option("--cfl", c.cfl, "dt = cfl * h_min / max|u|")->check(CLI::Range(0.01, 0.5));
  cli.add_option("--persist-every", c.persist_every, "pm_persistent every K steps")->check(CLI::PositiveNumber);
  cli.add_option("--crash-at", c.crash_at, "SIGKILL at the start of this step");
  cli.add_flag("--resume", c.resume, "continue from the last persisted step");
  cli.add_option("--step-limit", c.step_limit, "stop after this step (measurements; the sphere is not back)");
  std::string device_profile, budget;
  bool no_transform = false;
  cli.add_option("--strategy", strategy,
                 "how the mesh lives and persists: pm-octree (pm_persistent), in-core (DRAM, a snapshot file "
                 "every --snapshot-every steps) or lmdb (out-of-core B+-tree, one transaction per persist)")
      ->check(CLI::IsMember({"pm-octree", "in-core", "lmdb"}));
  cli.add_option("--device-profile", device_profile,
                 "emulated NVM profile of the pool (pcm-2017: seed 000's read 100 ns, write 150 ns; optane-dcpmm)");
  cli.add_option("--dram-budget", budget, "pm-octree: bytes of blocks kept in DRAM (C0), e.g. 64M (default: all)");
  cli.add_flag("--no-transform", no_transform, "pm-octree: no feature-directed layout transformation");
  cli.add_option("--snapshot-every", c.snapshot_every, "in-core: steps between snapshots (default 10)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--dir", dir, "directory of the pool");
  cli.add_option("--pool-size", c.pool_size, "bytes of the pool file (default 512 MiB)")
      ->check(CLI::Range(1ull << 20, 1ull << 40));
  cli.add_option("--name", name, "pool name (<dir>/<name>.pool)");
  cli.add_option("--emit-vtk", c.vtk_dir, "write <dir>/amr_STEP.vtu every --vtk-every steps");
  cli.add_option("--vtk-every", c.vtk_every, "steps between VTK files (default 10 with --emit-vtk)");
  cli.add_option("--json", json, "write the report as JSON");
  cli.add_flag("--quiet", quiet, "only the result line");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }
  if (c.level_min > c.level_max) {
    std::fprintf(stderr, "amr: --level-min %d is above --size %d\n", c.level_min, c.level_max);
    return 2;
  }
  if (!c.vtk_dir.empty()) {
    if (c.vtk_every == 0) c.vtk_every = 10;
    std::error_code ec;
    std::filesystem::create_directories(c.vtk_dir, ec);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  c.backend = strategy == "lmdb"      ? amr::Backend::lmdb
              : strategy == "in-core" ? amr::Backend::in_core
                                      : amr::Backend::pm_octree;
  c.pool = dir + "/" + name +
           (c.backend == amr::Backend::lmdb      ? ".lmdb"
            : c.backend == amr::Backend::in_core ? ".incore.pool"
                                                 : ".pool");
  if (!device_profile.empty()) c.device = "emulated:" + device_profile;
  c.transform = !no_transform;
  if (!budget.empty()) {
    char* end = nullptr;
    const double v = std::strtod(budget.c_str(), &end);
    const std::string unit = end != nullptr ? end : "";
    const double mult = unit == ""    ? 1
                        : unit == "K" ? 1024.0
                        : unit == "M" ? 1048576.0
                        : unit == "G" ? 1073741824.0
                                      : -1;
    if (!(v >= 0) || mult < 0) {
      std::fprintf(stderr, "amr: --dram-budget %s: a number of bytes with an optional K, M or G\n", budget.c_str());
      return 2;
    }
    c.dram_budget = static_cast<std::uint64_t>(v * mult);
  }
  auto r = amr::run(c);
  if (!r.ok()) {
    std::fprintf(stderr, "amr: error: %s\n", r.error().message.c_str());
    return r.error().code == cairn::Errc::invalid_argument ? 2 : 1;
  }
  const amr::Report& x = r.value();
  const double rel = std::fabs(x.volume - x.volume0) / x.volume0;
  const bool ok = rel < 1e-10;
  if (!quiet)
    std::printf(
        "amr: %s, levels %d-%d, %llu steps of %.6g from step %llu, %llu leaves; persist %.3f s of %.3f s, "
        "%llu blocks written, %.1f MB stored into NVM blocks\n",
        strategy.c_str(), c.level_min, c.level_max, static_cast<unsigned long long>(x.steps), x.dt,
        static_cast<unsigned long long>(x.first_step), static_cast<unsigned long long>(x.leaves), x.persist_seconds,
        x.seconds, static_cast<unsigned long long>(x.blocks_persisted), 64e-6 * static_cast<double>(x.nvm_store_lines));
  std::printf("amr: volume %.12g (initial %.12g, relative change %.2e), shape error at T %.6e, checksum %016llx: %s\n",
              x.volume, x.volume0, rel, x.shape_error, static_cast<unsigned long long>(x.checksum),
              ok ? "VERIFIED" : "NOT VERIFIED (volume not conserved)");
  if (!json.empty()) {
    char checksum[24];
    std::snprintf(checksum, sizeof checksum, "%016llx", static_cast<unsigned long long>(x.checksum));
    const cairn::util::Json doc = {{"size", c.level_max},
                                   {"level_min", c.level_min},
                                   {"steps", x.steps},
                                   {"first_step", x.first_step},
                                   {"leaves", x.leaves},
                                   {"volume0", x.volume0},
                                   {"volume", x.volume},
                                   {"shape_error", x.shape_error},
                                   {"checksum", checksum},
                                   {"seconds", x.seconds},
                                   {"persist_seconds", x.persist_seconds},
                                   {"restore_seconds", x.restore_seconds},
                                   {"strategy", strategy},
                                   {"nvm_store_bytes", 64 * x.nvm_store_lines},
                                   {"verified", ok}};
    if (auto w = cairn::util::write_json_file(doc, json); !w.ok()) {
      std::fprintf(stderr, "amr: --json: %s\n", w.error().message.c_str());
      return 1;
    }
  }
  return ok ? 0 : 1;
}
