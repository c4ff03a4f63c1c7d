// json.hpp — the few JSON emitters cairn's reports share (internal): the
// `cairn` tool, the apps' --json reports and the benchmarks write JSON by
// hand with these, so every writer escapes and formats numbers the same way.
#pragma once

#include <string>
#include <vector>

namespace cairn::util {

// A JSON string literal, quotes included; control characters as \uXXXX.
std::string json_str(const std::string& s);
// A JSON number with `digits` significant digits; null if not finite.
std::string json_num(double v, int digits = 9);
// A JSON array of string literals.
std::string json_list(const std::vector<std::string>& v);

}  // namespace cairn::util
