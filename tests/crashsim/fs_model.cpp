// fs_model.cpp — the directory model and the crash states of a pending set.
#include "tests/crashsim/fs_model.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "tests/crashsim/crashsim.hpp"
#include "util/hash.hpp"

namespace cairn::testing::crashsim::fs {
namespace {

bool is_name_op(OpKind k) {
  return k == OpKind::mkdir || k == OpKind::create || k == OpKind::rename || k == OpKind::unlink;
}
bool is_data_op(OpKind k) { return k == OpKind::write || k == OpKind::truncate; }

std::uint64_t hash_bytes(std::uint64_t h, const void* p, std::size_t n) { return util::hash_bytes(p, n, h); }

// Byte i of a file as if zero-extended beyond its end.
std::byte at(const std::vector<std::byte>& v, std::size_t i) { return i < v.size() ? v[i] : std::byte{0}; }

bool block_differs(const std::vector<std::byte>& a, const std::vector<std::byte>& b, std::size_t blk) {
  const std::size_t lo = blk * kFsBlock, hi = lo + kFsBlock;
  const std::size_t common = std::min({hi, a.size(), b.size()});
  if (common > lo && std::memcmp(a.data() + lo, b.data() + lo, common - lo) != 0) return true;
  for (std::size_t i = std::max(lo, common); i < hi && i < std::max(a.size(), b.size()); ++i)
    if (at(a, i) != at(b, i)) return true;
  return false;
}

}  // namespace

const char* op_name(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::mkdir: return "mkdir";
    case OpKind::fsync_parent: return "fsync(parent)";
    case OpKind::create: return "create";
    case OpKind::truncate: return "truncate";
    case OpKind::write: return "write";
    case OpKind::fsync: return "fsync";
    case OpKind::fsync_dir: return "fsync(dir)";
    case OpKind::rename: return "rename";
    case OpKind::unlink: return "unlink";
    case OpKind::unsupported: return "unsupported";
    case OpKind::begin: return "commit-begin";
    case OpKind::end: return "commit-end";
  }
  return "?";
}

std::uint64_t Image::hash() const {
  std::uint64_t h = dir_exists ? 0x51ed270b27ab31ULL : 0x2545f4914f6cdd1dULL;
  for (const auto& [name, data] : files) {
    h = hash_bytes(h, name.data(), name.size());
    h = hash_bytes(h, data.data(), data.size());
  }
  return h;
}

const char* model_name(FsModel m) noexcept { return m == FsModel::posix ? "posix" : "ordered"; }

Result<FsModel> parse_model(const std::string& text) {
  if (text == "posix") return FsModel::posix;
  if (text == "ordered") return FsModel::ordered;
  return make_error(Errc::invalid_argument, "unknown file-system model '" + text + "' (posix, ordered)");
}

Tracker::Tracker(const Image& initial) : ddir_(initial.dir_exists), cdir_(initial.dir_exists) {
  std::uint32_t ino = 1;
  for (const auto& [name, data] : initial.files) {
    inodes_[ino] = Inode{data, data};
    dnames_[name] = ino;
    ++ino;
  }
  cnames_ = dnames_;
}

void Tracker::apply(const Op& op, std::size_t index) {
  switch (op.kind) {
    case OpKind::mkdir: cdir_ = true; break;
    case OpKind::fsync_parent:
      ddir_ = cdir_;
      std::erase_if(pending_, [](const Pending& p) { return p.op->kind == OpKind::mkdir; });
      return;
    case OpKind::create:
      inodes_[op.ino] = Inode{};
      cnames_[op.name] = op.ino;
      break;
    case OpKind::truncate: inodes_[op.ino].current.resize(op.off); break;
    case OpKind::write: {
      auto& c = inodes_[op.ino].current;
      if (c.size() < op.off + op.data.size()) c.resize(op.off + op.data.size());
      if (!op.data.empty()) std::memcpy(c.data() + op.off, op.data.data(), op.data.size());
      break;
    }
    case OpKind::fsync: {
      auto& in = inodes_[op.ino];
      in.durable = in.current;
      std::erase_if(pending_, [&](const Pending& p) { return is_data_op(p.op->kind) && p.op->ino == op.ino; });
      return;
    }
    case OpKind::fsync_dir:
      dnames_ = cnames_;
      std::erase_if(pending_, [](const Pending& p) { return is_name_op(p.op->kind) && p.op->kind != OpKind::mkdir; });
      return;
    case OpKind::rename:
      cnames_[op.to] = op.ino;
      cnames_.erase(op.name);
      break;
    case OpKind::unlink: cnames_.erase(op.name); break;
    case OpKind::unsupported:
    case OpKind::begin:
    case OpKind::end: return;
  }
  pending_.push_back({index, &op});
}

std::uint64_t Tracker::signature() const {
  std::uint64_t h = fs_mix(ddir_, cdir_, dnames_.size(), pending_.size());
  for (const auto& [name, ino] : dnames_) h = fs_mix(hash_bytes(h, name.data(), name.size()), ino);
  for (const auto& p : pending_) h = fs_mix(h, p.index);
  return h;
}

