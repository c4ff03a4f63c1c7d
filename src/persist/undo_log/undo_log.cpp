// undo_log.cpp — `undo-log`: libpmemobj undo-log transactions over a working
// set in NVM, as seed 001 §3.2.1 (Listing 2) does it: snapshot, then modify.
//
// The pool is <dir>/<name>.obj, a libpmemobj pool with layout "cairn-undo-log".
// Its root object holds an UndoHeader, the registration descriptors and one
// PMEMoid per region buffer (a plain region has one object, a DualRegion two);
// the pointer table is another object the header names. The regions' memory IS
// those objects: the application computes on NVM directly.
//
// One transaction spans each iteration (pmemobj_tx_begin's function form,
// which may span calls, rather than the TX_BEGIN block):
//   begin   pmemobj_tx_begin, then pmemobj_tx_add_range over every plain
//           region and the write() object of every dual region: libpmemobj
//           copies each range into its undo log and persists it before
//           add_range returns, so from here on the application may modify
//           them in place;
//   commit  the pointer table and the header's version, dual parity and
//           layout hash are changed inside the same transaction (their ranges
//           added first); pmemobj_tx_commit flushes every added range, then
//           discards the log — that is the commit point. pmemobj_tx_end.
// A crash at any moment before the commit point is rolled back by
// pmemobj_open, which applies the undo log: the regions, the pointer table and
// the header are the last committed version again, whole. So committed() is
// the header's version and restore() only relocates pointers and sets every
// DualRegion's read index from the stored parity: no data moves.
//
// Payload checksums: commit writes, inside the same transaction, a table of
// one CRC-32C per 64 KiB chunk of every region's committed bytes (the header
// names it); restore() checks them before relocating pointers, so damaged
// bytes are Errc::corrupted, never a different state. That costs one read of
// the state per commit and per restore on the calling thread. Registered
// pointers are read as zero by both (see ChunkSums).
//
// The next transaction is begun as soon as open(), commit() or restore()
// finishes, so application writes made without an explicit begin() are
// covered too. libpmemobj transactions belong to the thread that began them:
// use a Context with this strategy from one thread (other threads may write
// the regions; only begin/commit/restore must come from that thread), and
// keep one undo-log Context per thread, since a thread has one transaction.
//
// Options::device and Options::threads are not used: libpmemobj does its own
// flushing, on the calling thread — the single-threaded persistence whose cost
// seed 001 measured. It exposes no flush counters (pmemobj_ctl has heap
// statistics only), so device_stats() estimates NVM bytes written as twice the
// bytes added to transactions (the undo-log copy, then the ranges' flush at
// commit) plus the rollbacks done by aborts.
#include <libpmem.h>
#include <libpmemobj.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "cairn/extended/pool.hpp"
#include "persist/strategy.hpp"
#include "util/crc32c.hpp"
#include "util/io.hpp"

