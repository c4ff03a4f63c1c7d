// context_state.hpp — the state every strategy workload commits
// (strategies.cpp on a borrowed cairn pool, undo_log.cpp on libpmemobj's own
// pool file, fs_explore.cpp on checkpoint files): a persist::Context with a dual region (two versions whose roles
// alternate), a plain region, and a plain region holding two registered
// pointers into the plain one, plus a DRAM mirror of all of it for the model.
// Each change writes a few random words (sometimes whole regions) and re-aims
// the pointers; a version is the mirror's bytes, with pointers as offsets
// into their target region, so versions compare bit for bit wherever the
// regions are mapped.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "persist/layout.hpp"
#include "tests/crashsim/crashsim.hpp"

namespace cairn::testing::crashsim::builtin {

class ContextState {
 public:
  static constexpr std::size_t kDualBytes = 6 * 1024;
  static constexpr std::size_t kPlainBytes = 5 * 1024 + 256;  // not a page multiple
  static constexpr std::size_t kLinks = 2;

  // A new Context with the three regions declared; the caller opens it (its
  // own way), then calls register_pointers().
  Result<void> create_context(const persist::Options& options, const persist::detail::InternalOptions& internal = {}) {
    auto c = persist::detail::create_context(options, internal);
    if (!c.ok()) return std::move(c).error();
    ctx_ = std::move(c.value());
    auto u = ctx_->dual_region("u", kDualBytes);
    auto a = ctx_->region("a", kPlainBytes);
    auto l = ctx_->region("links", kLinks * sizeof(void*));
    if (!u.ok()) return std::move(u).error();
    if (!a.ok()) return std::move(a).error();
    if (!l.ok()) return std::move(l).error();
    u_ = u.value();
    a_ = a.value();
    l_ = l.value();
    dual_.assign(kDualBytes, std::byte{0});
    plain_.assign(kPlainBytes, std::byte{0});
    links_.assign(kLinks, 0);
    return {};
  }
  Result<void> register_pointers() {
    for (std::size_t i = 0; i < kLinks; ++i)
      if (auto r = ctx_->register_pointer(&links()[i]); !r.ok()) return r;
    return {};
  }

  // The dual region is written as a streaming kernel writes it: the whole
  // new version leaves through Context::stream, then stream_fence and
  // streamed (in-place writes nothing back for it).
  void stream_dual(bool on) { streamed_ = on; }

  // The first version: every word written. Starts the iteration itself.
  Result<void> fill(Rng& rng) {
    if (auto r = ctx_->begin(); !r.ok()) return r;
    write_dual(rng, true);
    scribble(plain_.data(), a_->data(), kPlainBytes, rng, true);
    aim_links(rng);
    return {};
  }
  // A later version: a few words of each region, or all of it when
  // whole() says so (asked just before the region is written). Starts the
  // iteration itself; elements it does not update are carried over (seed 004).
  template <class Whole>
  Result<void> change(Rng& rng, Whole&& whole) {
    if (auto r = ctx_->begin(); !r.ok()) return r;
    write_dual(rng, whole());
    scribble(plain_.data(), a_->data(), kPlainBytes, rng, whole());
    aim_links(rng);
    return {};
  }
  // ... a whole region one time in eight.
  Result<void> change(Rng& rng) {
    return change(rng, [&rng] { return rng.below(8) == 0; });
  }

  Result<void> commit(Model& model) {
    model.begin(version(ctx_->version() + 1));
    auto v = ctx_->commit();
    if (!v.ok()) {
      model.abort();
      return std::move(v).error();
    }
    model.end();
    return {};
  }

  // restore(), then the restored state read back as a version.
  Result<Version> restore() {
    auto v = ctx_->restore();
    if (!v.ok()) return std::move(v).error();
    dual_.assign(static_cast<const std::byte*>(u_->read()), static_cast<const std::byte*>(u_->read()) + kDualBytes);
    plain_.assign(a_->as<std::byte>(), a_->as<std::byte>() + kPlainBytes);
    links_.assign(kLinks, 0);
    auto* const base = a_->as<std::byte>();
    for (std::size_t i = 0; i < kLinks; ++i) {
      std::byte* p = links()[i];
      if (p == nullptr) continue;
      if (p < base || p >= base + kPlainBytes)
        return make_error(Errc::corrupted, "restored pointer " + std::to_string(i) + " points outside region 'a'");
      links_[i] = static_cast<std::uint64_t>(p - base) + 1;
    }
    return version(v.value());
  }

  // The working state as version `number` (what a commit now would store).
  Version version(std::uint64_t number) const {
    Version v;
    v.number = number;
    v.bytes = dual_;
    v.bytes.insert(v.bytes.end(), plain_.begin(), plain_.end());
    const auto* l = reinterpret_cast<const std::byte*>(links_.data());
    v.bytes.insert(v.bytes.end(), l, l + kLinks * 8);
    return v;
  }

  persist::Context& context() { return *ctx_; }
  void close() { ctx_.reset(); }
  persist::DualRegion& dual() { return *u_; }
  persist::Region& plain() { return *a_; }
  persist::Region& link_region() { return *l_; }

 private:
  std::byte** links() const { return l_->as<std::byte*>(); }

  // The next version of the dual region: the elements not updated are
  // carried over (seed 004), or, streamed, the mirror (which holds read())
  // is changed and then streamed out whole.
  void write_dual(Rng& rng, bool all) {
    if (!streamed_) {
      u_->carry_over(0, kDualBytes);
      scribble(dual_.data(), u_->write(), kDualBytes, rng, all);
      return;
    }
    scribble(dual_.data(), nullptr, kDualBytes, rng, all);
    ctx_->stream(u_->write(), dual_.data(), kDualBytes);
    ctx_->stream_fence();
    ctx_->streamed(*u_);
  }

  // Changes a few random words (or all of them) in the mirror and, unless
  // null, in the working buffer alike.
  static void scribble(std::byte* mirror, void* work, std::size_t bytes, Rng& rng, bool all) {
    const std::size_t words = bytes / 8;
    const std::size_t n = all ? words : 1 + rng.below(6);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t w = all ? k : rng.below(words);
      const std::uint64_t v = rng();
      std::memcpy(mirror + 8 * w, &v, 8);
      if (work != nullptr) std::memcpy(static_cast<std::byte*>(work) + 8 * w, &v, 8);
    }
  }

  // Each pointer aims at a random word of region a, or is null.
  void aim_links(Rng& rng) {
    for (std::size_t i = 0; i < kLinks; ++i) {
      if (rng.below(4) == 0) {
        links_[i] = 0;
        links()[i] = nullptr;
      } else {
        const std::uint64_t off = 8 * rng.below(kPlainBytes / 8);
        links_[i] = off + 1;
        links()[i] = a_->as<std::byte>() + off;
      }
    }
  }

  std::unique_ptr<persist::Context> ctx_;
  persist::DualRegion* u_ = nullptr;
  persist::Region* a_ = nullptr;
  persist::Region* l_ = nullptr;
  // The model's view of the working state: region bytes, pointers as
  // offset + 1 into region a (0 = null).
  std::vector<std::byte> dual_, plain_;
  std::vector<std::uint64_t> links_;
  bool streamed_ = false;
};

}  // namespace cairn::testing::crashsim::builtin
