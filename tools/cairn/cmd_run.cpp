// cmd_run.cpp — `cairn run APP [app options...]`: runs a proxy application
// (jacobi, npb-cg, ...) by exec'ing its binary, found in the apps/ folder of
// the build tree this tool belongs to ($CAIRN_APPS_DIR overrides it).
// `cairn run --list` lists the apps found. Exit status: the app's (0 verified,
// 1 verification failed, 2 bad options), or 2 if the app is not found.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "commands.hpp"

namespace cairn::tool {
namespace {

namespace fs = std::filesystem;

}  // namespace

// <build>/tools/cairn/cairn -> <build>/apps
fs::path apps_dir() {
  if (const char* env = std::getenv("CAIRN_APPS_DIR"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "apps";
  // Installed: <prefix>/bin/cairn and the apps in <prefix>/<libexecdir>/cairn
  // (apps/CMakeLists.txt); in a build tree: <build>/tools/cairn/cairn and
  // <build>/apps/NAME/NAME.
  const fs::path installed = self.parent_path().parent_path() / CAIRN_INSTALL_LIBEXECDIR / "cairn";
  if (fs::is_directory(installed, ec)) return installed;
  return self.parent_path().parent_path().parent_path() / "apps";
}

namespace {

// Executables under the apps folder, by name; tests and CMake's files excluded.
std::map<std::string, fs::path> find_apps(const fs::path& root) {
  std::map<std::string, fs::path> apps;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (it->is_directory(ec)) {
      if (name == "CMakeFiles" || it.depth() >= 2) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || ::access(p.c_str(), X_OK) != 0) continue;
    if (name.ends_with("_test") || name.find('.') != std::string::npos) continue;
    apps.emplace(name, p);
  }
  return apps;
}

}  // namespace

void add_run_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a proxy application (jacobi, npb-cg, npb-mg, ...)");
  cmd->footer(
      "Everything after APP goes to the application; `cairn run APP --help` shows its options.\n"
      "Common ones: --strategy NAME, --persist-every K, --threads T, --size S, --iterations N,\n"
      "--crash-at N, --resume, --dir DIR, --name NAME, --device-profile P, --quiet, --json FILE.\n"
      "Exit status: the application's (0 verified, 1 verification failed, 2 bad options or error).");
  // APP and every word after it, options included (--help too), are the
  // application's: once APP is seen, nothing more is parsed as run's own.
  cmd->positionals_at_end();
  struct Args {
    std::vector<std::string> words;  // APP, then its arguments
    bool list = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_flag("--list", args->list, "List the applications found next to this tool");
  cmd->add_option("APP", args->words, "The application to run, then its options");
  cmd->callback([args] {
    const fs::path root = apps_dir();
    const auto apps = find_apps(root);
    if (args->list) {
      if (apps.empty()) std::cout << "no applications found under " << root.string() << " (build them first)\n";
      for (const auto& [name, path] : apps) std::cout << name << "\n";
      exit_code() = apps.empty() ? 2 : 0;
      return;
    }
    const std::string app_name = args->words.empty() ? std::string() : args->words.front();
    const auto found = apps.find(app_name);
    if (app_name.empty() || found == apps.end()) {
      std::cerr << "cairn run: " << (app_name.empty() ? "no application given" : "no application '" + app_name + "'")
                << " under " << root.string() << "; available:";
      for (const auto& [name, path] : apps) std::cerr << " " << name;
      std::cerr << (apps.empty() ? " none (build them first, e.g. `make release`)" : "") << "\n";
      exit_code() = 2;
      return;
    }
    std::vector<std::string> argv_s{found->second.string()};
    argv_s.insert(argv_s.end(), args->words.begin() + 1, args->words.end());
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::cout.flush();
    ::execv(argv[0], argv.data());
    std::perror(("cairn run: cannot execute " + argv_s[0]).c_str());
    exit_code() = 2;
  });
}

}  // namespace cairn::tool