namespace cairn::persist::detail {
namespace {

// libpmemobj writes back every range a transaction logs and every range it
// commits with its own msync where the pool is not on DAX, so on an ordinary
// file system (ext4, XFS; not tmpfs, whose msync writes nothing) each commit
// costs several times a file checkpoint's (issue 39: 5-37x on ext4, 228
// msyncs per commit of 512 KiB) and no cairn device can change that. A user
// is told once per pool and process, on stderr; CAIRN_NO_WARNINGS=1
// silences it.
void warn_if_on_page_cache(const std::string& path, PMEMobjpool* pop) {
  if (pmem_is_pmem(pop, 4096) != 0) return;
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0 || fs.f_type == TMPFS_MAGIC) return;
  if (const char* quiet = std::getenv("CAIRN_NO_WARNINGS"); quiet != nullptr && std::string(quiet) == "1") return;
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard lk(mu);
  if (!warned.insert(path).second) return;
  std::fprintf(stderr,
               "cairn: warning: the undo-log pool %s is on a file system without DAX: libpmemobj writes back "
               "every logged range with msync, so each commit costs several times a file checkpoint's (5-37x "
               "measured on ext4). Outside DAX and /dev/shm prefer --strategy in-place, shadow or file, which "
               "write back in few calls (CAIRN_NO_WARNINGS=1 silences this).\n",
               path.c_str());
}

constexpr const char* kLayoutName = "cairn-undo-log";
constexpr std::uint64_t kUndoMagic = 0x474F4C4F444E5541ULL;  // "AUNDOLOG"
constexpr std::uint32_t kUndoFormat = 1;
constexpr std::uint64_t kPointerTableType = 2;  // libpmemobj type numbers
constexpr std::uint64_t kRegionType = 1;
constexpr std::uint64_t kChecksumType = 3;
constexpr std::size_t kChunk = 64 * 1024;  // bytes per checksum, as SlotStore's

// At the start of the root object; then RegionDesc[region_count], then
// PMEMoid[region_count][2].
struct UndoHeader {
  // Written once when the pool is initialised.
  std::uint64_t magic;
  std::uint32_t format;
  std::uint32_t header_bytes;
  std::uint64_t region_count;
  std::uint64_t desc_offset;  // from the start of the root object
  std::uint64_t oids_offset;
  std::uint64_t checksum;  // over the fields above
  std::uint64_t reserved[2];
  // Changed by every commit, inside its transaction.
  std::uint64_t version;        // 0: nothing committed
  std::uint64_t parity;         // read index of every DualRegion in that version
  std::uint64_t layout_hash;    // Layout::hash() at that commit, pointers included
  std::uint64_t pointer_count;  // records in the pointer table
  PMEMoid pointers;             // PointerRecord[pointer_count], OID_NULL if none
  // One CRC-32C per 64 KiB chunk of every region's committed bytes, regions
  // in order (kChecksumType); OID_NULL: that version is unchecked (committed
  // with Options::checksums off, or by a cairn before the table existed,
  // whose pools left these 16 bytes zero).
  PMEMoid checksums;
};
static_assert(sizeof(PMEMoid) == 16);
static_assert(offsetof(UndoHeader, version) == 64);
static_assert(sizeof(UndoHeader) == 128);

std::uint64_t header_checksum(const UndoHeader& h) { return pool::checksum64(&h, offsetof(UndoHeader, checksum)); }

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// A libpmemobj failure as a typed error naming the file. errno and
// pmemobj_errormsg() are read at once, before anything can change them.
Error pmemobj_error(const std::string& path, const std::string& what, Errc fallback, int err = -1) {
  if (err < 0) err = errno;
  const char* msg = pmemobj_errormsg();
  const Errc mapped = util::errc_from_errno(err);
  const Errc code = mapped == Errc::io_error ? fallback : mapped;
  std::string m = path + ": " + what + " failed";
  if (msg != nullptr && *msg != '\0') m += ": " + std::string(msg);
  if (err > 0) m += " (" + std::string(std::strerror(err)) + ")";
  return make_error(code, m);
}

class UndoLog final : public Strategy {
 public:
  ~UndoLog() override;
  std::string name() const override { return "undo-log"; }

  Result<void> open(Layout& layout, const Options& options) override;
  Result<void> open_pool(Layout& layout, const Options& options);
  std::optional<std::uint64_t> committed() const override;
  Result<void> restore(Layout& layout) override;
  Result<void> begin(Layout& layout, std::uint64_t version) override;
  Result<void> commit(Layout& layout, std::uint64_t version) override;
  devices::Stats device_stats() const override;

