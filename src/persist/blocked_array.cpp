// blocked_array.cpp — the untyped core of BlockedArray<T>: chunk geometry, the meta region, pointer fields.
#include "cairn/extended/blocked_array.hpp"

#include <algorithm>
#include <numeric>

namespace cairn::persist {
namespace {

// The longest region name a Context accepts (RegionDesc::name holds 48 bytes).
constexpr std::size_t kMaxRegionName = 47;

std::uint64_t load_word(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store_word(std::byte* p, std::uint64_t v) { std::memcpy(p, &v, sizeof v); }

}  // namespace

Result<void> BlockedArrayBase::init(BlockedArrayBase& a, Context& ctx, const std::string& name,
                                    std::size_t max_elements, std::size_t elem_bytes, std::size_t elem_align,
                                    std::size_t chunk_bytes) {
  static_assert(sizeof(void*) == sizeof(std::uint64_t), "pointer fields are relocated as 64-bit words");
  if (max_elements == 0)
    return make_error(Errc::invalid_argument, "blocked array '" + name + "': max_elements must be at least 1");
  if (elem_bytes == 0 || elem_bytes > chunk_bytes)
    return make_error(Errc::invalid_argument, "blocked array '" + name + "': an element of " +
                                                  std::to_string(elem_bytes) + " bytes does not fit a chunk of " +
                                                  std::to_string(chunk_bytes) + " bytes");
  const std::size_t chunk_elems = std::bit_floor(chunk_bytes / elem_bytes);
  const std::size_t chunks = (max_elements + chunk_elems - 1) / chunk_elems;
  // Checked here, before any region is registered, so that the common
  // mistake leaves the Context untouched.
  const std::string last = std::to_string(chunks - 1);
  const std::string longest = name + "." + (last.size() > 4 ? last : std::string("meta"));
  if (name.empty() || longest.size() > kMaxRegionName)
    return make_error(Errc::invalid_argument, "blocked array name '" + name + "' must be 1 to " +
                                                  std::to_string(kMaxRegionName - (longest.size() - name.size())) +
                                                  " characters: its regions are named '" + longest + "' and alike");

  a.ctx_ = &ctx;
  a.name_ = name;
  a.elem_bytes_ = elem_bytes;
  a.elem_align_ = elem_align;
  a.max_elems_ = max_elements;
  a.shift_ = static_cast<unsigned>(std::countr_zero(chunk_elems));
  a.mask_ = chunk_elems - 1;
  auto meta = ctx.region(name + ".meta", sizeof(Header) + chunks * (sizeof(void*) + sizeof(std::uint64_t)));
  if (!meta.ok()) return meta.error();
  a.meta_ = meta.value();
  a.chunks_.reserve(chunks);
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t elems = std::min(chunk_elems, max_elements - k * chunk_elems);
    auto r = ctx.region(name + "." + std::to_string(k), elems * elem_bytes);
    if (!r.ok()) return r.error();
    a.chunks_.push_back(r.value());
  }
  return {};
}

std::size_t BlockedArrayBase::chunk_capacity(std::size_t i) const {
  const std::size_t first = i << shift_;
  return first >= max_elems_ ? 0 : std::min(elements_per_chunk(), max_elems_ - first);
}

std::size_t BlockedArrayBase::chunk_size(std::size_t i) const {
  const std::size_t first = i << shift_, n = size();
  return first >= n ? 0 : std::min(elements_per_chunk(), n - first);
}

Result<void> BlockedArrayBase::attach() {
  if (attached_) return make_error(Errc::invalid_argument, "blocked array '" + name_ + "': attach() called twice");
  if (meta_->data() == nullptr)
    return make_error(Errc::not_ready,
                      "blocked array '" + name_ + "': attach() needs the memory Context::open() gives");
  for (const Region* c : chunks_)
    if (reinterpret_cast<std::uintptr_t>(c->data()) % elem_align_ != 0)
      return make_error(Errc::unsupported, "blocked array '" + name_ + "': region '" + c->name() +
                                               "' is not aligned for its elements (" + std::to_string(elem_align_) +
                                               " bytes)");
  // The chunk table is registered before anything is written: if the Context
  // has committed or restored already, this fails and the state is untouched.
  void** t = reinterpret_cast<void**>(static_cast<Header*>(meta_->data()) + 1);
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    if (auto r = ctx_->register_pointer(&t[k]); !r.ok())
      return make_error(r.error().code, "blocked array '" + name_ + "': " + r.error().message +
                                            " (call attach() after Context::open() and before the first commit or "
                                            "restore)");
  }
  // Strategies whose working set is in NVM (undo-log, shadow) open with the
  // last state in place, and undo-log's restore does not rewrite it: keep an
  // array of this geometry found there. Elsewhere the memory is fresh (zero).
  Header* h = static_cast<Header*>(meta_->data());
  const bool found = h->magic == kMagic && h->elem_bytes == elem_bytes_ && h->chunk_elems == elements_per_chunk() &&
                     h->max_elems == max_elems_ && h->chunks == chunks_.size() && h->size <= max_elems_;
  if (!found) {
    h->magic = kMagic;
    h->size = 0;
    h->elem_bytes = elem_bytes_;
    h->chunk_elems = elements_per_chunk();
    h->max_elems = max_elems_;
    h->chunks = chunks_.size();
  }
  attached_ = true;
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    table()[k] = chunks_[k]->data();
    // A found array's element pointers still refer to the chunks of the run
    // that wrote them; relocate() needs those addresses.
    if (!found) bases()[k] = reinterpret_cast<std::uintptr_t>(chunks_[k]->data());
  }
  return {};
}

