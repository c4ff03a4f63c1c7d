// cairn/extended/blocked_array.hpp — a growable array stored as fixed-size chunks, each one persist region (seed 001
// §4.2).
//
// Why: seed 001 found that the layout of the state decides how fast it
// persists. A linked list of small nodes is saved element by element (slow);
// one array sized for the worst case is saved whole, most of it empty (4.8 GB
// instead of 225 MB for Fluidanimate). A blocked array of 2 MB chunks was
// 6.3x faster than either: few large contiguous copies, little waste.
//
// A BlockedArray<T> registers every chunk it may ever need as a region of a
// Context up front, because regions are fixed at open(): "<name>.0",
// "<name>.1", ... of at most chunk_bytes each, plus "<name>.meta", a small
// region holding the element count and the chunk table. Every strategy
// persists them like any other region. A region's memory is fixed from
// open() to the next restore, so elements never move as the array grows:
// linked structures may keep raw pointers between elements, across chunks.
//
//   auto ctx = persist::Context::create({.strategy = "nt-copy"}).value();
//   auto parts = BlockedArray<Particle>::create(*ctx, "particles", 10'000'000).value();
//   ctx->open().value();
//   parts.attach().value();                           // after open, before commit/restore
//   parts.register_pointers(&Particle::next).value(); // either this (few elements) ...
//   if (ctx->committed_version()) {
//     ctx->restore().value();
//     parts.relocate(&Particle::next).value();        // ... or this (any number), not both
//   }
//   parts.push_back(p).value();                       // &parts[i] is stable
//   ctx->commit().value();                            // count, chunks and pointers persist
//
// Two ways to keep pointers between elements valid across a restore:
//   register_pointers(&T::field)  registers the field of all max_size()
//       elements with Context::register_pointer. The targets may lie in any
//       region. Each pointer costs a 16-byte record per commit, registering
//       is quadratic (Context checks each pointer against all others), and
//       strategies with fixed pointer tables (the pool-based ones hold
//       4096 + bytes/4096 records) refuse the commit when there are more:
//       fine for thousands of elements, not for millions.
//   relocate(&T::field, ...)      after Context::restore() (or an attach()
//       that found a stored array in place), rewrites every non-null field of
//       the elements in use from the chunk addresses of the run that
//       committed (kept in the meta region) to this run's. No per-element
//       records, one pass over the elements, any number of them; but the
//       targets must be elements of this same array. Pass all pointer fields
//       in one call.
//
// Elements per chunk are a power of two (the largest whose bytes fit in
// chunk_bytes), so indexing is a shift and a mask; with a power-of-two
// sizeof(T) the chunks are exactly chunk_bytes.
//
// The meta region records the element size, chunk geometry and capacity; a
// restore into an array of another geometry is caught by Context's layout
// check when region sizes differ and by check() / relocate() otherwise.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cairn/error.hpp"
#include "cairn/persist.hpp"

namespace cairn::persist {

// Seed 001 §4.2's chunk size.
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{2} << 20;

// The untyped core of BlockedArray<T> (blocked_array.cpp).
class BlockedArrayBase {
 public:
  // The meta region's fixed part; the chunk table (void*[chunks], registered
  // pointers) and the chunk addresses the stored element pointers refer to
  // (std::uint64_t[chunks]) follow it.
  struct Header {
    std::uint64_t magic;
    std::uint64_t size;  // elements in use
    std::uint64_t elem_bytes;
    std::uint64_t chunk_elems;
    std::uint64_t max_elems;
    std::uint64_t chunks;
  };
  static constexpr std::uint64_t kMagic = 0x3141727241626b63ULL;  // "ckbArrA1"

  const std::string& name() const { return name_; }
  // Elements in use (persisted), and the fixed capacity.
  std::size_t size() const { return attached_ ? static_cast<std::size_t>(header()->size) : 0; }
  bool empty() const { return size() == 0; }
  std::size_t max_size() const { return max_elems_; }
  std::size_t chunk_count() const { return chunks_.size(); }
  std::size_t elements_per_chunk() const { return std::size_t{1} << shift_; }
  // Elements chunk i can hold (the last one may be shorter) and holds now.
  std::size_t chunk_capacity(std::size_t i) const;
  std::size_t chunk_size(std::size_t i) const;
  // The chunk table: chunk i's base address, as persisted in the meta region
  // (relocated by restore). Valid after attach() until the next restore.
  std::span<void* const> chunk_table() const {
    return attached_ ? std::span<void* const>(table(), chunks_.size()) : std::span<void* const>();
  }
  // The regions behind the array, e.g. for Context::flush_async(region).
  const Region& chunk_region(std::size_t i) const { return *chunks_[i]; }
  const Region& meta_region() const { return *meta_; }

