// context.cpp — the Context: registration, validation, timing, and the calls
// into the chosen strategy.
#include <libpmem.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "persist/strategy.hpp"

namespace cairn::persist {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Result<void> check_name(const detail::Layout& layout, const std::string& name, std::size_t bytes) {
  if (name.empty() || name.size() >= sizeof(detail::RegionDesc::name))
    return make_error(Errc::invalid_argument, "region name '" + name + "' must have 1 to " +
                                                  std::to_string(sizeof(detail::RegionDesc::name) - 1) + " characters");
  if (bytes == 0) return make_error(Errc::invalid_argument, "region '" + name + "' has zero size");
  for (const auto& e : layout.entries)
    if (e.name == name) return make_error(Errc::invalid_argument, "region '" + name + "' is registered twice");
  return {};
}

}  // namespace

void DualRegion::carry_over(std::size_t offset, std::size_t len) {
  if (offset >= bytes_) return;
  len = std::min(len, bytes_ - offset);
  std::memcpy(static_cast<std::byte*>(write()) + offset, static_cast<const std::byte*>(read()) + offset, len);
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> out;
  for (const auto& r : detail::registry()) out.push_back(r.name);
  return out;
}

Result<Options> load_options(const std::string& config_path) {
  std::ifstream in(config_path);
  if (!in) return make_error(Errc::not_found, config_path + ": cannot read the persistence configuration file");
  Options o;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    auto trim = [](std::string s) {
      const char* ws = " \t\r";
      s.erase(0, s.find_first_not_of(ws));
      s.erase(s.find_last_not_of(ws) + 1);
      return s;
    };
    line = trim(line);
    if (line.empty()) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos)
      return make_error(Errc::invalid_argument,
                        config_path + ":" + std::to_string(lineno) + ": expected 'key = value', got '" + line + "'");
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    auto as_bool = [&](bool& out) -> Result<void> {
      if (value == "true" || value == "1" || value == "yes")
        out = true;
      else if (value == "false" || value == "0" || value == "no")
        out = false;
      else
        return make_error(Errc::invalid_argument, config_path + ":" + std::to_string(lineno) + ": '" + key +
                                                      "' takes true or false, not '" + value + "'");
      return {};
    };
    Result<void> r;
    if (key == "strategy")
      o.strategy = value;
    else if (key == "name")
      o.name = value;
    else if (key == "dir")
      o.dir = value;
    else if (key == "device")
      o.device = value;
    else if (key == "threads") {
      char* end = nullptr;
      long t = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || t < 0 || t > 4096)
        return make_error(Errc::invalid_argument, config_path + ":" + std::to_string(lineno) +
                                                      ": threads must be a whole number from 0 to 4096");
      o.threads = static_cast<unsigned>(t);
    } else if (key == "async_flush")
      r = as_bool(o.async_flush);
    else if (key == "flush")
      r = as_bool(o.flush);
    else if (key == "incremental")
      r = as_bool(o.incremental);
    else if (key == "hdf5")
      r = as_bool(o.hdf5);
    else if (key == "checksums")
      r = as_bool(o.checksums);
    else
      return make_error(Errc::invalid_argument, config_path + ":" + std::to_string(lineno) + ": unknown key '" + key +
                                                    "' (known: strategy, name, dir, device, threads, async_flush, "
                                                    "flush, incremental, hdf5, checksums)");
    if (!r.ok()) return r.error();
  }
  return o;
}

Context::Context() : layout_(std::make_unique<detail::Layout>()) {}
Context::~Context() = default;

Result<std::unique_ptr<Context>> detail::create_context(Options options, const InternalOptions& internal) {
  auto c = Context::create(std::move(options));
  if (c.ok()) c.value()->layout_->internal = internal;
  return c;
}