Result<void> BlockedArrayBase::check() const {
  if (!attached_) return make_error(Errc::not_ready, "blocked array '" + name_ + "': not attached");
  const Header& h = *header();
  auto mismatch = [&](const char* what, std::uint64_t stored, std::uint64_t here) {
    return make_error(Errc::layout_mismatch, "blocked array '" + name_ + "': the stored array has " + what + " " +
                                                 std::to_string(stored) + ", this one " + std::to_string(here));
  };
  if (h.magic != kMagic)
    return make_error(Errc::layout_mismatch, "blocked array '" + name_ + "': region '" + meta_->name() +
                                                 "' does not hold a blocked array header");
  if (h.elem_bytes != elem_bytes_) return mismatch("elements of bytes", h.elem_bytes, elem_bytes_);
  if (h.chunk_elems != elements_per_chunk()) return mismatch("elements per chunk", h.chunk_elems, elements_per_chunk());
  if (h.max_elems != max_elems_) return mismatch("capacity", h.max_elems, max_elems_);
  if (h.chunks != chunks_.size()) return mismatch("chunks", h.chunks, chunks_.size());
  if (h.size > h.max_elems)
    return make_error(Errc::corrupted, "blocked array '" + name_ + "': " + std::to_string(h.size) +
                                           " elements in use exceed the capacity " + std::to_string(h.max_elems));
  for (std::size_t k = 0; k < chunks_.size(); ++k)
    if (table()[k] != chunks_[k]->data())
      return make_error(Errc::corrupted, "blocked array '" + name_ + "': chunk table entry " + std::to_string(k) +
                                             " does not point at region '" + chunks_[k]->name() + "'");
  return {};
}

Result<void> BlockedArrayBase::resize(std::size_t n) {
  if (!attached_) return make_error(Errc::not_ready, "blocked array '" + name_ + "': resize() before attach()");
  if (n > max_elems_)
    return make_error(Errc::out_of_space, "blocked array '" + name_ + "': " + std::to_string(n) +
                                              " elements exceed its capacity of " + std::to_string(max_elems_));
  // Zero the new elements chunk by chunk (a chunk's elements are contiguous).
  for (std::size_t i = size(); i < n;) {
    const std::size_t run = std::min(n - i, elements_per_chunk() - (i & mask_));
    std::memset(element(i), 0, run * elem_bytes_);
    i += run;
  }
  header()->size = n;
  return {};
}

Result<void*> BlockedArrayBase::append(const void* value) {
  if (!attached_) return make_error(Errc::not_ready, "blocked array '" + name_ + "': push_back() before attach()");
  Header* h = header();
  if (h->size >= max_elems_)
    return make_error(Errc::out_of_space, "blocked array '" + name_ + "' is full: its capacity of " +
                                              std::to_string(max_elems_) +
                                              " elements was fixed when its regions were registered");
  std::byte* p = element(h->size);
  std::memcpy(p, value, elem_bytes_);
  ++h->size;
  return static_cast<void*>(p);
}

Result<void> BlockedArrayBase::register_fields(std::size_t field_offset) {
  if (!attached_)
    return make_error(Errc::not_ready, "blocked array '" + name_ + "': register_pointers() before attach()");
  const std::size_t n = size();
  for (std::size_t i = 0; i < max_elems_; ++i) {
    std::byte* field = element(i) + field_offset;
    if (i >= n) store_word(field, 0);  // unused slots hold no stale target
    if (auto r = ctx_->register_pointer(reinterpret_cast<void**>(field)); !r.ok())
      return make_error(r.error().code,
                        "blocked array '" + name_ + "', element " + std::to_string(i) + ": " + r.error().message);
  }
  return {};
}

Result<std::size_t> BlockedArrayBase::relocate_fields(const std::size_t* field_offsets, std::size_t count) {
  if (auto r = check(); !r.ok()) return r.error();
  const std::size_t nchunks = chunks_.size();
  std::vector<std::uint64_t> old_base(bases(), bases() + nchunks), old_end(nchunks), new_base(nchunks);
  for (std::size_t k = 0; k < nchunks; ++k) {
    old_end[k] = old_base[k] + chunks_[k]->bytes();
    new_base[k] = reinterpret_cast<std::uintptr_t>(chunks_[k]->data());
  }
  // No shortcut when no chunk moved: the scan also finds stray pointers.
  // Chunks by old address, for a binary search per pointer.
  std::vector<std::size_t> order(nchunks);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return old_base[x] < old_base[y]; });

  std::size_t changed = 0, outside = 0, first_bad = 0;
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    std::byte* e = element(i);
    for (std::size_t f = 0; f < count; ++f) {
      std::byte* field = e + field_offsets[f];
      const std::uint64_t p = load_word(field);
      if (p == 0) continue;
      // The last chunk starting at or below p.
      auto it = std::upper_bound(order.begin(), order.end(), p,
                                 [&](std::uint64_t v, std::size_t k) { return v < old_base[k]; });
      if (it == order.begin() || p >= old_end[*(it - 1)]) {
        if (outside++ == 0) first_bad = i;
        continue;
      }
      const std::size_t k = *(it - 1);
      const std::uint64_t q = new_base[k] + (p - old_base[k]);
      if (q != p) {
        store_word(field, q);
        ++changed;
      }
    }
  }
  // The stored pointers now refer to this run's chunks.
  for (std::size_t k = 0; k < nchunks; ++k) bases()[k] = new_base[k];
  if (outside != 0)
    return make_error(Errc::invalid_argument,
                      "blocked array '" + name_ + "': " + std::to_string(outside) +
                          " pointer fields point outside the array as it was committed (the first in element " +
                          std::to_string(first_bad) +
                          "); they were left as they are. relocate() handles pointers "
                          "between elements of one array; register others with register_pointers()");
  return changed;
}

}  // namespace cairn::persist
