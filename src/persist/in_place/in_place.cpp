// in_place.cpp — placeholder until this strategy lands (being written).
#include "persist/strategy.hpp"

namespace cairn::persist::detail {
std::unique_ptr<Strategy> make_in_place() { return nullptr; }
}  // namespace cairn::persist::detail
