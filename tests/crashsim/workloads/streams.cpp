// streams.cpp — pmem: streams under the harness: each step writes a new
// version of one of two streams through the directory's writer path (random
// chunks, sometimes a seek back, growth by doubling from a small hint) and
// commits it with the stream's 8-byte commit word. Recovery attaches the
// directory (rebuilding the arena from it) and reads both streams' committed
// bytes: after any crash each is its old or its new content, never a mix, and
// a dead writer's extents are reclaimed.
#include <atomic>
#include <cstring>

#include "stream/directory.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

namespace sd = stream::detail;

class StreamCommits final : public Structure {
 public:
  StreamCommits(std::uint64_t max_len, bool unflushed) : max_len_(max_len), unflushed_(unflushed) {}

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    auto d = sd::Directory::format(pool, 4, hooks());
    if (!d.ok()) return std::move(d).error();
    content_.assign(2, {});
    for (unsigned s = 0; s < 2; ++s)
      if (auto r = write_version(d.value(), s, rng); !r.ok()) return r;
    commits_ = 2;
    model.begin(version());
    model.end();
    return {};
  }

  Result<Version> recover(pool::Pool& pool) override {
    auto d = sd::Directory::attach(pool, hooks());
    if (!d.ok()) return std::move(d).error();
    content_.assign(2, {});
    commits_ = 0;
    for (unsigned s = 0; s < 2; ++s) {
      auto c = d.value().committed(kNames[s]);
      if (!c.ok()) return std::move(c).error();
      if (auto v = d.value().verify(kNames[s], c.value()); !v.ok()) return std::move(v).error();
      content_[s].assign(c.value().data, c.value().data + c.value().desc.length);
      commits_ += c.value().version;
    }
    blocks_ = d.value().committed_blocks();
    return version();
  }

  Result<void> step(pool::Pool& pool, Model& model, Rng& rng) override {
    auto d = sd::Directory::attach(pool, hooks());
    if (!d.ok()) return std::move(d).error();
    const unsigned s = static_cast<unsigned>(rng.below(2));
    auto old = content_;
    // The model's in-flight version is known before the commit point.
    Rng peek = rng;
    content_[s] = draw(peek);
    ++commits_;
    model.begin(version());
    content_ = old;
    if (auto r = write_version(d.value(), s, rng); !r.ok()) {
      model.abort();
      content_ = old;
      --commits_;
      return r;
    }
    model.end();
    return {};
  }

  // The directory and the committed extents, nothing else: a crashed writer's
  // extent is reclaimed by recovery (condition 2's leak check).
  std::optional<std::uint64_t> blocks_in_use(const Version&) const override { return blocks_; }

 private:
  static constexpr const char* kNames[2] = {"solution", "size-field"};

  // This instance is the one live writer; a crashed instance's writer (in a
  // crash image) is dead, as after a real crash.
  sd::Owner me() const { return sd::Owner{1, nonce_}; }
  sd::Hooks hooks() const {
    sd::Hooks h;
    h.alive = [n = nonce_](std::uint64_t, const sd::Owner& o) { return o.pid == 1 && o.nonce == n; };
    return h;
  }
  static std::uint64_t next_nonce() {
    static std::atomic<std::uint64_t> n{1};
    return n++;
  }

  std::vector<std::byte> draw(Rng& rng) const {
    std::vector<std::byte> v(static_cast<std::size_t>(rng.below(max_len_ + 1)));
    for (std::size_t i = 0; i < v.size(); i += 8) {
      const std::uint64_t w = rng();
      std::memcpy(v.data() + i, &w, std::min<std::size_t>(8, v.size() - i));
    }
    return v;
  }

  Result<void> write_version(sd::Directory& d, unsigned s, Rng& rng) {
    content_[s] = draw(rng);
    const auto& bytes = content_[s];
    const std::uint64_t hint = rng.below(2) ? 512 : bytes.size();
    auto e = d.begin_write(kNames[s], hint, me());
    if (!e.ok()) return std::move(e).error();
    std::uint64_t len = 0, pos = 0;
    // The first 16 bytes are written last, after a seek back (fprintf of a
    // header whose counts are known only at the end).
    const std::uint64_t head = std::min<std::uint64_t>(16, bytes.size());
    if (head < bytes.size()) {
      std::vector<std::byte> zeros(head);
      if (auto r = d.write(e.value(), 0, zeros.data(), zeros.size(), len); !r.ok()) return r;
    }
    pos = head;
    while (pos < bytes.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(bytes.size() - pos, 1 + rng.below(300));
      if (unflushed_) {
        // Broken: plain stores, never flushed; the commit word still follows.
        if (pos + n > d.pending_capacity(e.value()))
          if (auto r = d.grow(e.value(), 2 * (pos + n), len); !r.ok()) return r;
        std::memcpy(d.pending_data(e.value()) + pos, bytes.data() + pos, n);
        len = std::max(len, pos + n);
      } else if (auto r = d.write(e.value(), pos, bytes.data() + pos, n, len); !r.ok()) {
        return r;
      }
      pos += n;
    }
    if (auto r = d.write(e.value(), 0, bytes.data(), head, len); !r.ok()) return r;
    auto v = d.finish(e.value(), bytes.size());
    if (!v.ok()) return std::move(v).error();
    return {};
  }

  Version version() const {
    Version v;
    v.number = commits_;
    for (const auto& c : content_) {
      const std::uint64_t n = c.size();
      const auto* p = reinterpret_cast<const std::byte*>(&n);
      v.bytes.insert(v.bytes.end(), p, p + 8);
      v.bytes.insert(v.bytes.end(), c.begin(), c.end());
    }
    return v;
  }

  std::uint64_t max_len_;
  bool unflushed_;
  std::uint64_t nonce_ = next_nonce();
  std::uint64_t commits_ = 0;
  std::uint64_t blocks_ = 0;  // of the last recovered version
  std::vector<std::vector<std::byte>> content_;
};

Workload make(const char* name, const char* what, std::uint64_t max_len, unsigned steps, bool broken) {
  Workload w;
  w.name = name;
  w.description = what;
  w.pool_size = 1u << 20;
  w.steps = steps;
  w.broken = broken;
  w.make = [=] { return std::make_unique<StreamCommits>(max_len, broken); };
  return w;
}

}  // namespace

std::vector<Workload> stream_workloads() {
  return {
      make("stream_commit",
           "pmem: streams: versions of two streams written in chunks (growth, a seek back), each committed by its "
           "8-byte commit word",
           1500, 16, false),
      make("stream_commit.unflushed", "broken: stream bytes written with plain stores, then committed", 1500, 8, true),
  };
}

}  // namespace cairn::testing::crashsim::builtin
