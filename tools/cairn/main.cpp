// main.cpp — the `cairn` command line: pool inspection, devices, benchmarks,
// the proxy applications. (The crash simulator is a separate test tool,
// `cairn-crashsim`, built in tests/crashsim and never installed.) Run `cairn --help` or `cairn SUBCOMMAND --help`.
#include <iostream>

#include "commands.hpp"

namespace cairn::tool {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace cairn::tool

int main(int argc, char** argv) {
  CLI::App app{"cairn: persistent-memory resilience runtime for HPC simulations"};
  app.require_subcommand(1);
  cairn::tool::add_pool_commands(app);
  cairn::tool::add_device_commands(app);
  cairn::tool::add_bench_commands(app);
  cairn::tool::add_run_commands(app);
  cairn::tool::add_stream_commands(app);
  cairn::tool::add_launch_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2, the status the
    // apps and `cairn pool check` give bad options, not CLI11's own codes
    // (106 for a missing subcommand or a required option).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return cairn::tool::exit_code();
}
