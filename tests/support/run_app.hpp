// run_app.hpp — for tests that run a program end to end: run it with its
// output captured, and read values of the flat JSON report (one key per line)
// the apps write with --json.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cairn::testing {

struct Outcome {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr
};

// Runs `path` with `args`; stdout and stderr go to <dir>/run.log and are returned.
inline Outcome run_app(const std::string& path, std::vector<std::string> args, const std::string& dir) {
  const std::string log = dir + "/run.log";
  args.insert(args.begin(), path);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome o;
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  o.output = ss.str();
  return o;
}

// One value of a flat JSON report, "<missing KEY>" if absent.
inline std::string json_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  const std::string tag = "\"" + key + "\": ";
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(tag);
    if (at == std::string::npos) continue;
    std::string v = line.substr(at + tag.size());
    if (!v.empty() && v.back() == ',') v.pop_back();
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return "<missing " + key + ">";
}

}  // namespace cairn::testing