 private:
  UndoHeader* header() const { return static_cast<UndoHeader*>(pmemobj_direct(root_)); }
  RegionDesc* descs() const {
    return reinterpret_cast<RegionDesc*>(reinterpret_cast<std::byte*>(header()) + header()->desc_offset);
  }
  PMEMoid* oids() const {
    return reinterpret_cast<PMEMoid*>(reinterpret_cast<std::byte*>(header()) + header()->oids_offset);
  }
  Result<void> initialise(const Layout& layout);
  Result<void> attach(Layout& layout);
  Result<void> check_thread(const char* what) const;
  // libpmemobj nests a pmemobj_tx_begin into the thread's open transaction,
  // and aborts that one if it belongs to another pool: refuse first.
  Result<void> check_no_foreign_tx() const;
  // pmemobj_tx_begin and the snapshot of every range this iteration may write.
  Result<void> begin_tx(const Layout& layout);
  // Rolls the open transaction back (the regions return to the committed state).
  void abort_tx();
  // The committed bytes of region i: a plain region's object, a dual
  // region's read() buffer.
  const std::byte* committed_bytes(const Layout& layout, std::size_t i) const;
  // Inside commit's transaction: the checksum table of the version being
  // committed (or none, with Options::checksums off).
  Result<void> write_checksums(const Layout& layout, std::uint64_t version);
  // restore's check of the committed bytes against the table.
  Result<void> verify_checksums(const Layout& layout) const;

