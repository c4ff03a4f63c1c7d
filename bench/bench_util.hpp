// bench_util.hpp — small helpers shared by the experiments behind `cairn bench NAME` (internal):
// size parsing, medians, machine description, JSON and number formatting.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cairn/error.hpp"
#include "util/json.hpp"

namespace cairn::bench {

// "4M", "1G", "65536", "256MiB": bytes with an optional binary K, M or G
// suffix. `what` names the option in the error message.
Result<std::size_t> parse_size(const std::string& text, const std::string& what = "--size");

// "a,b,c" → {"a", "b", "c"}; empty items are dropped.
std::vector<std::string> split_list(const std::string& text);

// Median of the samples (0 for none).
double median(std::vector<double> samples);

// The CPU model from /proc/cpuinfo, "unknown" if not found.
std::string cpu_model();
// Now, as "YYYY-MM-DD HH:MM UTC".
std::string utc_now();
// The 1-minute load average, -1 if unknown.
double load_average();
// Bytes the kernel reports as available for new allocations (MemAvailable),
// 0 if unknown.
std::size_t memory_available();

// The file system `dir` is on: "tmpfs", "ext4", "xfs", ... or its magic.
std::string fs_type_name(const std::string& dir);

// Creates the benchmark's scratch directory (and its parents); the error
// names it and says how to choose another.
Result<void> create_bench_dir(const std::string& dir);

// printf-style formatting of one number.
std::string fmt(const char* format, double value);

// Every benchmark builds its JSON as a Json document and writes it with
// write_json_file (util/json.hpp, nlohmann-json).
using util::Json;
using util::write_json_file;

// String forms of one JSON value, through the same library, for the one
// driver that still assembles its report as text (gerris_bench.cpp, being
// changed elsewhere; it moves to Json and these go then).
inline std::string json_str(const std::string& s) { return Json(s).dump(); }
inline std::string json_num(double v) { return Json(v).dump(); }
inline std::string json_list(const std::vector<std::string>& v) { return Json(v).dump(); }

}  // namespace cairn::bench