Result<std::unique_ptr<Context>> Context::create(Options options) {
  if (options.strategy.empty()) {
    const char* env = std::getenv("CAIRN_STRATEGY");
    options.strategy = (env && *env) ? env : "in-place";
  }
  if (options.name.empty() || options.name.find('/') != std::string::npos)
    return make_error(Errc::invalid_argument, "state name '" + options.name + "' must be non-empty and contain no '/'");
  auto s = detail::make_strategy(options.strategy);
  if (!s.ok()) return std::move(s).error();
  if (options.hdf5 && !detail::find_registration(options.strategy)->hdf5)
    return make_error(Errc::invalid_argument,
                      "Options::hdf5 (an HDF5 file per version) is written by the 'file' "
                      "strategy only, not by '" +
                          options.strategy + "'; choose strategy = file or unset hdf5");
  std::unique_ptr<Context> ctx(new Context());
  ctx->options_ = std::move(options);
  ctx->strategy_ = std::move(s.value());
  return ctx;
}

const std::string& Context::strategy() const { return options_.strategy; }

Result<Region*> Context::region(const std::string& name, std::size_t bytes) {
  if (opened_) return make_error(Errc::invalid_argument, "region '" + name + "' registered after open()");
  if (auto r = check_name(*layout_, name, bytes); !r.ok()) return r.error();
  auto reg = std::make_unique<Region>();
  reg->name_ = name;
  reg->bytes_ = bytes;
  Region* p = reg.get();
  layout_->plains.push_back(std::move(reg));
  layout_->entries.push_back({name, bytes, false, p, nullptr});
  return p;
}

Result<Region*> Context::register_region(const std::string& name, void* base, std::size_t bytes) {
  if (detail::find_registration(options_.strategy)->working_set != detail::WorkingSet::dram)
    return make_error(Errc::invalid_argument,
                      "strategy '" + options_.strategy +
                          "' keeps its working set in NVM, so it cannot adopt memory "
                          "the application allocated: get the memory from Context::region() instead "
                          "(Region::span<T>() after open() gives it as an array)");
  if (base == nullptr) return make_error(Errc::invalid_argument, "region '" + name + "' has a null base address");
  auto* b = static_cast<std::byte*>(base);
  for (const auto& e : layout_->entries) {
    if (e.dual || !e.plain->user_memory) continue;
    auto* o = static_cast<std::byte*>(e.plain->data());
    if (b < o + e.bytes && o < b + bytes)
      return make_error(Errc::invalid_argument, "region '" + name + "' overlaps region '" + e.name + "'");
  }
  auto r = region(name, bytes);
  if (!r.ok()) return r;
  r.value()->data_ = base;
  r.value()->user_memory = true;
  return r;
}

Result<DualRegion*> Context::dual_region(const std::string& name, std::size_t bytes) {
  if (opened_) return make_error(Errc::invalid_argument, "region '" + name + "' registered after open()");
  if (auto r = check_name(*layout_, name, bytes); !r.ok()) return r.error();
  auto reg = std::make_unique<DualRegion>();
  reg->name_ = name;
  reg->bytes_ = bytes;
  DualRegion* p = reg.get();
  layout_->pairs.push_back(std::move(reg));
  layout_->entries.push_back({name, bytes, true, nullptr, p});
  return p;
}

Result<void> Context::register_pointer(void** from) {
  if (stats_.commits > 0 || stats_.restores > 0)
    return make_error(Errc::invalid_argument, "pointers must be registered before the first commit or restore");
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  if (from == nullptr || !layout_->locate(from, region, offset) ||
      offset + sizeof(void*) > layout_->entries[region].bytes)
    return make_error(Errc::invalid_argument,
                      "register_pointer: the pointer's own address is not inside any registered region (regions "
                      "that cairn allocates have memory only after open())");
  for (const auto& p : layout_->pointers)
    if (p.first == region && p.second == offset)
      return make_error(Errc::invalid_argument, "register_pointer: this pointer is registered twice");
  layout_->pointers.emplace_back(region, offset);
  return {};
}

Result<void> Context::open() {
  if (opened_) return make_error(Errc::invalid_argument, "open() called twice");
  if (layout_->entries.empty()) return make_error(Errc::invalid_argument, "open(): no region registered");
  if (auto r = strategy_->open(*layout_, options_); !r.ok()) return r;
  opened_ = true;
  version_ = strategy_->committed().value_or(0);
  return {};
}