  std::string path_;
  PMEMobjpool* pop_ = nullptr;
  PMEMoid root_ = OID_NULL;
  bool tx_open_ = false;
  bool tx_pristine_ = false;  // begun by open(): nothing has used it yet
  std::thread::id tx_thread_;
  std::uint64_t tx_bytes_ = 0;      // bytes added to the open transaction
  std::uint64_t nvm_estimate_ = 0;  // see the top of the file
  bool checksums_ = true;           // Options::checksums
};

std::size_t chunks_of(std::size_t bytes) { return (bytes + kChunk - 1) / kChunk; }

UndoLog::~UndoLog() {
  if (pop_ == nullptr) return;
  // An iteration that was never committed: roll it back, as a crash would.
  if (tx_open_ && tx_thread_ == std::this_thread::get_id()) abort_tx();
  pmemobj_close(pop_);
}

std::optional<std::uint64_t> UndoLog::committed() const {
  const std::uint64_t v = header()->version;
  if (v == 0) return std::nullopt;
  return v;
}

devices::Stats UndoLog::device_stats() const {
  devices::Stats s;
  s.bytes_flushed = nvm_estimate_;
  s.lines_flushed = nvm_estimate_ / 64;
  return s;
}

Result<void> UndoLog::check_thread(const char* what) const {
  if (!tx_open_ || tx_thread_ == std::this_thread::get_id()) return {};
  return make_error(Errc::invalid_argument, path_ + ": " + what +
                                                " called on another thread than the one whose libpmemobj transaction "
                                                "is open (libpmemobj transactions are per thread): call open, begin, "
                                                "commit and restore from one thread");
}

Result<void> UndoLog::check_no_foreign_tx() const {
  if (pmemobj_tx_stage() == TX_STAGE_NONE) return {};
  return make_error(Errc::invalid_argument,
                    path_ +
                        ": another libpmemobj transaction is open on this thread (another undo-log Context, whose "
                        "iteration spans until its commit); use one undo-log Context per thread");
}

Result<void> UndoLog::open(Layout& layout, const Options& options) {
  auto r = open_pool(layout, options);
  if (!r.ok() && pop_ != nullptr) {
    // Nothing stays attached: libpmemobj locks the file while it is open.
    pmemobj_close(pop_);
    pop_ = nullptr;
  }
  return r;
}

Result<void> UndoLog::open_pool(Layout& layout, const Options& options) {
  auto dir = make_storage_dir(options);
  if (!dir.ok()) return std::move(dir).error();
  path_ = dir.value() + "/" + options.name + ".obj";
  checksums_ = options.checksums;
  if (auto r = check_no_foreign_tx(); !r.ok()) return r;

  std::size_t objects = 0, ranges = 0;
  for (const auto& e : layout.entries) {
    if (e.bytes > PMEMOBJ_MAX_ALLOC_SIZE)
      return make_error(Errc::out_of_space, path_ + ": region '" + e.name + "' has " + std::to_string(e.bytes) +
                                                " bytes; a libpmemobj object holds at most " +
                                                std::to_string(PMEMOBJ_MAX_ALLOC_SIZE));
    // Objects larger than a 256 KiB chunk take whole chunks plus a header.
    const std::size_t one = round_up(e.bytes + 64, 256 * 1024);
    objects += one * (e.dual ? 2 : 1);
    ranges += one;
  }
  const std::size_t root_bytes =
      sizeof(UndoHeader) + layout.entries.size() * (sizeof(RegionDesc) + 2 * sizeof(PMEMoid));

  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return make_error(Errc::is_directory, path_ + " is a directory, not a libpmemobj pool; choose another name");
  if (!exists) {
    // The data, an undo log as large as every range a transaction adds, and
    // slack for libpmemobj's own metadata (lanes, heap headers) and for the
    // pointer table.
    const std::size_t data = objects + ranges;
    const std::size_t size = std::max(PMEMOBJ_MIN_POOL, data + data / 8 + (16u << 20) + root_bytes);
    pop_ = pmemobj_create(path_.c_str(), kLayoutName, size, 0600);
    if (pop_ == nullptr)
      return pmemobj_error(path_, "pmemobj_create of " + std::to_string(size) + " bytes", Errc::io_error);
  } else {
    // pmemobj_open rolls back a transaction a crash interrupted: afterwards
    // the pool holds exactly the last committed version.
    pop_ = pmemobj_open(path_.c_str(), kLayoutName);
    if (pop_ == nullptr)
      return pmemobj_error(path_, "pmemobj_open (layout \"" + std::string(kLayoutName) + "\")",
                           errno == EINVAL ? Errc::foreign_file : Errc::io_error);
  }
  warn_if_on_page_cache(path_, pop_);
  if (pmemobj_root_size(pop_) == 0 || static_cast<UndoHeader*>(pmemobj_direct(pmemobj_root(pop_, 0)))->magic == 0) {
    // New, or a crash interrupted the initialisation (its transaction was
    // rolled back, leaving the zeroed root).
    root_ = pmemobj_root(pop_, root_bytes);
    if (OID_IS_NULL(root_)) return pmemobj_error(path_, "pmemobj_root", Errc::out_of_space);
    if (pmemobj_root_size(pop_) < root_bytes)
      return make_error(Errc::corrupted, path_ + ": the root object is smaller than its header");
    if (auto r = initialise(layout); !r.ok()) return r;
  } else {
    root_ = pmemobj_root(pop_, 0);
  }
  if (auto r = attach(layout); !r.ok()) return r;
  if (auto r = begin_tx(layout); !r.ok()) return r;
  tx_pristine_ = true;
  return {};
}

Result<void> UndoLog::initialise(const Layout& layout) {
  // One transaction: a crash leaves either the whole initial state or the
  // zeroed root, and the region objects allocated here are freed by rollback.
  if (auto r = check_no_foreign_tx(); !r.ok()) return r;
  if (pmemobj_tx_begin(pop_, nullptr, TX_PARAM_NONE) != 0) {
    const int err = pmemobj_tx_errno();
    pmemobj_tx_end();
    return pmemobj_error(path_, "pmemobj_tx_begin", Errc::io_error, err);
  }
  pmemobj_tx_set_failure_behavior(POBJ_TX_FAILURE_RETURN);
  auto fail = [&](const std::string& what, Errc code) {
    const int err = errno;
    Error e = pmemobj_error(path_, what, code, err);
    pmemobj_tx_abort(err != 0 ? err : ECANCELED);
    pmemobj_tx_end();
    return e;
  };
  const std::size_t n = layout.entries.size();
  if (pmemobj_tx_add_range(root_, 0, pmemobj_root_size(pop_)) != 0) return fail("snapshot of the root", Errc::io_error);
  UndoHeader h{};
  h.magic = kUndoMagic;
  h.format = kUndoFormat;
  h.header_bytes = sizeof(UndoHeader);
  h.region_count = n;
  h.desc_offset = sizeof(UndoHeader);
  h.oids_offset = sizeof(UndoHeader) + n * sizeof(RegionDesc);
  h.checksum = header_checksum(h);
  h.pointers = OID_NULL;
  std::memcpy(header(), &h, sizeof h);
  const auto d = layout.descriptors();
  if (n > 0) std::memcpy(descs(), d.data(), n * sizeof(RegionDesc));
  for (std::size_t i = 0; i < n; ++i) {
    const Entry& e = layout.entries[i];
    for (int k = 0; k < 2; ++k) {
      PMEMoid oid = OID_NULL;
      if (k == 0 || e.dual) {
        oid = pmemobj_tx_xalloc(e.bytes, kRegionType, POBJ_XALLOC_ZERO);
        if (OID_IS_NULL(oid))
          return fail("allocating " + std::to_string(e.bytes) + " bytes for region '" + e.name + "'",
                      Errc::out_of_space);
      }
      oids()[2 * i + k] = oid;
    }
  }
  pmemobj_tx_commit();
  if (const int err = pmemobj_tx_end(); err != 0)
    return pmemobj_error(path_, "initialising the pool (transaction)", Errc::io_error, err);
  return {};
}

Result<void> UndoLog::attach(Layout& layout) {
  if (pmemobj_root_size(pop_) < sizeof(UndoHeader))
    return make_error(Errc::corrupted, path_ + ": the root object is smaller than its header");
  const UndoHeader& h = *header();
  if (h.magic != kUndoMagic || h.checksum != header_checksum(h))
    return make_error(Errc::corrupted, path_ + ": the undo-log state header is damaged (bad magic or checksum)");
  if (h.format != kUndoFormat)
    return make_error(Errc::wrong_version, path_ + ": undo-log state format " + std::to_string(h.format) +
                                               ", this cairn reads " + std::to_string(kUndoFormat));
  if (h.region_count > (1u << 20) || h.oids_offset + 2 * h.region_count * sizeof(PMEMoid) > pmemobj_root_size(pop_))
    return make_error(Errc::corrupted,
                      path_ + ": the root object is too small for its " + std::to_string(h.region_count) + " regions");
  // The region objects are this layout's memory, so a pool saved with other
  // regions cannot be opened for this one.
  std::vector<RegionDesc> stored(descs(), descs() + h.region_count);
  const auto mine = layout.descriptors();
  if (stored.size() != mine.size() ||
      (!mine.empty() && std::memcmp(stored.data(), mine.data(), mine.size() * sizeof(RegionDesc)) != 0)) {
    auto r = layout.check_same(stored, h.pointer_count, ~layout.hash());
    return make_error(Errc::layout_mismatch, path_ + ": " + r.error().message);
  }
  const int parity = static_cast<int>(h.parity & 1);
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    Entry& e = layout.entries[i];
    for (int k = 0; k < (e.dual ? 2 : 1); ++k) {
      const PMEMoid oid = oids()[2 * i + k];
      if (OID_IS_NULL(oid) || pmemobj_alloc_usable_size(oid) < e.bytes)
        return make_error(Errc::corrupted, path_ + ": the object of region '" + e.name + "' is missing or too small");
      if (e.dual)
        detail_access::buf(*e.pair, k) = pmemobj_direct(oid);
      else
        detail_access::data(*e.plain) = pmemobj_direct(oid);
    }
    // The committed version is read(); the transaction snapshots write().
    if (e.dual) detail_access::read_index(*e.pair) = parity;
  }
  return {};
}

