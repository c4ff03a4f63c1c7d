// run_app.hpp — for tests that run a program end to end (an app, the cairn
// tool): run it with its output captured, and read values of the JSON
// report the apps write with --json.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "util/json.hpp"

namespace cairn::testing {

struct Outcome {
  int exit_code = -1;  // -1 when it did not exit (killed by a signal, or never started)
  int signal = 0;      // the signal that killed it, 0 if none did
  std::string output;  // stdout and stderr together
  bool exited() const { return exit_code >= 0; }
};

// Runs `path` with `args`, as user `uid` if not negative, and returns its
// exit status and its output (stdout and stderr through one pipe).
inline Outcome run_program(const std::string& path, const std::vector<std::string>& args, int uid = -1) {
  std::vector<std::string> words{path};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  Outcome o;
  int fds[2];
  if (::pipe(fds) != 0) return o;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    if (uid >= 0) {
      // Open the binary before dropping privileges: the build tree may sit
      // in a directory the other user cannot traverse.
      const int exe = ::open(argv[0], O_RDONLY | O_CLOEXEC);
      if (exe < 0 || ::setuid(static_cast<uid_t>(uid)) != 0) ::_exit(120);
      ::fexecve(exe, argv.data(), environ);
      ::_exit(127);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) o.output.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  return o;
}

// run_program, with the output also kept in <dir>/run.log for a failing
// test's reader.
inline Outcome run_app(const std::string& path, const std::vector<std::string>& args, const std::string& dir) {
  Outcome o = run_program(path, args);
  std::ofstream(dir + "/run.log") << o.output;
  return o;
}

// One top-level value of a JSON report (util::read_json_file): a string as
// is, anything else as JSON text ("true", "42"); "<missing KEY>" if absent,
// "<unreadable PATH>" if the file is not JSON.
inline std::string json_value(const std::string& path, const std::string& key) {
  auto doc = util::read_json_file(path);
  if (!doc.ok() || !doc.value().is_object()) return "<unreadable " + path + ">";
  const auto it = doc.value().find(key);
  if (it == doc.value().end()) return "<missing " + key + ">";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The apps' restart tests, parameterised by (variant, strategy): a test name
// ("<variant>_<strategy>", '-' as '_') and a seed for the crash point.
inline std::string restart_test_name(const std::string& variant, const std::string& strategy) {
  std::string s = variant + "_" + strategy;
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}
inline std::uint32_t restart_seed(const std::string& variant, const std::string& strategy) {
  return static_cast<std::uint32_t>(std::hash<std::string>{}(variant + "/" + strategy));
}

// The 16 hex digits after the first "checksum " in an app's output that has
// them, "" if none (std::regex is avoided: GCC 12's -Wmaybe-uninitialized
// fires inside <regex> under the sanitizer build).
inline std::string checksum_in(const std::string& out) {
  for (std::size_t at = out.find("checksum "); at != std::string::npos; at = out.find("checksum ", at + 1)) {
    const std::string h = out.substr(at + 9, 16);
    if (h.size() == 16 && h.find_first_not_of("0123456789abcdef") == std::string::npos) return h;
  }
  return "";
}

}  // namespace cairn::testing
