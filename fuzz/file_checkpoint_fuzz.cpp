// file_checkpoint_fuzz.cpp — libFuzzer target: a checkpoint file of the
// `file` strategy (header, region descriptors, pointer records, region data),
// the input as it is, placed as <scratch>/state.1.ckpt and restored by a
// persist::Context, then committed once (which writes version 2 and prunes).
// Any typed error is fine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/persist.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cairn::fuzz::write_file(cairn::fuzz::scratch_dir() + "/state.1.ckpt", {data, size});
  {
    auto ctx = cairn::persist::Context::create(cairn::fuzz::state_options("file"));
    if (ctx.ok() && cairn::fuzz::open_state(*ctx.value()).ok() && ctx.value()->committed_version()) {
      if (ctx.value()->restore().ok()) (void)ctx.value()->commit();
    }
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
