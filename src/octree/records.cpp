// records.cpp — the PM-octree's tree header and commit records: create
// (format a pool), restore (read and check the records, rebuild the arena
// from the committed chunks, O(chunks)), versions and remove.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "octree/impl.hpp"

namespace cairn::octree {

using namespace detail;

namespace {

Result<void> check_options(const Options& o) {
  if (o.dims != 2 && o.dims != 3) return make_error(Errc::invalid_argument, "dims must be 2 or 3");
  if (o.data_size > (1u << 20)) return make_error(Errc::invalid_argument, "data_size above 1 MiB per octant");
  if (!(o.threshold_nvbm >= 0 && o.threshold_nvbm < 1))
    return make_error(Errc::invalid_argument, "threshold_nvbm must be in [0, 1)");
  if (!(o.t_transform >= 1)) return make_error(Errc::invalid_argument, "t_transform must be at least 1");
  if (o.first_version < 1 || o.first_version > (1ull << 31))
    return make_error(Errc::invalid_argument, "first_version must be in [1, 2^31]");
  return {};
}

// The tree header and the records of a persisted tree, checked.
struct Records {
  std::uint64_t meta = 0;  // header extent
  const TreeHeader* header = nullptr;
  const Record* committed = nullptr;
  const Record* previous = nullptr;  // the kept version before it (keep_previous), or none
  std::uint64_t previous_at = 0;     // the place of the generation before the committed one
};

Result<Records> read_records(const pool::Pool& pool, const Options& o, std::size_t block_bytes) {
  const std::string& path = pool.path();
  const std::byte* base = pool.base();
  Records r;
  const pool::RootSlot hs = pool.root(kHeaderSlot);
  if (hs.offset == 0 || pool.size() < kHeaderBytes || hs.offset > pool.size() - kHeaderBytes)
    return make_error(Errc::foreign_file,
                      path + " is a cairn pool but not a PM-octree (no tree header in root slot 0)");
  // The header, its records and the chunk table are read as 8-byte words:
  // a root or table off an 8-byte boundary was read misaligned
  // (fuzz/octree_fuzz).
  if (hs.offset % 8 != 0) return make_error(Errc::corrupted, path + ": the tree header is not 8-byte aligned");
  r.meta = hs.offset;
  r.header = reinterpret_cast<const TreeHeader*>(base + r.meta);
  const TreeHeader& h = *r.header;
  if (h.magic != kTreeMagic)
    return make_error(Errc::foreign_file, path + " holds another structure, not a PM-octree (bad tree magic)");
  if (h.checksum != header_checksum(h))
    return make_error(Errc::corrupted, path + ": the tree header fails its checksum");
  if (h.layout != kTreeLayout)
    return make_error(Errc::wrong_version,
                      path + " holds a PM-octree of layout " + std::to_string(h.layout) + "; this build reads layout " +
                          std::to_string(kTreeLayout) +
                          (h.layout < kTreeLayout ? " (layout 2 added block checksums)" : "") +
                          ". Restore it with the cairn build that wrote it, or remove the pool file and start again");
  if (h.dims != static_cast<std::uint32_t>(o.dims) || h.data_size != o.data_size)
    return make_error(Errc::layout_mismatch, path + " holds a " + std::to_string(h.dims) + "D tree with " +
                                                 std::to_string(h.data_size) + "-byte payloads; asked for " +
                                                 std::to_string(o.dims) + "D with " + std::to_string(o.data_size));
  // Every extent the header names lies in the pool (and no product wraps):
  // the record places after the header, the chunk table after them, chunks
  // of at least one block and at most the pool.
  const std::uint64_t size = pool.size();
  const std::uint64_t records_end = r.meta + kHeaderBytes + record_places(h.flags) * kRecordBytes;
  if (h.block_bytes != block_bytes || records_end > size || h.chunk_table < records_end || h.chunk_table > size ||
      h.chunk_table % 8 != 0 || h.chunk_capacity > (size - h.chunk_table) / 8 || h.chunk_bytes < block_bytes ||
      h.chunk_bytes > size)
    return make_error(Errc::corrupted, path + ": the tree header's geometry is inconsistent");
  // The pool falls back to its older root table when the one its selector
  // names is damaged: that table names an older commit record, a tree the
  // application did not persist last. Refused: never a silently older tree.
  const pool::Health& health = pool.health();
  if (health.selector <= 1 && health.live_table != static_cast<int>(health.selector))
    return make_error(Errc::corrupted, path +
                                           ": the pool's live root table is damaged, so the tree's last commit "
                                           "record is lost (the older table names an older version). Restore the "
                                           "pool from another copy, or remove it and start again");
  const pool::RootSlot rs = pool.root(kRecordSlot);
  if (rs.offset == 0)
    return make_error(Errc::no_version, path + ": the tree was never persisted (pm_persistent); nothing to restore");
  if (rs.offset != record_at(r.meta, h.flags, rs.version))
    return make_error(Errc::corrupted, path + ": the commit record is not where the header says");
  r.committed = reinterpret_cast<const Record*>(base + rs.offset);
  const Record& c = *r.committed;
  // Generations are 32 bits in a block; the working one (+1) must fit too.
  const auto* table = reinterpret_cast<const std::uint64_t*>(base + h.chunk_table);
  if (c.magic != kRecordMagic || c.checksum != record_checksum(c) || c.generation != rs.version ||
      c.generation >= 0xFFFFFFFFull || c.chunk_count > h.chunk_capacity ||
      c.table_crc != util::crc32c(0, table, c.chunk_count * 8))
    return make_error(Errc::corrupted,
                      path + ": the commit record of version " + std::to_string(rs.version) + " fails its checks");
  // The version before it, when the tree keeps it: the record in the place
  // of the generation before, one generation older and intact.
  r.previous_at = record_at(r.meta, h.flags, rs.version + record_places(h.flags) - 1);
  const Record& p = *reinterpret_cast<const Record*>(base + r.previous_at);
  if ((h.flags & kKeepsPrevious) != 0 && p.magic == kRecordMagic && p.checksum == record_checksum(p) &&
      p.generation + 1 == c.generation && p.chunk_count <= c.chunk_count &&
      p.table_crc == util::crc32c(0, table, p.chunk_count * 8))
    r.previous = &p;
  return r;
}

// A missing file on restore, as the octree's error: the pool's message would
// advise `cairn pool create`, which makes a plain pool, not an octree.
Error missing_octree(const std::string& path, Error e) {
  if (e.code != Errc::not_found) return e;
  return make_error(Errc::not_found, path +
                                         " does not exist: no PM-octree was created there; create one with "
                                         "octree::Octree::create (C: cairn_octree_create, seed 000: pm_create) "
                                         "and persist it before restoring");
}

}  // namespace

void Octree::Impl::configure(const Options& o) {
  dims_ = o.dims;
  fan_ = 1 << o.dims;
  data_size_ = o.data_size;
  block_bytes_ = block_bytes_for(o.dims, o.data_size, stride_);
  dram_budget_ = o.dram_budget;
  threshold_dram_ = o.threshold_dram;
  threshold_nvbm_ = o.threshold_nvbm;
  t_transform_ = o.t_transform;
  block_lines_ = (block_bytes_ + 63) / 64;
  slab_owner_ = std::make_unique<DramSlab>(block_bytes_);
  slab_ = slab_owner_.get();
}

// A chunk's geometry, and what locate() needs to find a block in O(1).
void Octree::Impl::set_chunk_geometry(std::uint64_t chunk_bytes) {
  blocks_per_chunk_ = chunk_bytes / block_bytes_;
  chunk_words_ = (blocks_per_chunk_ + 63) / 64;
  chunk_span_ = blocks_per_chunk_ * block_bytes_;
  window_shift_ = 63 - __builtin_clzll(chunk_bytes);
  block_inverse_ = 0xFFFFFFFFull / block_bytes_;
}

Octree::Impl::~Impl() {
  if (bg_.joinable()) bg_.join();
}

Result<std::unique_ptr<Octree::Impl>> Octree::Impl::format(pool::Pool& pool, const Options& o, const Internal& in) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  if (pool.root(kHeaderSlot).offset != 0)
    return make_error(Errc::already_exists, pool.path() + " already holds a structure in root slot 0");
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;
  t.configure(o);
  t.internal_ = in;
  t.file_ = pool.path();
  t.pool_ = &pool;
  t.base_ = pool.base();
  t.pool_size_ = pool.size();
  t.charge_reads_ = pool.device().name().starts_with("emulated:");
  pool.arena().reset_empty();
  return guard([&]() -> Result<std::unique_ptr<Impl>> {
    // Chunks: a thirty-second of the pool, between 16 blocks and 1 MiB, or
    // a 4096th of a pool above 4 GiB: restore's work per chunk (the arena,
    // the chunk index, the collector's copies) stays below ~4096 chunks.
    const std::uint64_t bs = pool.arena().block_size();
    const std::uint64_t want =
        std::clamp<std::uint64_t>(pool.size() / 32, t.block_bytes_ * 16,
                                  std::max({std::uint64_t{1} << 20, pool.size() / 4096, t.block_bytes_ * 16}));
    const std::uint64_t chunk_bytes = (want + bs - 1) / bs * bs;
    const std::uint64_t capacity = pool.size() / chunk_bytes + 1;
    const std::uint64_t flags = o.keep_previous ? kKeepsPrevious : 0;
    auto meta = pool.arena().alloc(kHeaderBytes + record_places(flags) * kRecordBytes + capacity * 8);
    if (!meta.ok()) return meta.error();
    t.meta_ = meta.value();
    t.header_ = reinterpret_cast<TreeHeader*>(t.base_ + t.meta_);
    TreeHeader h{};
    h.magic = kTreeMagic;
    h.layout = kTreeLayout;
    h.dims = static_cast<std::uint32_t>(o.dims);
    h.data_size = o.data_size;
    h.block_bytes = static_cast<std::uint32_t>(t.block_bytes_);
    h.chunk_bytes = chunk_bytes;
    h.chunk_table = t.meta_ + kHeaderBytes + record_places(flags) * kRecordBytes;
    h.chunk_capacity = capacity;
    h.flags = flags;
    h.checksum = header_checksum(h);
    pool.memcpy_persist(t.header_, &h, sizeof h);
    t.table_ = reinterpret_cast<std::uint64_t*>(t.base_ + h.chunk_table);
    t.set_chunk_geometry(chunk_bytes);
    t.work_gen_ = static_cast<std::uint32_t>(o.first_version);
    if (auto r = pool.publish_root(kHeaderSlot, t.meta_, 0); !r.ok()) return r.error();
    // The root octant, in the working version only.
    t.work_root_ = t.alloc_block(nullptr);
    std::memset(t.blk(t.work_root_) + sizeof(BlockHeader), 0, t.block_bytes_ - sizeof(BlockHeader));
    return std::move(impl);
  });
}

