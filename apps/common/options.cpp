// options.cpp — the command-line options every app takes, and run_main().
#include <iostream>
#include <thread>

#include "apps/common/app.hpp"
#include "cairn/persist.hpp"

namespace cairn::apps {

void add_common_options(CLI::App& cli, RunOptions& o) {
  cli.add_option("--strategy", o.strategy,
                 "Persistence strategy (undo-log, shadow, file, dram-cache, nt-copy, in-place); "
                 "absent or 'native' = no persistence");
  cli.add_option("--persist-every", o.persist_every, "Commit a version every K iterations (default 1)");
  cli.add_option("--threads", o.threads, "Threads for compute and persistence (default: hardware threads)");
  cli.add_option("--device-profile", o.device,
                 "Device for the pool: real, emulated:PROFILE or a profile name (see `cairn device profiles`)");
  cli.add_flag("--sync-flush", o.sync_flush,
               "in-place: flush at commit on the compute threads instead of on a helper thread");
  cli.add_flag("--no-flush", o.no_flush,
               "in-place: skip writing back the new version (measurement only: not durable against power loss)");
  cli.add_flag("--no-checksums", o.no_checksums,
               "pool strategies: no payload checksums (measurement only: damage on the media goes unseen)");
  cli.add_option("--size", o.size, "Problem size (app-specific; NPB apps: class S, W, A or B)");
  cli.add_option("--iterations", o.iterations, "Number of iterations (default: the app's)");
  cli.add_option("--crash-at", o.crash_at,
                 "SIGKILL this process at the start of iteration N (after committing the earlier ones)");
  cli.add_flag("--resume", o.resume, "Restore the last committed version and continue after it");
  cli.add_option("--dir", o.dir, "Directory of the pool or checkpoints (default: the cairn pool dir)");
  cli.add_option("--name", o.name, "Name of the pool or checkpoints (default: the app's name)");
  cli.add_flag("--quiet", o.quiet, "No progress lines; a one-line summary");
  cli.add_option("--json", o.json, "Also write the report as JSON to FILE");
}

Result<void> validate(RunOptions& o) {
  if (o.strategy == "native") o.strategy.clear();
  if (!o.strategy.empty()) {
    const auto names = persist::strategy_names();
    bool known = false;
    std::string list;
    for (const auto& n : names) {
      known = known || n == o.strategy;
      list += (list.empty() ? "" : ", ") + n;
    }
    if (!known)
      return make_error(Errc::invalid_argument, "--strategy '" + o.strategy +
                                                    "' is not a persistence strategy; use one of: " + list +
                                                    " (or leave it out for a native run)");
  }
  if (o.persist_every == 0)
    return make_error(Errc::invalid_argument, "--persist-every must be at least 1 (commit every K iterations)");
  if (o.resume && o.strategy.empty())
    return make_error(Errc::invalid_argument,
                      "--resume needs the --strategy the interrupted run used: a native run keeps nothing");
  if ((o.sync_flush || o.no_flush) && o.strategy != "in-place")
    return make_error(Errc::invalid_argument, std::string(o.sync_flush ? "--sync-flush" : "--no-flush") +
                                                  " applies to --strategy in-place only");
  if (o.threads == 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
  if (o.name.find('/') != std::string::npos)
    return make_error(Errc::invalid_argument,
                      "--name '" + o.name + "' must not contain '/'; use --dir for the directory");
  return {};
}

int run_main(int argc, char** argv, std::unique_ptr<Simulation> sim, const std::string& description) {
  CLI::App cli{description.empty() ? "cairn proxy application" : description};
  RunOptions options;
  add_common_options(cli, options);
  sim->add_options(cli);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : 2;
  }
  const std::string prog = argc > 0 ? std::string(argv[0]).substr(std::string(argv[0]).find_last_of('/') + 1) : "app";
  if (auto v = validate(options); !v.ok()) {
    std::cerr << prog << ": " << v.error().message << "\n";
    return 2;
  }
  auto report = run_simulation(*sim, options);
  if (!report.ok()) {
    std::cerr << prog << ": " << errc_name(report.error().code) << ": " << report.error().message << "\n";
    return 2;
  }
  print_report(*report, options.quiet);
  if (!options.json.empty()) {
    if (auto w = write_json(*report, options.json); !w.ok()) {
      std::cerr << prog << ": " << w.error().message << "\n";
      return 2;
    }
  }
  return report->verification.passed ? 0 : 1;
}

}  // namespace cairn::apps
