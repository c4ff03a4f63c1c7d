// parity.cpp — amr-mpi's XOR parity of the ranks' leaves (parity.hpp).
#include "apps/amr-mpi/parity.hpp"

#include <cstring>
#include <filesystem>
#include <functional>
#include <span>

#include "cairn/stream.hpp"
#include "util/hash.hpp"

namespace cairn::apps::amr_mpi {
namespace {

constexpr char kMagic[8] = {'A', 'M', 'R', 'X', 'O', 'R', '0', '1'};

struct Head {
  char magic[8];
  std::uint64_t version, chunk, members, segment_hash;
};

std::uint64_t hash_of(const std::byte* p, std::size_t n) { return util::hash_bytes(p, n); }

// Chunk c of `payload` padded with zeros.
std::function<void(std::size_t, std::byte*)> chunks_of(const std::vector<std::byte>& payload, std::size_t chunk) {
  return [&payload, chunk](std::size_t c, std::byte* out) {
    std::memset(out, 0, chunk);
    const std::size_t lo = c * chunk;
    if (lo < payload.size()) std::memcpy(out, payload.data() + lo, std::min(chunk, payload.size() - lo));
  };
}

// A slot's record in place: its head, the members' lengths and hashes, the segment.
struct Record {
  Head head{};
  const std::uint64_t* lengths = nullptr;
  const std::uint64_t* hashes = nullptr;
  const std::byte* segment = nullptr;
};

Result<Record> parse(std::span<const std::byte> v, const std::string& what) {
  Record r;
  if (v.size() < sizeof(Head)) return make_error(Errc::corrupted, what + ": truncated parity record");
  std::memcpy(&r.head, v.data(), sizeof(Head));
  if (std::memcmp(r.head.magic, kMagic, sizeof kMagic) != 0)
    return make_error(Errc::corrupted, what + ": not an amr-mpi parity record");
  const std::uint64_t need = sizeof(Head) + 16 * r.head.members + r.head.chunk;
  if (r.head.members > 1024 || r.head.chunk > (std::uint64_t{1} << 40) || v.size() != need)
    return make_error(Errc::corrupted, what + ": parity record of the wrong size");
  r.lengths = reinterpret_cast<const std::uint64_t*>(v.data() + sizeof(Head));
  r.hashes = r.lengths + r.head.members;
  r.segment = v.data() + sizeof(Head) + 16 * r.head.members;
  if (hash_of(r.segment, r.head.chunk) != r.head.segment_hash)
    return make_error(Errc::corrupted, what + ": the parity segment fails its checksum");
  return r;
}

}  // namespace

std::vector<std::byte> leaf_payload(std::uint64_t step, const std::vector<LeafRec>& leaves) {
  const std::uint64_t head[2] = {step, leaves.size()};
  std::vector<std::byte> out(sizeof head + leaves.size() * sizeof(LeafRec));
  std::memcpy(out.data(), head, sizeof head);
  if (!leaves.empty()) std::memcpy(out.data() + sizeof head, leaves.data(), leaves.size() * sizeof(LeafRec));
  return out;
}

Result<void> read_leaf_payload(const std::vector<std::byte>& payload, std::uint64_t& step,
                               std::vector<LeafRec>& leaves) {
  std::uint64_t head[2];
  if (payload.size() < sizeof head) return make_error(Errc::corrupted, "a rebuilt payload is truncated");
  std::memcpy(head, payload.data(), sizeof head);
  if (head[1] > (payload.size() - sizeof head) / sizeof(LeafRec))
    return make_error(Errc::corrupted, "a rebuilt payload counts more leaves than it holds");
  step = head[0];
  leaves.resize(head[1]);
  if (head[1] > 0) std::memcpy(leaves.data(), payload.data() + sizeof head, head[1] * sizeof(LeafRec));
  return {};
}

Result<std::unique_ptr<Parity>> Parity::create(const Args& a, int rank, int ranks) {
  auto t = dist::detail::make_topology(MPI_COMM_WORLD, a.ranks_per_node, a.xor_group);
  if (!t.ok()) return t.error();
  std::unique_ptr<Parity> p(new Parity);
  p->topo_ = t.value();
  p->pool_size_ = std::max<std::uint64_t>(8ull << 20, a.pool_size / 4);
  p->members_ = p->members_of(rank);
  MPI_Comm_split(MPI_COMM_WORLD, p->topo_.group_first * p->topo_.ranks_per_node + p->topo_.local, p->topo_.node,
                 &p->group_);
  p->path_ = parity_path(a, rank, ranks);
  return p;
}

Parity::~Parity() {
  if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
}

std::vector<int> Parity::members_of(int r) const {
  const auto [first, count] = topo_.group_of(r / topo_.ranks_per_node);
  std::vector<int> m;
  for (int n = first; n < first + count; ++n) m.push_back(topo_.rank_of(n, r % topo_.ranks_per_node));
  return m;
}

std::string Parity::slot_uri(std::uint64_t version) const {
  return "pmem:" + path_ + "#v" + std::to_string(version % 2);
}

void Parity::remove() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

Result<std::array<std::uint64_t, 2>> Parity::held() const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return make_error(Errc::not_found, path_ + " is missing");
  std::array<std::uint64_t, 2> v{0, 0};
  for (int s = 0; s < 2; ++s) {
    auto in = stream::Stream::open(slot_uri(static_cast<std::uint64_t>(s)), stream::Mode::read);
    if (!in.ok()) {
      if (in.error().code == Errc::no_version || in.error().code == Errc::not_found) continue;  // never written
      return in.error();
    }
    auto r = parse(in.value()->view(), path_);
    if (!r.ok()) return r.error();
    v[static_cast<std::size_t>(s)] = r.value().head.version;
  }
  return v;
}