std::optional<std::uint64_t> Context::committed_version() const {
  if (!opened_) return std::nullopt;
  return strategy_->committed();
}

Result<std::uint64_t> Context::restore() {
  if (!opened_) return make_error(Errc::not_ready, "restore() before open()");
  auto v = strategy_->committed();
  if (!v)
    return make_error(Errc::no_version, "nothing has been committed yet under '" + options_.name + "' with strategy '" +
                                            options_.strategy + "'; start from scratch");
  auto t0 = std::chrono::steady_clock::now();
  if (auto r = strategy_->restore(*layout_); !r.ok()) return r.error();
  stats_.last_restore_seconds = seconds_since(t0);
  ++stats_.restores;
  stats_.bytes_copied = strategy_->bytes_copied;  // Stats: "by commits and restores"
  version_ = *v;
  in_iteration_ = false;
  return *v;
}

Result<void> Context::begin() {
  if (!opened_) return make_error(Errc::not_ready, "begin() before open()");
  if (in_iteration_) return {};
  if (auto r = strategy_->begin(*layout_, version_ + 1); !r.ok()) return r;
  in_iteration_ = true;
  return {};
}

Result<std::uint64_t> Context::commit() {
  if (!opened_) return make_error(Errc::not_ready, "commit() before open()");
  if (!in_iteration_) {
    if (auto r = begin(); !r.ok()) return r.error();
  }
  const std::uint64_t v = version_ + 1;
  auto t0 = std::chrono::steady_clock::now();
  // The versions just written become the latest state.
  for (auto& d : layout_->pairs) detail_access::read_index(*d) ^= 1;
  if (auto r = strategy_->commit(*layout_, v); !r.ok()) {
    for (auto& d : layout_->pairs) detail_access::read_index(*d) ^= 1;
    return r.error();
  }
  const double dt = seconds_since(t0);
  stats_.last_commit_seconds = dt;
  stats_.total_commit_seconds += dt;
  ++stats_.commits;
  version_ = v;
  in_iteration_ = false;
  const auto ds = strategy_->device_stats();
  stats_.nvm_bytes_written = ds.nvm_bytes_written();
  stats_.nvm_lines_written = ds.lines_flushed + ds.nt_bytes / 64;
  stats_.sync_calls = ds.msyncs;
  stats_.synced_bytes = ds.synced_bytes;
  stats_.bytes_copied = strategy_->bytes_copied;
  stats_.incremental_bytes_saved = strategy_->incremental_bytes_saved;
  return v;
}

void Context::flush_async() {
  if (opened_) strategy_->flush_async(*layout_);
}
void Context::flush_async(const DualRegion& region) {
  if (!opened_) return;
  for (std::size_t i = 0; i < layout_->entries.size(); ++i)
    if (layout_->entries[i].pair == &region) strategy_->flush_async_region(*layout_, i);
}
void Context::flush_async(const Region& region) {
  if (!opened_) return;
  for (std::size_t i = 0; i < layout_->entries.size(); ++i)
    if (layout_->entries[i].plain == &region) strategy_->flush_async_region(*layout_, i);
}
void Context::flush_barrier() {
  if (opened_) strategy_->flush_barrier();
}

void Context::stream(void* dst, const void* src, std::size_t len) {
  if (opened_)
    strategy_->stream(dst, src, len);
  else
    stream_copy(dst, src, len);
}
void Context::stream_fence() {
  if (opened_)
    strategy_->stream_fence();
  else
    persist::stream_fence();
}
void Context::streamed(const DualRegion& region) {
  if (!opened_) return;
  for (std::size_t i = 0; i < layout_->entries.size(); ++i)
    if (layout_->entries[i].pair == &region) strategy_->streamed_region(*layout_, i);
}

void stream_copy(void* dst, const void* src, std::size_t len) {
  pmem_memcpy(dst, src, len, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
}
void stream_fence() { pmem_drain(); }

}  // namespace cairn::persist
