// commands.hpp — each group of `cairn` subcommands registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>

namespace cairn::tool {

// Each adds its subcommands to the app. A subcommand's callback sets the
// process exit code through exit_code().
void add_pool_commands(CLI::App& app);
void add_device_commands(CLI::App& app);
void add_bench_commands(CLI::App& app);
// `cairn bench device` (cmd_device.cpp), registered by add_bench_commands.
void add_device_bench(CLI::App& bench);
void add_run_commands(CLI::App& app);
void add_stream_commands(CLI::App& app);
// `cairn launch` (cmd_launch.cpp): mpirun with relaunch at the global version.
void add_launch_commands(CLI::App& app);

int& exit_code();

// The apps folder of the build tree this tool belongs to (cmd_run.cpp;
// $CAIRN_APPS_DIR overrides it).
std::filesystem::path apps_dir();

}  // namespace cairn::tool
