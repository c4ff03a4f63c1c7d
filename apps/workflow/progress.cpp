// progress.cpp — the workflow driver's progress record (progress.hpp).
#include "apps/workflow/progress.hpp"

#include <charconv>
#include <cstdio>

#include "util/crc32c.hpp"

namespace cairn::apps::workflow {
namespace {

constexpr std::string_view kPrefix = "cairn-workflow-progress/";
constexpr int kFormat = 2;

std::uint32_t crc_of(int next, std::string_view signature) {
  const std::string covered =
      std::string(kPrefix) + std::to_string(kFormat) + " next=" + std::to_string(next) + " " + std::string(signature);
  return util::crc32c(0, covered.data(), covered.size());
}

// Digits at the front of `s` into `out` (base 10 or 16), consumed.
template <class T>
bool take_number(std::string_view& s, T& out, int base, std::size_t max_digits) {
  std::size_t n = 0;
  while (n < s.size() && n < max_digits + 1 &&
         ((s[n] >= '0' && s[n] <= '9') || (base == 16 && s[n] >= 'a' && s[n] <= 'f')))
    ++n;
  if (n == 0 || n > max_digits) return false;
  const auto [end, err] = std::from_chars(s.data(), s.data() + n, out, base);
  if (err != std::errc{} || end != s.data() + n) return false;
  s.remove_prefix(n);
  return true;
}

bool take(std::string_view& s, std::string_view word) {
  if (s.substr(0, word.size()) != word) return false;
  s.remove_prefix(word.size());
  return true;
}

}  // namespace

std::string format_progress(int next, const std::string& signature) {
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", crc_of(next, signature));
  return std::string(kPrefix) + std::to_string(kFormat) + " next=" + std::to_string(next) + " crc=" + crc + " " +
         signature + "\n";
}

Result<int> parse_progress(std::string_view text, const std::string& signature, const std::string& uri) {
  const std::string advice = ": remove it and run without --resume";
  std::string_view s = text;
  if (!take(s, kPrefix)) return make_error(Errc::foreign_file, uri + " is not the workflow's progress record" + advice);
  int format = 0;
  if (!take_number(s, format, 10, 6) || !take(s, " "))
    return make_error(Errc::corrupted, uri + ": the progress record's format is damaged" + advice);
  if (format != kFormat)
    return make_error(Errc::wrong_version, uri + ": a progress record of format " + std::to_string(format) +
                                               (format == 1 ? " (an older workflow, no checksum)" : "") +
                                               ", this driver reads format " + std::to_string(kFormat) + advice);
  int next = -1;
  std::uint32_t crc = 0;
  if (!take(s, "next=") || !take_number(s, next, 10, 7) || next > kMaxProgressStep || !take(s, " crc=") ||
      !take_number(s, crc, 16, 8) || !take(s, " ") || s.empty() || s.back() != '\n')
    return make_error(Errc::corrupted, uri + ": the progress record is damaged or truncated" + advice);
  const std::string_view stored = s.substr(0, s.size() - 1);
  if (stored.find('\n') != std::string_view::npos || crc != crc_of(next, stored))
    return make_error(Errc::corrupted, uri + ": the progress record fails its checksum (damaged)" + advice);
  if (stored != signature)
    return make_error(Errc::layout_mismatch, "--resume: the stored run had " + std::string(stored) + ", this one " +
                                                 signature + "; use the same options");
  return next;
}

}  // namespace cairn::apps::workflow
