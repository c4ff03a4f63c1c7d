// app_files_fuzz.cpp — libFuzzer target: the applications' own files, read
// whole. Input byte 0, bit 0: the amr in-core snapshot, decoded into a fresh
// in-core tree (level-max 6); else the workflow driver's progress record.
// The rest of the input is the file. Any typed error is fine.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "apps/amr/snapshot.hpp"
#include "apps/workflow/progress.hpp"
#include "cairn/octree.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const unsigned char> file{data + 1, size - 1};
  if ((data[0] & 1) != 0) {
    auto tree = cairn::octree::Octree::create(cairn::fuzz::scratch_dir() + "/amr.pool", cairn::fuzz::amr_options());
    if (tree.ok()) {
      auto step = cairn::apps::amr::decode_snapshot(file, "amr.snapshot", cairn::fuzz::kAmrLevelMax, *tree.value());
      if (step.ok()) (void)tree.value()->leaf_count();
    }
  } else {
    const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
    (void)cairn::apps::workflow::parse_progress(text, cairn::fuzz::kWorkflowSignature, "workflow.progress");
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
