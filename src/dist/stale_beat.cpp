// stale_beat.cpp — a rank of a dist_kill_test job that beats once, naming a
// process given on its command line instead of itself, then hangs: the beat
// a launcher finds after a rank's process ended and its pid went to another
// process (a supervised compute process replaced), or a beat from another
// node. No MPI: mpirun runs it as it runs any program.
//
//   cairn launch -n 1 --timeout 1 -- stale_beat PID
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "dist/heartbeat.hpp"

int main(int argc, char** argv) {
  const char* dir = std::getenv("CAIRN_HEARTBEAT_DIR");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (argc != 2 || dir == nullptr || rank == nullptr) {
    std::fprintf(stderr, "stale_beat: run as `cairn launch -n 1 -- stale_beat PID`\n");
    return 2;
  }
  const std::string path = cairn::dist::detail::heartbeat_path(dir, std::atoi(rank));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return 2;
  cairn::dist::detail::write_heartbeat(fd, {1, std::strtoull(argv[1], nullptr, 10), 0, 0});
  ::close(fd);
  std::printf("stale_beat: beat naming pid %s, now hanging\n", argv[1]);
  std::fflush(stdout);
  ::alarm(120);  // a launcher that never ends the job ends the test, not hangs it
  for (;;) ::pause();
}
