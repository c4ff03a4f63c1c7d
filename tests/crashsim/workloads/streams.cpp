// streams.cpp — pmem: streams under the harness: each step writes a new
// version of one of two streams through the directory's writer path (random
// chunks, sometimes a seek back, growth by doubling from a small hint) and
// commits it with the stream's 8-byte commit word. Recovery attaches the
// directory (rebuilding the arena from it) and reads both streams' committed
// bytes: after any crash each is its old or its new content, never a mix, and
// a dead writer's extents are reclaimed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <span>

#include "stream/directory.hpp"
#include "stream/testing.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

namespace sd = stream::detail;

// A version of several streams: each one's length, then its bytes, in order.
Version streams_version(std::uint64_t number, const std::vector<std::vector<std::byte>>& content) {
  Version v;
  v.number = number;
  for (const auto& c : content) {
    const std::uint64_t n = c.size();
    const auto* p = reinterpret_cast<const std::byte*>(&n);
    v.bytes.insert(v.bytes.end(), p, p + 8);
    v.bytes.insert(v.bytes.end(), c.begin(), c.end());
  }
  return v;
}

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

  Version version() const { return streams_version(commits_, content_); }

  std::uint64_t max_len_;
  bool unflushed_;
  std::uint64_t nonce_ = next_nonce();
  std::uint64_t commits_ = 0;
  std::uint64_t blocks_ = 0;  // of the last recovered version
  std::vector<std::vector<std::byte>> content_;
};

// Writers that die or give up, and the next opener that reclaims their
// extent. Three streams; each step a doomed writer D opens stream s (its
// liveness lock held as PmemWriter holds it: stream.cpp's hooks over a lock
// file standing in for the pool file), writes part of a version (growing
// past its hint at times) and either dies (its lock closed, its entry left
// as a killed process leaves it) or abandons. While D is alive a second
// opener of s is refused (busy); after, the next opener N reclaims D's
// extent and commits a new version of s. At times a live writer B of another
// stream is half-way through its own version meanwhile (its extent must
// survive N's reclaim, then B commits), and readers pin committed versions
// across steps (kept as the previous descriptor or on the retired list,
// freed once released). Right after N's reclaim the arena must hold exactly
// the directory, the committed extents, the pinned ones and the live
// writers' extents: D's is free again, nothing is owned twice. Recovery
// checks every committed and kept extent is apart from every other.
class StreamReclaim final : public Structure {
 public:
  ~StreamReclaim() override {
    for (auto& [off, pin] : pins_) ::close(pin.fd);
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    if (auto r = open_lock_file(); !r.ok()) return r;
    auto d = sd::Directory::format(pool, 4, sd::ofd_hooks(lock_fd_));
    if (!d.ok()) return std::move(d).error();
    content_.assign(kStreams, {});
    for (unsigned s = 0; s < kStreams; ++s) {
      Writer w = open_writer(d.value(), s, 1 + rng.below(600));
      if (w.entry < 0) return w.error;
      content_[s] = draw(rng, 1200);
      if (auto r = fill(d.value(), w, content_[s], rng); !r.ok()) return r;
      if (auto r = close_writer(d.value(), w, content_[s].size()); !r.ok()) return r;
    }
    commits_ = kStreams;
    model.begin(version());
    model.end();
    return {};
  }

