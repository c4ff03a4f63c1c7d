// dist_files_fuzz.cpp — libFuzzer target: dist's small files, read whole.
// Input byte 0, bit 0: a heartbeat (cairn launch's reader), else a flushed
// version (<name>.n2.r0.v5.ckpt: header, payload) read as dist reads it
// (its payload size known) and as amr-mpi does (the size the file records);
// the rest of the input is the file. Any typed error is fine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dist/files.hpp"
#include "dist/heartbeat.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> file{data + 1, size - 1};
  const std::string& dir = cairn::fuzz::scratch_dir();
  if ((data[0] & 1) != 0) {
    const std::string path = cairn::dist::detail::heartbeat_path(dir, 0);
    cairn::fuzz::write_file(path, file);
    auto beat = cairn::dist::detail::read_heartbeat(path);
    // The launcher signals the pid a beat names: never anything but a process id.
    if (beat.ok() && (beat.value().pid == 0 || beat.value().pid > cairn::dist::detail::kMaxPid)) __builtin_trap();
  } else {
    cairn::dist::detail::PfsFlusher flusher(dir, "job", 0, 2);
    cairn::fuzz::write_file(flusher.file(5), file);
    (void)flusher.versions();
    std::vector<std::byte> sized(cairn::fuzz::kFlushPayloadBytes), any;
    (void)flusher.read(5, sized);
    (void)flusher.read(5, any);
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
