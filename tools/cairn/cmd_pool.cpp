// cmd_pool.cpp — `cairn pool create|info|check`: make, describe and verify pool files.
//
// `check` is built for damaged files: it reads with pread only, never maps or
// writes, asks Pool::inspect whether the pool would open, and then looks at
// every on-media structure itself so that it can list every problem, including
// the ones behind a fatal one (a pool whose two header copies are both bad may
// also have a bad root table).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cairn/extended/device.hpp"
#include "cairn/extended/pool.hpp"
#include "commands.hpp"
#include "util/json.hpp"

namespace cairn::tool {
namespace {

using pool::kArenaOffset;
using pool::kHeaderCopy0;
using pool::kHeaderCopy1;
using pool::kHighWaterOffset;
using pool::kLayoutVersion;
using pool::kMagic;
using pool::kRootSlots;
using pool::kRootTable0;
using pool::kRootTable1;
using pool::kSelectorOffset;
using pool::PoolHeader;
using pool::RootTable;

// Exit codes shared by the pool commands (documented in their --help).
constexpr int kExitOk = 0;
constexpr int kExitProblems = 1;  // check: problems found; create: not created
constexpr int kExitCannot = 2;    // cannot read the file, or a bad option value

// ---- sizes ----

// "4096", "4K", "64M", "1G", "2T", also "1GiB" / "1gb"; binary multiples.
Result<std::uint64_t> parse_size(const std::string& what, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::invalid_argument, what + " '" + text + "' is not a size: " + why +
                                                  " (write a whole number of bytes, optionally with a K, M, G or T "
                                                  "suffix, e.g. 4K or 1G)");
  };
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return bad("it is too large");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return bad("it does not start with a digit");
  std::string suffix = text.substr(i);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': break;
      default: return bad("unknown suffix '" + text.substr(i) + "'");
    }
    const std::string rest = suffix.substr(suffix[0] == 'B' ? 0 : 1);
    if (!(rest.empty() || rest == "B" || (shift != 0 && rest == "IB")))
      return bad("unknown suffix '" + text.substr(i) + "'");
  }
  if (shift != 0 && value > (UINT64_MAX >> shift)) return bad("it is too large");
  value <<= shift;
  if (value == 0) return bad("it is zero");
  return value;
}

std::string human_bytes(std::uint64_t n) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes", n);
  else
    std::snprintf(buf, sizeof buf, "%" PRIu64 " bytes (%.4g %s)", n, v, units[u]);
  return buf;
}

std::string uuid_text(const std::uint8_t (&u)[16]) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return buf;
}

std::string time_text(std::uint64_t ns) {
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000u);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return "(invalid time)";
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

// The magic's eight bytes as characters where printable.
std::string magic_chars(std::uint64_t m) {
  std::string s;
  for (int i = 0; i < 8; ++i) {
    const char c = static_cast<char>((m >> (8 * i)) & 0xff);
    s += (c >= 0x20 && c < 0x7f) ? c : '.';
  }
  return s;
}

// Opening a FIFO would block and a device has no meaningful size: refuse
// anything that exists and is neither a regular file nor a directory (the
// pool layer reports directories itself).
bool refuse_special_file(const char* cmd, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return false;
  std::cerr << "cairn pool " << cmd << ": " << path
            << " is not a regular file (a device, FIFO or socket); a pool is a regular file\n";
  return true;
}

// ---- create ----

struct CreateArgs {
  std::string path;
  std::string size = "64M";
  std::string block_size = "4K";
  std::string flush = "auto";
};