Result<void> UndoLog::begin_tx(const Layout& layout) {
  if (auto r = check_no_foreign_tx(); !r.ok()) return r;
  if (pmemobj_tx_begin(pop_, nullptr, TX_PARAM_NONE) != 0) {
    const int err = pmemobj_tx_errno();
    pmemobj_tx_end();
    return pmemobj_error(path_, "pmemobj_tx_begin", Errc::io_error, err);
  }
  // Failures return an error number instead of aborting, so each one can be
  // reported with its range; we abort ourselves.
  pmemobj_tx_set_failure_behavior(POBJ_TX_FAILURE_RETURN);
  std::uint64_t added = 0;
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const Entry& e = layout.entries[i];
    // Snapshot, then modify: the buffer this iteration writes.
    const PMEMoid oid = e.dual ? oids()[2 * i + (1 - detail_access::read_index(*e.pair))] : oids()[2 * i];
    if (const int rc = pmemobj_tx_add_range(oid, 0, e.bytes); rc != 0) {
      Error err = pmemobj_error(
          path_, "pmemobj_tx_add_range of region '" + e.name + "' (" + std::to_string(e.bytes) + " bytes)",
          rc == ENOMEM ? Errc::out_of_space : Errc::io_error, rc);
      pmemobj_tx_abort(rc);
      pmemobj_tx_end();
      nvm_estimate_ += added;  // what the aborted snapshot wrote
      return err;
    }
    added += e.bytes;
  }
  tx_open_ = true;
  tx_pristine_ = false;
  tx_thread_ = std::this_thread::get_id();
  tx_bytes_ = added;
  bytes_copied += added;   // the undo-log copies
  nvm_estimate_ += added;  // the log, persisted by add_range
  return {};
}