Result<void> Parity::protect(std::uint64_t version, const std::vector<std::byte>& payload) {
  const std::size_t g = members_.size();
  // Every member's length and hash, then the chunk from the longest.
  const std::uint64_t mine[2] = {payload.size(), hash_of(payload.data(), payload.size())};
  std::vector<std::uint64_t> all(2 * g);
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, group_);
  std::uint64_t longest = 0;
  for (std::size_t m = 0; m < g; ++m) longest = std::max(longest, all[2 * m]);
  const std::size_t chunk = ((longest + g - 2) / (g - 1) + 7) / 8 * 8;
  std::vector<std::byte> segment(chunk);
  bytes_sent_ += dist::detail::xor_reduce_scatter(group_, chunk, chunks_of(payload, chunk), segment.data(), scratch_);
  Head h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = version;
  h.chunk = chunk;
  h.members = g;
  h.segment_hash = hash_of(segment.data(), chunk);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  stream::OpenOptions o;
  o.pool_size = pool_size_;
  auto out = stream::Stream::open(slot_uri(version), stream::Mode::write, o);
  if (!out.ok()) return out.error();
  std::FILE* f = out.value()->file();
  std::fwrite(&h, sizeof h, 1, f);
  for (std::size_t m = 0; m < g; ++m) std::fwrite(&all[2 * m], sizeof(std::uint64_t), 1, f);
  for (std::size_t m = 0; m < g; ++m) std::fwrite(&all[2 * m + 1], sizeof(std::uint64_t), 1, f);
  std::fwrite(segment.data(), 1, chunk, f);
  bytes_stored_ += sizeof h + 16 * g + chunk;
  return out.value()->close();
}

Result<std::vector<std::byte>> Parity::rebuild(std::uint64_t version, int lost, const std::vector<std::byte>& payload) {
  const std::size_t g = members_.size();
  int k = -1;
  for (std::size_t m = 0; m < g; ++m)
    if (members_[m] == lost) k = static_cast<int>(m);
  const bool me = lost == topo_.rank;
  // The survivors' records of `version`: chunk and the lost member's length and hash.
  std::unique_ptr<stream::Stream> in;
  Record rec;
  Result<void> check;
  if (!me) {
    auto s = stream::Stream::open(slot_uri(version), stream::Mode::read);
    if (!s.ok()) {
      check = s.error();
    } else {
      in = std::move(s.value());
      auto r = parse(in->view(), path_);
      if (!r.ok())
        check = r.error();
      else if (r.value().head.version != version || r.value().head.members != g)
        check = make_error(Errc::no_version, path_ + " holds the parity of version " +
                                                 std::to_string(r.value().head.version) + ", not of " +
                                                 std::to_string(version));
      else
        rec = r.value();
    }
  }
  int ok = check.ok() ? 1 : 0, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, group_);
  if (!all)
    return check.ok() ? make_error(Errc::corrupted, "a parity segment of the group cannot be read") : check.error();
  std::uint64_t known[3] = {0, 0, 0};  // chunk, the lost member's length and hash
  if (!me) {
    known[0] = rec.head.chunk;
    known[1] = rec.lengths[k];
    known[2] = rec.hashes[k];
  }
  MPI_Allreduce(MPI_IN_PLACE, known, 3, MPI_UINT64_T, MPI_MAX, group_);
  const std::size_t chunk = known[0];
  std::vector<std::byte> out;
  dist::detail::xor_rebuild(group_, k, chunk, chunks_of(payload, chunk), me ? nullptr : rec.segment,
                            me ? &out : nullptr, scratch_);
  if (!me) return out;
  if (known[1] > out.size() || hash_of(out.data(), known[1]) != known[2])
    return make_error(Errc::corrupted, "rank " + std::to_string(topo_.rank) +
                                           ": the payload rebuilt from its group's parity "
                                           "fails the checksum the group recorded (a survivor's leaves differ)");
  out.resize(known[1]);
  return out;
}

}  // namespace cairn::apps::amr_mpi