int run_create(const CreateArgs& a) {
  auto size = parse_size("--size", a.size);
  if (!size.ok()) {
    std::cerr << "cairn pool create: " << size.error().message << "\n";
    return kExitCannot;
  }
  auto block = parse_size("--block-size", a.block_size);
  if (!block.ok()) {
    std::cerr << "cairn pool create: " << block.error().message << "\n";
    return kExitCannot;
  }
  if (block.value() > UINT32_MAX) {
    std::cerr << "cairn pool create: --block-size '" << a.block_size << "' is too large (at most 64M)\n";
    return kExitCannot;
  }
  auto mode = devices::parse_flush_mode(a.flush);
  if (!mode.ok()) {
    std::cerr << "cairn pool create: --flush: " << mode.error().message << "\n";
    return kExitCannot;
  }
  pool::CreateOptions o;
  o.size = size.value();
  o.block_size = static_cast<std::uint32_t>(block.value());
  o.flush_mode = mode.value();
  o.device = devices::make_real_device();
  auto p = pool::Pool::create(a.path, std::move(o));
  if (!p.ok()) {
    std::cerr << "cairn pool create: " << p.error().message << "\n";
    const bool bad_value = p.error().code == Errc::invalid_argument || p.error().code == Errc::too_small;
    return bad_value ? kExitCannot : kExitProblems;
  }
  const auto& h = p.value()->header();
  std::cout << "created " << a.path << ": " << human_bytes(h.pool_size) << ", " << h.block_count << " blocks of "
            << h.block_size << " bytes, uuid " << uuid_text(h.uuid) << ", flush mode "
            << devices::flush_mode_name(p.value()->flush_mode()) << (p.value()->is_pmem() ? " (real pmem)" : "")
            << "\n";
  return kExitOk;
}

// ---- info ----

struct InfoArgs {
  std::string path;
  bool json = false;
};