Result<std::unique_ptr<Octree::Impl>> Octree::Impl::attach(pool::Pool& pool, const Options& o, const Internal& in) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  const std::string& path = pool.path();
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;
  t.configure(o);
  t.internal_ = in;
  t.file_ = path;
  t.pool_ = &pool;
  t.base_ = pool.base();
  t.pool_size_ = pool.size();
  t.charge_reads_ = pool.device().name().starts_with("emulated:");
  auto found = read_records(pool, o, t.block_bytes_);
  if (!found.ok()) return found.error();
  t.meta_ = found.value().meta;
  t.header_ = reinterpret_cast<TreeHeader*>(t.base_ + t.meta_);
  const TreeHeader& h = *t.header_;
  t.table_ = reinterpret_cast<std::uint64_t*>(t.base_ + h.chunk_table);
  t.set_chunk_geometry(h.chunk_bytes);
  const Record* committed = found.value().committed;
  const Record* previous = found.value().previous;
  if (o.version != 0 && o.version != committed->generation) {
    if (previous == nullptr || o.version != previous->generation)
      return make_error(Errc::no_version,
                        path + " holds version " + std::to_string(committed->generation) +
                            (previous != nullptr ? " and " + std::to_string(previous->generation) : std::string()) +
                            ", not version " + std::to_string(o.version));
    // Back to the previous version, durably: first the record of the version
    // before it is voided (its blocks were not kept while the newer version
    // was committed, so it must not pass for a kept version afterwards), then
    // the selector names the previous record again and the newer one is
    // abandoned (the next persist overwrites it).
    const std::uint64_t zero = 0;
    t.pool_->memcpy_persist(t.base_ + record_at(t.meta_, h.flags, previous->generation + 2), &zero, sizeof zero);
    if (auto r = t.pool_->publish_root(kRecordSlot, found.value().previous_at, previous->generation); !r.ok())
      return r.error();
    committed = previous;
    previous = nullptr;
  }
  const Record& rec = *committed;
  // The arena: the header extent and every committed chunk (O(chunks)).
  auto rb = t.pool_->arena().rebuild();
  if (auto m = rb.mark(t.meta_, kHeaderBytes + record_places(h.flags) * kRecordBytes + h.chunk_capacity * 8); !m.ok())
    return m.error();
  for (std::uint64_t c = 0; c < rec.chunk_count; ++c) {
    if (auto m = rb.mark(t.table_[c], h.chunk_bytes); !m.ok())
      return make_error(Errc::corrupted, path + ": chunk " + std::to_string(c) + ": " + m.error().message);
    t.chunks_.push_back(t.table_[c]);
    t.chunk_index_.push_back({t.table_[c], static_cast<std::uint32_t>(c)});
  }
  rb.finish();
  std::sort(t.chunk_index_.begin(), t.chunk_index_.end());
  for (std::uint32_t c = 0; c < t.chunks_.size(); ++c) t.note_chunk(c);
  // Nothing of the restored chunks is believed before its CRC is checked.
  t.unchecked_chunks_ = t.chunks_.size();
  t.unchecked_.assign(t.unchecked_chunks_ * t.chunk_words_, ~std::uint64_t{0});
  t.committed_chunks_ = rec.chunk_count;
  t.committed_gen_ = rec.generation;
  t.work_gen_ = static_cast<std::uint32_t>(rec.generation + 1);
  t.committed_root_ = t.work_root_ = rec.root;
  if (previous != nullptr) {
    t.previous_root_ = previous->root;
    t.previous_gen_ = previous->generation;
  }
  t.depth_ = static_cast<int>(std::min<std::uint64_t>(rec.depth, kMaxLevel));
  t.replaced_older_ = 1;  // the chunks may hold what a lost working version wrote
  auto ok = guard([&]() -> Result<void> {
    (void)t.read_root(rec.root, static_cast<std::uint32_t>(t.committed_gen_), Reader::quiet);
    if (t.previous_root_ != 0)
      (void)t.read_root(t.previous_root_, static_cast<std::uint32_t>(t.committed_gen_), Reader::quiet);
    return {};
  });
  if (!ok.ok()) return ok.error();
  t.bump_ = t.blocks_per_chunk_;
  if (o.background_gc && !t.chunks_.empty())
    t.start_background_gc();
  else if (!t.chunks_.empty()) {
    auto g = guard([&]() -> Result<void> {
      t.collect();
      return {};
    });
    if (!g.ok()) return g.error();
  }
  return impl;
}