  Result<Version> recover(pool::Pool& pool) override {
    if (auto r = open_lock_file(); !r.ok()) return r.error();
    auto d = sd::Directory::attach(pool, sd::ofd_hooks(lock_fd_));
    if (!d.ok()) return std::move(d).error();
    content_.assign(kStreams, {});
    commits_ = 0;
    std::vector<sd::Extent> owned;
    for (unsigned s = 0; s < kStreams; ++s) {
      auto c = d.value().committed(kNames[s]);
      if (!c.ok()) return std::move(c).error();
      if (auto v = d.value().verify(kNames[s], c.value()); !v.ok()) return std::move(v).error();
      content_[s].assign(c.value().data, c.value().data + c.value().desc.length);
      commits_ += c.value().version;
      if (c.value().desc.offset != 0) owned.push_back({c.value().desc.offset, c.value().desc.capacity});
    }
    // No extent is owned twice: the arena's rebuild marks identical extents
    // once, so two streams naming the same bytes would pass it unseen.
    std::sort(owned.begin(), owned.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
    for (std::size_t i = 1; i < owned.size(); ++i)
      if (owned[i - 1].offset + owned[i - 1].capacity > owned[i].offset)
        return make_error(Errc::corrupted,
                          "two committed stream versions share the extent at " + std::to_string(owned[i].offset));
    blocks_ = d.value().committed_blocks();
    return version();
  }

  Result<void> step(pool::Pool& pool, Model& model, Rng& rng) override {
    if (lock_fd_ < 0)
      if (auto r = open_lock_file(); !r.ok()) return r;
    auto attached = sd::Directory::attach(pool, sd::ofd_hooks(lock_fd_));
    if (!attached.ok()) return std::move(attached).error();
    sd::Directory& d = attached.value();
    change_pins(d, rng);
    const unsigned s = static_cast<unsigned>(rng.below(kStreams));
    // A bystander: a live writer of another stream, half-way through.
    std::optional<Writer> by;
    std::vector<std::byte> by_bytes;
    const unsigned t = (s + 1 + static_cast<unsigned>(rng.below(kStreams - 1))) % kStreams;
    if (rng.below(3) == 0) {
      by = open_writer(d, t, 1 + rng.below(900));
      if (by->entry < 0) return by->error;
      by_bytes = draw(rng, 1200);
      if (auto r = fill(d, *by, std::span(by_bytes).first(by_bytes.size() / 2), rng); !r.ok()) return r;
    }
    // The doomed writer: part of a version, then death or abandon.
    Writer doomed = open_writer(d, s, 1 + rng.below(900));
    if (doomed.entry < 0) return doomed.error;
    const auto junk = draw(rng, 2000);
    if (auto r = fill(d, doomed, std::span(junk).first(static_cast<std::size_t>(rng.below(junk.size() + 1))), rng);
        !r.ok())
      return r;
    if (auto busy = d.begin_write(kNames[s], 64, sd::Owner{99, 99}); busy.ok() || busy.error().code != Errc::busy)
      return make_error(Errc::corrupted, std::string("a second writer of stream '") + kNames[s] +
                                             "' was not refused while its first writer was alive");
    if (rng.below(2) == 0) d.abandon(doomed.entry);
    sd::release_liveness(doomed.live_fd);  // dead: as a killed process's lock goes
    // The next opener reclaims the extent and writes a new version.
    auto old = content_;
    content_[s] = draw(rng, 1500);
    ++commits_;
    model.begin(version());
    Writer next = open_writer(d, s, rng.below(2) ? 256 : content_[s].size());
    if (next.entry < 0) return undo(model, old, next.error);
    if (auto r =
            check_accounting(d, pool, by ? std::vector<long>{by->entry, next.entry} : std::vector<long>{next.entry});
        !r.ok())
      return r;
    if (auto r = fill(d, next, content_[s], rng); !r.ok()) return undo(model, old, r.error());
    if (auto r = close_writer(d, next, content_[s].size()); !r.ok()) return undo(model, old, r.error());
    model.end();
    if (by) {
      if (auto r = fill(d, *by, std::span(by_bytes).subspan(by_bytes.size() / 2), rng, by_bytes.size() / 2); !r.ok())
        return r;
      old = content_;
      content_[t] = by_bytes;
      ++commits_;
      model.begin(version());
      if (auto r = close_writer(d, *by, by_bytes.size()); !r.ok()) return undo(model, old, r.error());
      model.end();
    }
    return check_committed(d);
  }

  std::optional<std::uint64_t> blocks_in_use(const Version&) const override { return blocks_; }

 private:
  static constexpr unsigned kStreams = 3;
  static constexpr const char* kNames[kStreams] = {"solution", "size-field", "mesh"};

  struct Writer {
    long entry = -1;
    int live_fd = -1;
    std::uint64_t len = 0;
    Error error;
  };
  struct Pin {
    int fd;
    std::uint64_t capacity;
  };

  // The file whose OFD locks say who is alive (stream.cpp locks bytes of the
  // pool file; any file serves). Each instance has its own: a crashed run's
  // writers hold no lock on the next one's, as after a real crash.
  Result<void> open_lock_file() {
    lock_fd_ = ::memfd_create("crashsim-stream-locks", MFD_CLOEXEC);
    if (lock_fd_ < 0) return make_error(Errc::io_error, std::string("memfd_create: ") + std::strerror(errno));
    return {};
  }
  int reopen_lock_file(int flags) const {
    return ::open(("/proc/self/fd/" + std::to_string(lock_fd_)).c_str(), flags | O_CLOEXEC);
  }

  Writer open_writer(sd::Directory& d, unsigned s, std::uint64_t hint) {
    Writer w;
    auto e = d.begin_write(kNames[s], hint, sd::Owner{++owner_, owner_});
    if (!e.ok()) {
      w.error = std::move(e).error();
      return w;
    }
    w.live_fd = sd::hold_liveness([&] { return reopen_lock_file(O_RDWR); }, d.liveness_byte(e.value()));
    if (w.live_fd < 0) {
      d.abandon(e.value());
      w.error = make_error(Errc::io_error, std::string("liveness lock: ") + std::strerror(errno));
      return w;
    }
    w.entry = e.value();
    return w;
  }

  // Appends `bytes` at `at` in random chunks (a seek back over the first 16
  // bytes, as stream_commit does, when starting at 0).
  Result<void> fill(sd::Directory& d, Writer& w, std::span<const std::byte> bytes, Rng& rng, std::uint64_t at = 0) {
    std::uint64_t pos = 0;
    const std::uint64_t head = at == 0 ? std::min<std::uint64_t>(16, bytes.size()) : 0;
    if (head > 0 && head < bytes.size()) {
      const std::vector<std::byte> zeros(head);
      if (auto r = d.write(w.entry, 0, zeros.data(), zeros.size(), w.len); !r.ok()) return r;
      pos = head;
    }
    while (pos < bytes.size()) {
      const std::uint64_t n = std::min<std::uint64_t>(bytes.size() - pos, 1 + rng.below(400));
      if (auto r = d.write(w.entry, at + pos, bytes.data() + pos, n, w.len); !r.ok()) return r;
      pos += n;
    }
    if (head > 0 && head < bytes.size())
      if (auto r = d.write(w.entry, 0, bytes.data(), head, w.len); !r.ok()) return r;
    return {};
  }

  Result<void> close_writer(sd::Directory& d, Writer& w, std::uint64_t length) {
    auto v = d.finish(w.entry, length);
    sd::release_liveness(w.live_fd);  // after the directory says nobody writes it (PmemWriter::finish)
    if (!v.ok()) return std::move(v).error();
    return {};
  }

  Result<void> undo(Model& model, std::vector<std::vector<std::byte>>& old, Error e) {
    model.abort();
    content_ = old;
    --commits_;
    return e;
  }

  // Readers come and go: pin the live version of a stream, or release a pin.
  void change_pins(sd::Directory& d, Rng& rng) {
    if (!pins_.empty() && rng.below(3) == 0) {
      auto it = std::next(pins_.begin(), static_cast<long>(rng.below(pins_.size())));
      ::close(it->second.fd);
      pins_.erase(it);
    }
    if (rng.below(3) != 0) return;
    auto c = d.committed(kNames[rng.below(kStreams)]);
    if (!c.ok() || c.value().desc.offset == 0 || pins_.count(c.value().desc.offset)) return;
    const int fd = reopen_lock_file(O_RDONLY);
    if (fd < 0) return;
    if (sd::pin_extent(fd, c.value().desc.offset) != 0) {
      ::close(fd);
      return;
    }
    pins_[c.value().desc.offset] = Pin{fd, c.value().desc.capacity};
  }

  // After the reclaim of the next opener: the arena holds the directory, the
  // live version of every stream, every pinned extent and the extents of
  // the live writers `writing`, each once, and nothing else.
  Result<void> check_accounting(sd::Directory& d, pool::Pool& pool, const std::vector<long>& writing) {
    std::map<std::uint64_t, std::uint64_t> held;  // offset -> capacity
    for (unsigned s = 0; s < kStreams; ++s)
      if (auto c = d.committed(kNames[s]); c.ok() && c.value().desc.offset != 0)
        held[c.value().desc.offset] = c.value().desc.capacity;
    for (const auto& [off, pin] : pins_) held[off] = pin.capacity;
    for (long e : writing) {
      const std::uint64_t off = static_cast<std::uint64_t>(d.pending_data(e) - pool.at(0));
      if (held.count(off))
        return make_error(Errc::corrupted, "a live writer's extent at " + std::to_string(off) +
                                               " is held twice (by a committed version, a reader or another writer)");
      held[off] = d.pending_capacity(e);
    }
    std::uint64_t blocks = pool.arena().blocks_for(sd::directory_bytes(static_cast<std::uint32_t>(d.entry_count())));
    std::uint64_t end = 0;
    for (const auto& [off, cap] : held) {
      if (off < end) return make_error(Errc::corrupted, "two held extents overlap at " + std::to_string(off));
      end = off + cap;
      blocks += pool.arena().blocks_for(cap);
    }
    if (blocks != pool.arena().blocks_in_use())
      return make_error(Errc::corrupted, "after the dead writer's extent was reclaimed the arena holds " +
                                             std::to_string(pool.arena().blocks_in_use()) + " blocks, " +
                                             std::to_string(blocks) + " are held (leaked or lost extent)");
    return {};
  }

  Result<void> check_committed(sd::Directory& d) const {
    for (unsigned s = 0; s < kStreams; ++s) {
      auto c = d.committed(kNames[s]);
      if (!c.ok()) return std::move(c).error();
      if (c.value().desc.length != content_[s].size() ||
          (!content_[s].empty() && std::memcmp(c.value().data, content_[s].data(), content_[s].size()) != 0))
        return make_error(Errc::corrupted, std::string("stream '") + kNames[s] + "' reads other bytes than written");
    }
    return {};
  }

  static std::vector<std::byte> draw(Rng& rng, std::uint64_t max_len) {
    std::vector<std::byte> v(static_cast<std::size_t>(rng.below(max_len + 1)));
    for (std::size_t i = 0; i < v.size(); i += 8) {
      const std::uint64_t w = rng();
      std::memcpy(v.data() + i, &w, std::min<std::size_t>(8, v.size() - i));
    }
    return v;
  }

  Version version() const { return streams_version(commits_, content_); }

  int lock_fd_ = -1;
  std::uint64_t owner_ = 1000;  // owner ids, for messages only
  std::map<std::uint64_t, Pin> pins_;
  std::uint64_t commits_ = 0;
  std::uint64_t blocks_ = 0;
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

Workload make_reclaim() {
  Workload w;
  w.name = "stream_reclaim";
  w.description =
      "pmem: streams: writers that die (liveness lock dropped) or abandon mid-write, the next opener reclaiming "
      "the extent and committing; a live writer of another stream meanwhile, readers pinning versions";
  w.pool_size = 1u << 20;
  w.steps = 12;
  w.make = [] { return std::make_unique<StreamReclaim>(); };
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
      make_reclaim(),
  };
}

}  // namespace cairn::testing::crashsim::builtin