int run_info(const InfoArgs& a) {
  if (refuse_special_file("info", a.path)) return kExitCannot;
  pool::OpenOptions o;
  o.device = devices::make_real_device();
  auto opened = pool::Pool::open(a.path, std::move(o));
  if (!opened.ok()) {
    std::cerr << "cairn pool info: " << opened.error().message << "\n";
    if (opened.error().code == Errc::corrupted || opened.error().code == Errc::truncated)
      std::cerr << "run `cairn pool check " << a.path << "` for every problem\n";
    return kExitCannot;
  }
  const pool::Pool& p = *opened.value();
  const PoolHeader& h = p.header();
  const pool::Health& health = p.health();
  std::uint64_t high_water = 0;
  std::memcpy(&high_water, p.at(kHighWaterOffset), sizeof high_water);
  std::vector<std::pair<unsigned, pool::RootSlot>> roots;
  for (unsigned s = 0; s < kRootSlots; ++s)
    if (p.root(s).offset != 0 || p.root(s).version != 0) roots.emplace_back(s, p.root(s));
  const char* mode = devices::flush_mode_name(p.flush_mode());

  if (a.json) {
    util::Json listed_roots = util::Json::array();
    for (const auto& [slot, root] : roots)
      listed_roots.push_back({{"slot", slot}, {"offset", root.offset}, {"version", root.version}});
    const util::Json j = {{"path", a.path},
                          {"magic", hex64(h.magic)},
                          {"magic_ok", h.magic == kMagic},
                          {"layout_version", h.layout_version},
                          {"uuid", uuid_text(h.uuid)},
                          {"pool_size", h.pool_size},
                          {"create_time_ns", h.create_time_ns},
                          {"create_time", time_text(h.create_time_ns)},
                          {"arena_offset", h.arena_offset},
                          {"block_size", h.block_size},
                          {"block_count", h.block_count},
                          {"arena_high_water_blocks", high_water},
                          {"arena_high_water_bytes", high_water * h.block_size},
                          {"header_copies_ok", {health.header0_ok, health.header1_ok}},
                          {"root_tables_ok", {health.table0_ok, health.table1_ok}},
                          {"root_selector", health.selector},
                          {"live_root_table", health.live_table},
                          {"root_generation", p.root_generation()},
                          {"roots", listed_roots},
                          {"is_pmem", p.is_pmem()},
                          {"flush_mode", mode},
                          {"problems", health.problems}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }

  std::ostringstream t;
  t << "pool             " << a.path << "\n";
  t << "magic            " << hex64(h.magic) << " \"" << magic_chars(h.magic) << "\""
    << (h.magic == kMagic ? "" : " (WRONG)") << "\n";
  t << "layout version   " << h.layout_version << "\n";
  t << "uuid             " << uuid_text(h.uuid) << "\n";
  t << "size             " << human_bytes(h.pool_size) << "\n";
  t << "created          " << time_text(h.create_time_ns) << "\n";
  t << "header copies    0 " << (health.header0_ok ? "ok" : "DAMAGED") << ", 1 "
    << (health.header1_ok ? "ok" : "DAMAGED") << "\n";
  t << "arena            " << h.block_count << " blocks of " << h.block_size << " bytes from offset " << h.arena_offset
    << "\n";
  t << "high-water mark  " << high_water << " blocks (" << human_bytes(high_water * h.block_size)
    << "): an upper bound on arena use; blocks freed since are not subtracted\n";
  t << "root table       " << health.live_table << " is live (selector " << health.selector << "), generation "
    << p.root_generation() << "\n";
  if (roots.empty()) t << "roots            all " << kRootSlots << " slots empty\n";
  for (std::size_t i = 0; i < roots.size(); ++i)
    t << (i == 0 ? "roots            " : "                 ") << "slot " << roots[i].first << ": offset "
      << roots[i].second.offset << ", version " << roots[i].second.version << "\n";
  t << "real pmem        " << (p.is_pmem() ? "yes" : "no") << " (pmem_is_pmem on this mapping)\n";
  t << "flush mode       " << mode << "\n";
  if (health.problems.empty()) {
    t << "problems         none seen while opening (`cairn pool check` verifies everything)\n";
  } else {
    for (std::size_t i = 0; i < health.problems.size(); ++i)
      t << (i == 0 ? "problems         " : "                 ") << health.problems[i] << "\n";
  }
  std::cout << t.str();
  return kExitOk;
}

// ---- check ----

const char* part_status(bool read, bool ok) { return !read ? "missing" : ok ? "ok" : "DAMAGED"; }

// Prints what Pool::inspect found; every check is the pool's own.
int run_check(const std::string& path) {
  if (refuse_special_file("check", path)) return kExitCannot;
  auto inspected = pool::Pool::inspect(path);
  if (!inspected.ok()) {
    const Error& e = inspected.error();
    std::cerr << "cairn pool check: cannot check " << path << ": " << e.message << "\n";
    if (e.code == Errc::truncated || e.code == Errc::foreign_file)
      std::cerr << "(no cairn magic in either header copy: this is not a cairn pool)\n";
    return kExitCannot;
  }
  const pool::Health& h = inspected.value();
  const bool opens = h.open_error.code == Errc::ok;
  std::ostringstream out;
  out << "checking " << path << ": " << human_bytes(h.file_size) << "\n";
  const bool header_ok[2] = {h.header0_ok, h.header1_ok};
  for (int i = 0; i < 2; ++i) {
    out << "  header copy " << i << " at " << (i == 0 ? kHeaderCopy0 : kHeaderCopy1) << ": "
        << part_status(h.header_read[i], header_ok[i]);
    if (header_ok[i] && h.layout_version[i] != kLayoutVersion) out << " (layout version " << h.layout_version[i] << ")";
    out << "\n";
  }
  out << "  root selector at " << kSelectorOffset << ": "
      << (h.selector_read ? std::to_string(h.selector) : std::string("missing")) << "\n";
  const bool table_ok[2] = {h.table0_ok, h.table1_ok};
  for (int i = 0; i < 2; ++i) {
    out << "  root table " << i << " at " << (i == 0 ? kRootTable0 : kRootTable1) << ": "
        << part_status(h.table_read[i], table_ok[i]);
    if (table_ok[i]) out << ", generation " << h.generation[i];
    if (opens && h.live_table == i) out << " (live)";
    out << "\n";
  }
  if (h.problems.empty()) {
    out << "ok: both header copies and both root tables are valid\n";
    std::cout << out.str();
    return kExitOk;
  }
  for (const auto& p : h.problems) out << "problem: " << p << "\n";
  out << h.problems.size() << (h.problems.size() == 1 ? " problem" : " problems");
  if (opens)
    out << " found; the pool still opens (it uses the valid copies)\n";
  else
    out << " found; the pool cannot be opened: " << h.open_error.message << "\n";
  std::cout << out.str();
  return kExitProblems;
}

// Runs a command body; any exception becomes a message and exit code 2.
template <class F>
void run_guarded(const char* name, F&& f) {
  try {
    exit_code() = f();
  } catch (const std::exception& e) {
    std::cerr << "cairn pool " << name << ": internal error: " << e.what() << "\n";
    exit_code() = kExitCannot;
  }
}

}  // namespace