  // After Context::open() and before the first commit or restore: registers
  // the chunk table pointers and writes an empty array's meta region, unless
  // the region already holds an array of this geometry (strategies whose
  // working set is in NVM open with the last state in place), which is kept:
  // call clear() to start empty, relocate() to use its links.
  Result<void> attach();
  // Whether the meta region (e.g. after a restore) describes this array.
  Result<void> check() const;
  // Sets the element count; new elements are zero bytes.
  Result<void> resize(std::size_t n);
  void clear() {
    if (attached_) header()->size = 0;
  }

  // One object per array: a copy would be a second, separately attached view.
  BlockedArrayBase(const BlockedArrayBase&) = delete;
  BlockedArrayBase& operator=(const BlockedArrayBase&) = delete;
  BlockedArrayBase(BlockedArrayBase&&) = default;
  BlockedArrayBase& operator=(BlockedArrayBase&&) = default;

 protected:
  BlockedArrayBase() = default;
  ~BlockedArrayBase() = default;
  static Result<void> init(BlockedArrayBase& a, Context& ctx, const std::string& name, std::size_t max_elements,
                           std::size_t elem_bytes, std::size_t elem_align, std::size_t chunk_bytes);

  Header* header() const { return static_cast<Header*>(meta_->data()); }
  void** table() const { return reinterpret_cast<void**>(header() + 1); }
  std::uint64_t* bases() const { return reinterpret_cast<std::uint64_t*>(table() + chunks_.size()); }
  std::byte* element(std::size_t i) const {
    return static_cast<std::byte*>(table()[i >> shift_]) + (i & mask_) * elem_bytes_;
  }
  // Appends one element's bytes; the address of its copy.
  Result<void*> append(const void* value);
  Result<void> register_fields(std::size_t field_offset);
  Result<std::size_t> relocate_fields(const std::size_t* field_offsets, std::size_t count);

  Context* ctx_ = nullptr;
  std::string name_;
  std::vector<Region*> chunks_;
  Region* meta_ = nullptr;
  std::size_t elem_bytes_ = 0, elem_align_ = 1, max_elems_ = 0;
  unsigned shift_ = 0;
  std::size_t mask_ = 0;
  bool attached_ = false;
};

template <class T>
class BlockedArray : public BlockedArrayBase {
  static_assert(std::is_trivially_copyable_v<T>, "a persisted element is copied as bytes");

 public:
  using value_type = T;

  // Registers the chunk and meta regions of an array of at most max_elements
  // with ctx (before ctx.open()). The array refers to ctx, which must outlive it.
  static Result<BlockedArray> create(Context& ctx, const std::string& name, std::size_t max_elements,
                                     std::size_t chunk_bytes = kDefaultChunkBytes) {
    BlockedArray a;
    if (auto r = init(a, ctx, name, max_elements, sizeof(T), alignof(T), chunk_bytes); !r.ok()) return r.error();
    return a;
  }

  // Element i < size() (or < max_size() for slots not yet in use). The
  // address is stable until the next restore.
  T& operator[](std::size_t i) {
    assert(attached_ && i < max_elems_);
    return *reinterpret_cast<T*>(element(i));
  }
  const T& operator[](std::size_t i) const {
    assert(attached_ && i < max_elems_);
    return *reinterpret_cast<const T*>(element(i));
  }
  // Appends a copy of value; Errc::out_of_space when the array is full.
  Result<T*> push_back(const T& value) {
    auto r = append(&value);
    if (!r.ok()) return std::move(r).error();
    return static_cast<T*>(r.value());
  }
  // Chunk i's elements: chunk_size(i) in use, chunk_capacity(i) in all.
  T* chunk(std::size_t i) const { return static_cast<T*>(table()[i]); }

  // Registers `field` of every element slot (all max_size()) as a pointer of
  // the Context; slots not in use get a null field. After attach(), before the
  // first commit or restore. See the header comment for the cost.
  template <class U>
  Result<void> register_pointers(U* T::*field) {
    return register_fields(offset_of(field));
  }

  // After Context::restore(): rewrites the given pointer fields of every
  // element in use, which point into this array as it was in the run that
  // committed, to the same elements now. Returns how many pointers changed.
  // Errc::invalid_argument if a field points outside the array (such fields
  // are left as they are; the others are still rewritten).
  template <class... U>
  Result<std::size_t> relocate(U* T::*... fields) {
    const std::size_t offsets[] = {offset_of(fields)...};
    return relocate_fields(offsets, sizeof...(U));
  }

 private:
  BlockedArray() = default;
  // The field's byte offset, measured on slot 0 (0 before attach(), which the
  // callers then refuse).
  template <class U>
  std::size_t offset_of(U* T::*field) const {
    if (!attached_) return 0;
    const T* t = reinterpret_cast<const T*>(element(0));
    return static_cast<std::size_t>(reinterpret_cast<const std::byte*>(&(t->*field)) -
                                    reinterpret_cast<const std::byte*>(t));
  }
};

}  // namespace cairn::persist
