// undo_log.cpp — placeholder until this strategy lands (being written).
#include "persist/strategy.hpp"

namespace cairn::persist::detail {
std::unique_ptr<Strategy> make_undo_log() { return nullptr; }
}  // namespace cairn::persist::detail
