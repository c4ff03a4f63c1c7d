// file.cpp — placeholder until this strategy lands (being written).
#include "persist/strategy.hpp"

namespace cairn::persist::detail {
std::unique_ptr<Strategy> make_file() { return nullptr; }
}  // namespace cairn::persist::detail