Octree::Octree(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Octree::~Octree() = default;

Result<std::unique_ptr<Octree>> Octree::create(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  pool::CreateOptions co;
  co.size = o.pool_size;
  co.reserve_as_used = o.reserve_as_used;
  if (!o.device.empty()) {
    auto d = devices::make_device(o.device);
    if (!d.ok()) return d.error();
    co.device = std::move(d.value());
  }
  auto p = pool::Pool::create(path, std::move(co));
  if (!p.ok()) return p.error();
  auto impl = Impl::format(*p.value(), o, {});
  if (!impl.ok()) return impl.error();
  impl.value()->own_pool(std::move(p.value()));
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<std::unique_ptr<Octree>> Octree::restore(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  pool::OpenOptions oo;
  if (!o.device.empty()) {
    auto d = devices::make_device(o.device);
    if (!d.ok()) return d.error();
    oo.device = std::move(d.value());
  }
  auto p = pool::Pool::open(path, std::move(oo));
  if (!p.ok()) return missing_octree(path, p.error());
  auto impl = Impl::attach(*p.value(), o, {});
  if (!impl.ok()) return impl.error();
  impl.value()->own_pool(std::move(p.value()));
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<Versions> Octree::versions(const std::string& path, const Options& o) {
  if (auto c = check_options(o); !c.ok()) return c.error();
  auto p = pool::Pool::open(path, {});
  if (!p.ok()) return missing_octree(path, p.error());
  std::size_t stride;
  auto found = read_records(*p.value(), o, block_bytes_for(o.dims, o.data_size, stride));
  if (!found.ok()) return found.error();
  Versions v;
  v.committed = found.value().committed->generation;
  if (found.value().previous != nullptr) v.previous = found.value().previous->generation;
  return v;
}

Result<std::unique_ptr<Octree>> detail::Factory::format(pool::Pool& pool, const Options& o, const Internal& in) {
  auto impl = Octree::Impl::format(pool, o, in);
  if (!impl.ok()) return impl.error();
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<std::unique_ptr<Octree>> detail::Factory::attach(pool::Pool& pool, const Options& o, const Internal& in) {
  auto impl = Octree::Impl::attach(pool, o, in);
  if (!impl.ok()) return impl.error();
  return std::unique_ptr<Octree>(new Octree(std::move(impl.value())));
}

Result<void> Octree::remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    const int err = errno;
    return make_error(err == ENOENT ? Errc::not_found : Errc::io_error,
                      "cannot delete " + path + ": " + std::strerror(err));
  }
  return {};
}

}  // namespace cairn::octree