void UndoLog::abort_tx() {
  pmemobj_tx_abort(ECANCELED);
  pmemobj_tx_end();
  tx_open_ = false;
  // The rollback copies every snapshot back and persists it.
  bytes_copied += tx_bytes_;
  nvm_estimate_ += tx_bytes_;
  tx_bytes_ = 0;
}

Result<void> UndoLog::begin(Layout& layout, std::uint64_t /*version*/) {
  if (auto r = check_thread("begin()"); !r.ok()) return r;
  tx_pristine_ = false;
  if (tx_open_) return {};  // begun when the last open/commit/restore finished
  return begin_tx(layout);
}

Result<void> UndoLog::restore(Layout& layout) {
  if (auto r = check_thread("restore()"); !r.ok()) return r;
  const UndoHeader& h = *header();
  std::vector<RegionDesc> stored(descs(), descs() + h.region_count);
  if (auto r = layout.check_same(stored, h.pointer_count, h.layout_hash); !r.ok())
    return make_error(r.error().code, path_ + ": " + r.error().message);
  // The regions already hold the committed version (pmemobj_open rolled back
  // any interrupted transaction). A transaction that has been used since —
  // an iteration in progress — is rolled back: restore means "the committed
  // state". The one begun by open() is kept (a restore right after open
  // moves no data).
  if (tx_open_ && !tx_pristine_) abort_tx();
  const int parity = static_cast<int>(h.parity & 1);
  for (auto& d : layout.pairs) detail_access::read_index(*d) = parity;
  if (!tx_open_)
    if (auto r = begin_tx(layout); !r.ok()) return r;
  tx_pristine_ = false;  // from here on the application works in it
  if (auto r = verify_checksums(layout); !r.ok()) return r;
  std::vector<PointerRecord> records(h.pointer_count);
  if (!records.empty()) {
    if (OID_IS_NULL(h.pointers) || pmemobj_alloc_usable_size(h.pointers) < records.size() * sizeof(PointerRecord))
      return make_error(Errc::corrupted, path_ + ": the pointer table is missing or too small");
    std::memcpy(records.data(), pmemobj_direct(h.pointers), records.size() * sizeof(PointerRecord));
  }
  // Relocation writes pointers into the latest buffers: plain regions are in
  // the transaction; in a dual region's read() the stored bytes do not matter,
  // since every restore rewrites them from the table.
  return layout.apply_pointers(records);
}