namespace {

// A name operation's effect on a set of names (each operation atomic).
void apply_name_op(const Op& op, bool& dir, std::map<std::string, std::uint32_t>& names) {
  switch (op.kind) {
    case OpKind::mkdir: dir = true; break;
    case OpKind::create: names[op.name] = op.ino; break;
    case OpKind::rename: {
      names[op.to] = op.ino;
      auto it = names.find(op.name);
      if (it != names.end() && it->second == op.ino) names.erase(it);
      break;
    }
    case OpKind::unlink: {
      auto it = names.find(op.name);
      if (it != names.end() && it->second == op.ino) names.erase(it);
      break;
    }
    default: break;
  }
}

struct Unit {
  std::uint32_t ino;
  std::int64_t block;  // -1: the file size
};

}  // namespace

std::uint64_t Tracker::for_each_state(const GenOptions& o, const std::function<bool(std::uint64_t, const Image&)>& fn,
                                      bool* exhaustive) const {
  std::unordered_set<std::uint64_t> seen;
  std::uint64_t count = 0;
  bool stop = false, exh = true;
  auto emit = [&](const Image& img) {
    if (stop || !seen.insert(img.hash()).second) return;
    if (!fn(count++, img)) stop = true;
  };

  // Subsets of the pending name operations (program order within a subset).
  std::vector<std::size_t> name_ops;
  for (std::size_t i = 0; i < pending_.size(); ++i)
    if (is_name_op(pending_[i].op->kind)) name_ops.push_back(i);
  const std::size_t k = name_ops.size();
  std::vector<std::vector<char>> masks;
  if (o.model == FsModel::ordered) {
    for (std::size_t j = 0; j <= k; ++j) {
      std::vector<char> m(k, 0);
      std::fill(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(j), 1);
      masks.push_back(std::move(m));
    }
  } else if (k <= 10) {
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << k); ++bits) {
      std::vector<char> m(k);
      for (std::size_t j = 0; j < k; ++j) m[j] = static_cast<char>((bits >> j) & 1);
      masks.push_back(std::move(m));
    }
  } else {
    exh = false;
    for (std::size_t j = 0; j <= k; ++j) {
      std::vector<char> m(k, 0);
      std::fill(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(j), 1);
      masks.push_back(m);
      if (j < k) {
        std::vector<char> alone(k, 0), omit(k, 1);
        alone[j] = 1;
        omit[j] = 0;
        masks.push_back(std::move(alone));
        masks.push_back(std::move(omit));
      }
    }
    Rng rng(fs_mix(o.seed, o.point, 0xd1, o.depth));
    for (unsigned r = 0; r < 16; ++r) {
      std::vector<char> m(k);
      for (auto& b : m) b = static_cast<char>(rng() & 1);
      masks.push_back(std::move(m));
    }
  }

  for (std::size_t mi = 0; mi < masks.size() && !stop; ++mi) {
    const auto& mask = masks[mi];
    bool dir = ddir_;
    std::map<std::string, std::uint32_t> names = dnames_;
    for (std::size_t j = 0; j < k; ++j)
      if (mask[j]) apply_name_op(*pending_[name_ops[j]].op, dir, names);
    if (!dir) {
      emit(Image{false, {}});
      continue;
    }
    // Data units of the reachable files whose data or size is pending.
    std::vector<std::uint32_t> inos;
    for (const auto& [name, ino] : names) inos.push_back(ino);
    std::sort(inos.begin(), inos.end());
    inos.erase(std::unique(inos.begin(), inos.end()), inos.end());
    std::vector<Unit> units;
    std::map<std::uint32_t, bool> dirty;
    for (auto ino : inos) {
      const Inode& in = inodes_.at(ino);
      dirty[ino] = in.durable != in.current;
      if (!dirty[ino]) continue;
      const std::size_t ds = in.durable.size(), cs = in.current.size();
      if (ds != cs && (o.model == FsModel::posix || cs < ds)) units.push_back({ino, -1});
      const std::size_t blocks = (std::max(ds, cs) + kFsBlock - 1) / kFsBlock;
      for (std::size_t b = 0; b < blocks; ++b)
        if (block_differs(in.durable, in.current, b)) units.push_back({ino, static_cast<std::int64_t>(b)});
    }
    // One file's content for the choices: choice[u] 0 old, 0xff new,
    // otherwise the sectors (bit i: sector i) that are new.
    auto content = [&](std::uint32_t ino, const std::vector<std::uint8_t>& choice) {
      const Inode& in = inodes_.at(ino);
      const std::size_t ds = in.durable.size(), cs = in.current.size();
      std::size_t size = cs;
      bool grown_written = true;
      for (std::size_t u = 0; u < units.size(); ++u) {
        if (units[u].ino != ino) continue;
        if (units[u].block < 0) size = choice[u] ? cs : ds;
        const auto lo = static_cast<std::size_t>(units[u].block) * kFsBlock;
        if (units[u].block >= 0 && lo + kFsBlock > ds && choice[u] != 0xff) grown_written = false;
      }
      if (o.model == FsModel::ordered && cs > ds && !grown_written) size = ds;
      std::vector<std::byte> out(size);
      if (std::min(size, ds) > 0) std::memcpy(out.data(), in.durable.data(), std::min(size, ds));
      for (std::size_t u = 0; u < units.size(); ++u) {
        if (units[u].ino != ino || units[u].block < 0 || choice[u] == 0) continue;
        const auto lo = static_cast<std::size_t>(units[u].block) * kFsBlock;
        for (std::size_t s = 0; s < kFsBlock / kSector; ++s) {
          if (!((choice[u] >> s) & 1)) continue;
          const std::size_t a = lo + s * kSector, b = std::min(a + kSector, size);
          if (a >= b) break;
          const std::size_t have = std::min(b, std::max(a, cs));  // current's bytes end here
          if (have > a) std::memcpy(out.data() + a, in.current.data() + a, have - a);
          std::memset(out.data() + have, 0, b - have);
        }
      }
      return out;
    };
    auto build = [&](const std::vector<std::uint8_t>& choice) {
      Image img;
      for (const auto& [name, ino] : names)
        img.files[name] = dirty[ino] ? content(ino, choice) : inodes_.at(ino).durable;
      return img;
    };
    const std::size_t n = units.size();
    std::vector<std::uint8_t> choice(n, 0);
    if (n < 40 && (std::uint64_t{1} << n) <= o.exhaustive_limit) {
      for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << n) && !stop; ++bits) {
        for (std::size_t u = 0; u < n; ++u) choice[u] = ((bits >> u) & 1) ? 0xff : 0;
        emit(build(choice));
      }
    } else {
      exh = false;
      auto set_all = [&](std::uint8_t v) { std::fill(choice.begin(), choice.end(), v); };
      set_all(0);
      emit(build(choice));
      set_all(0xff);
      emit(build(choice));
      for (std::size_t u = 0; u < n && !stop; ++u) {  // each unit omitted / alone
        set_all(0xff);
        choice[u] = 0;
        emit(build(choice));
        set_all(0);
        choice[u] = 0xff;
        emit(build(choice));
      }
      for (std::size_t j = 1; j < n && !stop; ++j) {  // program-order prefixes
        set_all(0);
        std::fill(choice.begin(), choice.begin() + static_cast<std::ptrdiff_t>(j), 0xff);
        emit(build(choice));
      }
      Rng rng(fs_mix(o.seed, o.point, mi, o.depth));
      for (unsigned r = 0; r < o.random_subsets && !stop; ++r) {
        for (auto& c : choice) c = (rng() & 1) ? 0xff : 0;
        emit(build(choice));
      }
    }
    // Torn blocks (with every name operation applied): some sectors new.
    if (mi + 1 == masks.size()) {
      Rng rng(fs_mix(o.seed, o.point, 0x70, o.depth));
      for (std::size_t u = 0; u < n && !stop; ++u) {
        if (units[u].block < 0) continue;
        for (unsigned t = 0; t < o.torn_per_block && !stop; ++t) {
          for (auto& c : choice) c = (t == 0 || (rng() & 1)) ? 0xff : 0;
          choice[u] = static_cast<std::uint8_t>(1 + rng.below(254));
          emit(build(choice));
        }
      }
    }
  }

  // Program-order prefixes of all pending operations, with intermediate values.
  for (std::size_t j = 0; j <= pending_.size() && !stop; ++j) {
    bool dir = ddir_;
    std::map<std::string, std::uint32_t> names = dnames_;
    std::map<std::uint32_t, std::vector<std::byte>> content;
    auto file = [&](std::uint32_t ino) -> std::vector<std::byte>& {
      auto it = content.find(ino);
      if (it == content.end()) it = content.emplace(ino, inodes_.at(ino).durable).first;
      return it->second;
    };
    for (std::size_t i = 0; i < j; ++i) {
      const Op& op = *pending_[i].op;
      if (is_name_op(op.kind)) {
        apply_name_op(op, dir, names);
      } else if (op.kind == OpKind::truncate) {
        file(op.ino).resize(op.off);
      } else if (op.kind == OpKind::write) {
        auto& c = file(op.ino);
        if (c.size() < op.off + op.data.size()) c.resize(op.off + op.data.size());
        if (!op.data.empty()) std::memcpy(c.data() + op.off, op.data.data(), op.data.size());
      }
    }
    Image img;
    img.dir_exists = dir;
    if (dir)
      for (const auto& [name, ino] : names) img.files[name] = file(ino);
    emit(img);
  }
  if (exhaustive) *exhaustive = exh;
  return count;
}

}  // namespace cairn::testing::crashsim::fs
