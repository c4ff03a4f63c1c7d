// dist_slots.cpp — dist's partner-copy slot file under the harness: the
// holder's side of Context::protect_partner on a SlotFile attached to the
// simulator's pool (src/dist/files.cpp, the code the MPI job runs). Each step
// is one version V of the source's payload: begin(V) empties slot V % 2
// (its commit point: a publish of the root as version 0), the blocks whose
// hash changed since that slot last received them are stored into it with
// plain stores (as MPI_Irecv does), and publish(V) makes the bytes and the
// header durable before the root names V. Recovery opens the slots as a
// restart does and verifies every held slot's checksum: after any crash each
// slot holds nothing, or a version whole, and the other slot keeps its own.
#include <algorithm>
#include <cstring>

#include "dist/files.hpp"
#include "tests/crashsim/workloads/workloads.hpp"

namespace cairn::testing::crashsim::builtin {
namespace {

namespace dd = dist::detail;

class PartnerSlots final : public Structure {
 public:
  Result<void> create(pool::Pool& pool, Model& model, Rng& rng) override {
    auto f = dd::SlotFile::attach(pool, dd::SlotFile::Kind::partner, kHolder, kSource, kRanks, kBytes);
    if (!f.ok()) return std::move(f).error();
    file_ = std::move(f.value());
    payload_.resize(kBytes);
    fill(payload_.data(), kBytes, rng);
    model.begin(version());
    model.end();
    for (std::uint64_t v = 1; v <= 2; ++v)
      if (auto r = protect(model, v); !r.ok()) return r;
    return {};
  }

  Result<Version> recover(pool::Pool& pool) override {
    auto f = dd::SlotFile::attach(pool, dd::SlotFile::Kind::partner, kHolder, kSource, kRanks, kBytes);
    if (!f.ok()) return std::move(f).error();
    file_ = std::move(f.value());
    auto rb = pool.arena().rebuild();
    for (unsigned s = 0; s < 2; ++s)
      if (auto m = rb.mark(pool.root(s).offset, kSlotBytes); !m.ok()) return std::move(m).error();
    rb.finish();
    // What a rebuild would read: every held slot must pass its checksum.
    for (int s = 0; s < 2; ++s)
      if (file_->held(s) != 0 && !file_->verify(s))
        return make_error(Errc::corrupted, "slot " + std::to_string(s) + " holds version " +
                                               std::to_string(file_->held(s)) + " but fails its checksum");
    // The sender's DRAM state after a restart: its lane holds the newest
    // version, and it knows nothing of what the slots received (a full send).
    const int newest = file_->held(0) > file_->held(1) ? 0 : 1;
    payload_.assign(file_->data(newest), file_->data(newest) + kBytes);
    sent_[0].clear();
    sent_[1].clear();
    return version();
  }

  Result<void> step(pool::Pool&, Model& model, Rng& rng) override {
    // The source's next version: a few words changed, a block at times, or
    // everything (a step that moved the whole state).
    const std::uint64_t what = rng.below(8);
    if (what == 0) {
      fill(payload_.data(), kBytes, rng);
    } else if (what == 1) {
      fill(payload_.data() + rng.below(kBytes / dd::kBlock) * dd::kBlock, dd::kBlock, rng);
    } else {
      for (std::uint64_t n = 1 + rng.below(24); n > 0; --n) {
        const std::uint64_t w = rng();
        std::memcpy(payload_.data() + rng.below(kBytes / 8) * 8, &w, 8);
      }
    }
    return protect(model, std::max(file_->held(0), file_->held(1)) + 1);
  }

  std::optional<std::uint64_t> blocks_in_use(const Version&) const override {
    return 2 * ((kSlotBytes + pool::kDefaultBlockSize - 1) / pool::kDefaultBlockSize);
  }

 private:
  static constexpr int kHolder = 1, kSource = 0, kRanks = 2;
  static constexpr std::size_t kBytes = 2 * dd::kBlock;       // two blocks: deltas of one or both
  static constexpr std::uint64_t kSlotBytes = 4096 + kBytes;  // header page + payload (files.cpp)

  static void fill(std::byte* p, std::size_t n, Rng& rng) {
    for (std::size_t i = 0; i < n; i += 8) {
      const std::uint64_t w = rng();
      std::memcpy(p + i, &w, 8);
    }
  }

  // The holder's part of Context::protect_partner for version v.
  Result<void> protect(Model& model, std::uint64_t v) {
    const int s = static_cast<int>(v % 2);
    const auto hashes = dd::block_hashes(payload_.data(), kBytes);
    model.begin(version_with(s, 0));
    if (auto r = file_->begin(v); !r.ok()) {
      model.abort();
      return r;
    }
    model.end();
    for (std::size_t i = 0; i < hashes.size(); ++i)
      if (sent_[s].size() != hashes.size() || sent_[s][i] != hashes[i])
        std::memcpy(file_->data(s) + i * dd::kBlock, payload_.data() + i * dd::kBlock, dd::kBlock);
    model.begin(version_with(s, v));
    if (auto r = file_->publish(v, dd::payload_checksum(hashes)); !r.ok()) {
      model.abort();
      sent_[0].clear();
      sent_[1].clear();
      return r;
    }
    model.end();
    sent_[s] = hashes;
    return {};
  }

  // The slots as they are, or with slot s holding `held` (its bytes the
  // payload's when held is not 0).
  Version version_with(int s, std::uint64_t held) const {
    Version v;
    std::uint64_t h[2] = {file_->held(0), file_->held(1)};
    if (s >= 0) h[s] = held;
    v.number = (h[0] << 32) | h[1];
    for (int i = 0; i < 2; ++i) {
      const auto* p = reinterpret_cast<const std::byte*>(&h[i]);
      v.bytes.insert(v.bytes.end(), p, p + 8);
      if (h[i] == 0) continue;
      const std::byte* b = i == s ? payload_.data() : file_->data(i);
      v.bytes.insert(v.bytes.end(), b, b + kBytes);
    }
    return v;
  }
  Version version() const { return version_with(-1, 0); }

  std::unique_ptr<dd::SlotFile> file_;
  std::vector<std::byte> payload_;
  std::vector<std::uint64_t> sent_[2];  // hashes of the blocks each slot last received (the sender's DRAM)
};

}  // namespace

std::vector<Workload> dist_slot_workloads() {
  Workload w;
  w.name = "dist_partner_slots";
  w.description =
      "dist's partner-copy slot file (SlotFile on the simulator's pool): each version's changed blocks stored "
      "into slot V % 2 between begin (the slot emptied) and publish (bytes, header, root)";
  w.pool_size = 1u << 20;
  w.steps = 12;
  w.make = [] { return std::make_unique<PartnerSlots>(); };
  return {w};
}

}  // namespace cairn::testing::crashsim::builtin