Result<void> UndoLog::commit(Layout& layout, std::uint64_t version) {
  if (auto r = check_thread("commit()"); !r.ok()) return r;
  // Context calls begin() before switching the dual roles, so the
  // transaction is open here and covers the buffers just written.
  if (!tx_open_) return make_error(Errc::not_ready, path_ + ": commit() without an open transaction (begin() failed)");
  tx_pristine_ = false;
  std::vector<PointerRecord> ptrs;
  // A pointer that cannot be recorded fails the commit; the transaction stays
  // open with the iteration's writes, so the application can fix it and retry.
  if (auto r = layout.capture_pointers(ptrs); !r.ok()) return r;

  UndoHeader* h = header();
  auto fail = [&](const std::string& what, int rc) {
    Error e = pmemobj_error(path_, what, rc == ENOMEM ? Errc::out_of_space : Errc::io_error, rc);
    // Leave the transaction open: nothing of this commit has reached the
    // committed state, and the application's writes are still covered.
    return e;
  };
  // The header's mutable fields and the pointer table join the transaction
  // before they change, so a crash before the commit point restores them too.
  if (const int rc = pmemobj_tx_add_range_direct(&h->version, sizeof(UndoHeader) - offsetof(UndoHeader, version));
      rc != 0)
    return fail("pmemobj_tx_add_range of the header", rc);
  const std::size_t table_bytes = ptrs.size() * sizeof(PointerRecord);
  if (h->pointer_count != ptrs.size() || (table_bytes != 0 && OID_IS_NULL(h->pointers))) {
    // The table changes size (the first commit with pointers): replace it,
    // inside the transaction, so a rollback frees the new one.
    if (!OID_IS_NULL(h->pointers)) {
      if (const int rc = pmemobj_tx_free(h->pointers); rc != 0) return fail("pmemobj_tx_free of the pointer table", rc);
      h->pointers = OID_NULL;  // a retry after a failure below must not free it twice
    }
    PMEMoid table = OID_NULL;
    if (table_bytes != 0) {
      table = pmemobj_tx_alloc(table_bytes, kPointerTableType);
      if (OID_IS_NULL(table)) return fail("allocating the pointer table", errno);
    }
    h->pointers = table;
  } else if (table_bytes != 0) {
    if (const int rc = pmemobj_tx_add_range(h->pointers, 0, table_bytes); rc != 0)
      return fail("pmemobj_tx_add_range of the pointer table", rc);
  }
  if (table_bytes != 0) std::memcpy(pmemobj_direct(h->pointers), ptrs.data(), table_bytes);
  h->pointer_count = ptrs.size();
  h->layout_hash = layout.hash();
  // Context has switched the roles: read() is the version just written.
  h->parity = layout.pairs.empty() ? 0 : static_cast<std::uint64_t>(detail_access::read_index(*layout.pairs.front()));
  h->version = version;
  if (auto r = write_checksums(layout, version); !r.ok()) return r;

  // The commit point: libpmemobj flushes every added range, then retires the
  // undo log; after that no recovery can bring the old version back.
  pmemobj_tx_commit();
  const int err = pmemobj_tx_end();
  tx_open_ = false;
  nvm_estimate_ += tx_bytes_ + table_bytes + sizeof(UndoHeader);
  tx_bytes_ = 0;
  if (err != 0) {
    // libpmemobj aborted the transaction: the regions were rolled back to the
    // last committed version.
    return pmemobj_error(path_,
                         "committing version " + std::to_string(version) + " (the iteration's writes were rolled back)",
                         Errc::io_error, err);
  }
  // The next iteration's transaction, at once. If it cannot begin, begin()
  // (explicit, or the one commit() makes) retries and reports the error.
  (void)begin_tx(layout);
  return {};
}

// Checksums read every registered pointer's 8 bytes as zero: restore
// rewrites them from the pointer table for this run's addresses, in a dual
// region's committed buffer itself (outside the transaction), so their bytes
// on media are not the version's and differ from run to run.
class ChunkSums {
 public:
  explicit ChunkSums(const Layout& layout) : at_(layout.entries.size()) {
    for (const auto& [region, offset] : layout.pointers) at_[region].push_back(offset);
    for (auto& v : at_) std::sort(v.begin(), v.end());
  }
  // The CRC-32C of bytes [at, at + n) of region i, at `data`.
  std::uint32_t operator()(std::size_t i, const std::byte* data, std::size_t at, std::size_t n) {
    const auto& ptrs = at_[i];
    auto p = std::lower_bound(ptrs.begin(), ptrs.end(), at < sizeof(void*) ? 0 : at - sizeof(void*) + 1);
    if (p == ptrs.end() || *p >= at + n) return util::crc32c(0, data + at, n);
    scratch_.assign(data + at, data + at + n);
    for (; p != ptrs.end() && *p < at + n; ++p)
      for (std::size_t b = *p; b < *p + sizeof(void*); ++b)
        if (b >= at && b < at + n) scratch_[b - at] = std::byte{0};
    return util::crc32c(0, scratch_.data(), n);
  }

