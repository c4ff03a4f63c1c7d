// json.hpp — the JSON library every cairn report goes through (internal,
// header-only): the `cairn` tool, the apps' --json reports, the benchmarks
// and the tests that read them back use nlohmann-json, so every writer
// escapes strings and formats numbers the same way (a number that is not
// finite is written as null). Not part of libcairn: targets that include it
// link nlohmann_json::nlohmann_json.
#pragma once

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cairn/error.hpp"

namespace cairn::util {

// A JSON value whose objects keep their keys in the order they were set:
// reports list their fields in the order a reader expects them.
using Json = nlohmann::ordered_json;

// Writes `doc` to `path`, indented by two spaces, with a final newline.
inline Result<void> write_json_file(const Json& doc, const std::string& path) {
  std::ofstream out(path);
  if (!out) return make_error(Errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) return make_error(Errc::io_error, "writing " + path + " failed; check the directory and free space");
  return {};
}

// Reads and parses the JSON file at `path`.
inline Result<Json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(Errc::io_error, "cannot read " + path + ": " + std::strerror(errno));
  Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return make_error(Errc::invalid_argument, path + " is not valid JSON");
  return doc;
}

}  // namespace cairn::util
