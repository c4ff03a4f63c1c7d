// slot_store_fuzz.cpp — libFuzzer target: the pool of a slot-store strategy
// (pool header and roots, the state header, region descriptors, pointer
// tables, the version word, the slot areas) built from a sparse image, opened
// by a persist::Context of the strategy flags bits 1..2 pick (in-place,
// shadow, dram-cache, nt-copy), restored, its regions read, then committed
// once. Any typed error is fine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "cairn/persist.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = cairn::fuzz::scratch_dir() + "/state.pool";
  const std::uint8_t flags = cairn::fuzz::write_sparse_image(path, {data, size});
  const std::string strategy = cairn::fuzz::kSlotStrategies[(flags >> 1) & 3];
  {
    auto ctx = cairn::persist::Context::create(cairn::fuzz::state_options(strategy));
    if (ctx.ok() && cairn::fuzz::open_state(*ctx.value()).ok() && ctx.value()->committed_version()) {
      if (ctx.value()->restore().ok()) (void)ctx.value()->commit();
    }
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