void add_pool_commands(CLI::App& app) {
  static CreateArgs create_args;
  static InfoArgs info_args;
  static std::string check_path;

  CLI::App* pool_cmd = app.add_subcommand("pool", "Create, describe and verify pool files");
  pool_cmd->require_subcommand(1);

  CLI::App* create = pool_cmd->add_subcommand("create", "Create a new pool file (never overwrites an existing file)");
  create->add_option("path", create_args.path, "Path of the pool file to create")->required()->type_name("PATH");
  create
      ->add_option("--size,-s", create_args.size,
                   "Pool size in bytes; K, M, G and T suffixes are powers of 1024 (minimum 1M)")
      ->type_name("SIZE")
      ->capture_default_str();
  create
      ->add_option("--block-size,-b", create_args.block_size,
                   "Arena block size: a power of two from 64 bytes to 64M; allocations are whole blocks")
      ->type_name("SIZE")
      ->capture_default_str();
  create
      ->add_option("--flush", create_args.flush,
                   "How flushes reach durability: auto (cpu on DAX and tmpfs, msync elsewhere), cpu (cache-line "
                   "flush + fence) or msync (page write-back, for non-DAX file systems)")
      ->type_name("auto|cpu|msync")
      ->capture_default_str();
  create->footer(
      "Exit status: 0 created; 1 the pool could not be created (the file exists, the\n"
      "directory is not writable, the device is full, ...); 2 an option value is invalid\n"
      "(including a size below the 1M minimum).");
  create->callback([] { run_guarded("create", [] { return run_create(create_args); }); });

  CLI::App* info = pool_cmd->add_subcommand(
      "info", "Show a pool's header, roots, arena usage and whether its mapping is real persistent memory");
  info->add_option("path", info_args.path, "Path of the pool file")->required()->type_name("PATH");
  info->add_flag("--json", info_args.json, "Print one JSON object instead of text");
  info->footer(
      "Opens the pool (read and write access needed; nothing is written) and prints: magic,\n"
      "layout version, uuid, size, creation time, block size and count, the arena high-water\n"
      "mark (an upper bound on blocks ever in use: allocation state itself lives in DRAM),\n"
      "the live root table and its generation, the non-empty root slots, pmem_is_pmem and\n"
      "the flush mode this process would use.\n"
      "Exit status: 0 shown; 2 the pool cannot be opened (run `cairn pool check`).");
  info->callback([] { run_guarded("info", [] { return run_info(info_args); }); });

  CLI::App* check = pool_cmd->add_subcommand(
      "check", "Verify both header copies, both root tables and the root selector; report every problem");
  check->add_option("path", check_path, "Path of the pool file")->required()->type_name("PATH");
  check->footer(
      "Reads the file without mapping or writing it.\n"
      "Exit status:\n"
      "  0  clean: both header copies and both root tables valid, selector valid\n"
      "  1  problems found; each is listed. This includes a file that still carries the\n"
      "     cairn magic but cannot be opened: both header copies damaged, both root\n"
      "     tables damaged, or truncated\n"
      "  2  cannot check: missing file, permission denied, a directory or other non-regular\n"
      "     file, another layout version, or not a cairn pool at all (no magic in either\n"
      "     header copy)");
  check->callback([] { run_guarded("check", [] { return run_check(check_path); }); });
}

}  // namespace cairn::tool
