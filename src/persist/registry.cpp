// registry.cpp — the built-in strategies by name.
#include "persist/strategy.hpp"

namespace cairn::persist::detail {

const std::vector<Registration>& registry() {
  static const std::vector<Registration> all = {
      {"undo-log", "libpmemobj undo-log transactions, working set in NVM (seed 001 §3.2.1)", make_undo_log},
      {"shadow", "two versions in NVM, copy-on-write working view, O(1) restore (seed 001 §3.2.2)", make_shadow},
      {"file", "checkpoint files: write, fsync, atomic rename (seed 001 §3.2.3)", make_file},
      {"dram-cache", "working set in DRAM, backup into two NVM slots (seed 001 §3.2.4)", make_dram_cache},
      {"nt-copy", "DRAM working set, multi-threaded non-temporal copies into NVM (seed 004 §3.2)", make_nt_copy},
      {"in-place", "in-place versioning with asynchronous flushing (seed 004 §4)", make_in_place},
  };
  return all;
}

Result<std::unique_ptr<Strategy>> make_strategy(const std::string& name) {
  std::string known;
  for (const auto& r : registry()) {
    if (r.name == name) {
      auto s = r.make();
      if (!s) return make_error(Errc::unsupported, "strategy '" + name + "' is not built yet");
      return s;
    }
    known += (known.empty() ? "" : ", ") + r.name;
  }
  return make_error(Errc::invalid_argument, "unknown persistence strategy '" + name + "'; choose one of: " + known);
}

}  // namespace cairn::persist::detail
