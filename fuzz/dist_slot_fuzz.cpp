// dist_slot_fuzz.cpp — libFuzzer target: a dist slot file (a partner copy or
// parity segment: pool header and roots, the two slot headers, the slots'
// bytes) built from a sparse image, opened as the holder would (flags bit 1:
// parity, else a partner copy), each held slot verified and read, then a
// version written into the older slot and published. Any typed error is fine.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "dist/files.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using cairn::dist::detail::SlotFile;
  const std::string path = cairn::fuzz::scratch_dir() + "/copy.pool";
  const std::uint8_t flags = cairn::fuzz::write_sparse_image(path, {data, size});
  const SlotFile::Kind kind = (flags & 2) != 0 ? SlotFile::Kind::parity : SlotFile::Kind::partner;
  {
    auto f = SlotFile::open(path, kind, 1, 0, 2, cairn::fuzz::kSlotPayloadBytes);
    if (f.ok()) {
      SlotFile& s = *f.value();
      std::uint64_t sum = 0;
      for (int slot = 0; slot < 2; ++slot)
        if (s.held(slot) != 0 && s.verify(slot))
          for (std::size_t i = 0; i < s.bytes(); ++i) sum += static_cast<std::uint8_t>(s.data(slot)[i]);
      const std::uint64_t next = std::max(s.held(0), s.held(1)) + 1;
      if (next > 1 && s.begin(next).ok()) {
        std::memset(s.data(static_cast<int>(next % 2)), static_cast<int>(sum & 0xff), s.bytes());
        const std::vector<std::byte> bytes(s.data(static_cast<int>(next % 2)),
                                           s.data(static_cast<int>(next % 2)) + s.bytes());
        (void)s.publish(
            next, cairn::dist::detail::payload_checksum(cairn::dist::detail::block_hashes(bytes.data(), bytes.size())));
      }
    }
  }
  cairn::fuzz::clear_scratch();
  return 0;
}