 private:
  std::vector<std::vector<std::uint64_t>> at_;  // per region: where its registered pointers are
  std::vector<std::byte> scratch_;
};

const std::byte* UndoLog::committed_bytes(const Layout& layout, std::size_t i) const {
  const Entry& e = layout.entries[i];
  return static_cast<const std::byte*>(e.dual ? e.pair->read() : e.plain->data());
}

Result<void> UndoLog::write_checksums(const Layout& layout, std::uint64_t version) {
  UndoHeader* h = header();
  std::size_t chunks = 0;
  for (const Entry& e : layout.entries) chunks += chunks_of(e.bytes);
  const std::size_t bytes = chunks * sizeof(std::uint32_t);
  const auto fail = [&](const std::string& what, int rc) {
    return pmemobj_error(path_, what + " (version " + std::to_string(version) + ")",
                         rc == ENOMEM ? Errc::out_of_space : Errc::io_error, rc);
  };
  if (!checksums_ || bytes == 0 || OID_IS_NULL(h->checksums) || pmemobj_alloc_usable_size(h->checksums) < bytes) {
    if (!OID_IS_NULL(h->checksums)) {
      if (const int rc = pmemobj_tx_free(h->checksums); rc != 0) return fail("pmemobj_tx_free of the checksums", rc);
      h->checksums = OID_NULL;
    }
    if (!checksums_ || bytes == 0) return {};
    const PMEMoid table = pmemobj_tx_alloc(bytes, kChecksumType);
    if (OID_IS_NULL(table)) return fail("allocating the checksum table", errno);
    h->checksums = table;
  } else if (const int rc = pmemobj_tx_add_range(h->checksums, 0, bytes); rc != 0) {
    return fail("pmemobj_tx_add_range of the checksum table", rc);
  }
  auto* table = static_cast<std::uint32_t*>(pmemobj_direct(h->checksums));
  ChunkSums sum(layout);
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const std::byte* data = committed_bytes(layout, i);
    const std::size_t n = layout.entries[i].bytes;
    for (std::size_t at = 0; at < n; at += kChunk) *table++ = sum(i, data, at, std::min(kChunk, n - at));
  }
  nvm_estimate_ += bytes;
  return {};
}

Result<void> UndoLog::verify_checksums(const Layout& layout) const {
  const UndoHeader& h = *header();
  if (OID_IS_NULL(h.checksums)) return {};  // an unchecked version
  std::size_t chunks = 0;
  for (const Entry& e : layout.entries) chunks += chunks_of(e.bytes);
  if (pmemobj_alloc_usable_size(h.checksums) < chunks * sizeof(std::uint32_t))
    return make_error(Errc::corrupted, path_ + ": the checksum table of version " + std::to_string(h.version) +
                                           " is smaller than its " + std::to_string(chunks) +
                                           " chunks; the pool is damaged: restore it from a copy");
  const auto* table = static_cast<const std::uint32_t*>(pmemobj_direct(h.checksums));
  ChunkSums sum(layout);
  for (std::size_t i = 0; i < layout.entries.size(); ++i) {
    const std::byte* data = committed_bytes(layout, i);
    const std::size_t n = layout.entries[i].bytes;
    for (std::size_t at = 0; at < n; at += kChunk, ++table)
      if (sum(i, data, at, std::min(kChunk, n - at)) != *table)
        return make_error(Errc::corrupted,
                          path_ + ": region '" + layout.entries[i].name + "' of version " + std::to_string(h.version) +
                              " is damaged (bytes " + std::to_string(at) + "-" +
                              std::to_string(std::min(at + kChunk, n) - 1) +
                              " do not match their checksum); the pool is damaged: restore it from a copy");
  }
  return {};
}

}  // namespace

std::unique_ptr<Strategy> make_undo_log() { return std::make_unique<UndoLog>(); }

}  // namespace cairn::persist::detail
