// arena.cpp — whole-block extents whose allocation state lives in DRAM and is
// rebuilt from reachability after open (no allocation log on media).
#include <algorithm>
#include <bit>

#include "cairn/extended/pool.hpp"

namespace cairn::pool {
namespace {

bool test(const std::vector<std::uint64_t>& bits, std::uint64_t i) { return (bits[i / 64] >> (i % 64)) & 1u; }
void clear(std::vector<std::uint64_t>& bits, std::uint64_t i) { bits[i / 64] &= ~(std::uint64_t{1} << (i % 64)); }

// Bits [first, first + n) a word at a time: `each(word index, mask)` for every
// word the range touches. Restore marks every chunk of a tree (up to a few
// GB of arena blocks) before the application can read: a bit at a time
// that was a millisecond at 2e7 leaves.
template <class Each>
void each_word(std::uint64_t first, std::uint64_t n, Each&& each) {
  std::uint64_t i = first;
  const std::uint64_t end = first + n;
  while (i < end) {
    const std::uint64_t off = i % 64;
    const std::uint64_t len = std::min<std::uint64_t>(64 - off, end - i);
    each(i / 64, (len == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << len) - 1)) << off);
    i += len;
  }
}
bool any_set(const std::vector<std::uint64_t>& bits, std::uint64_t first, std::uint64_t n) {
  bool any = false;
  each_word(first, n, [&](std::uint64_t w, std::uint64_t mask) { any = any || (bits[w] & mask) != 0; });
  return any;
}
void set_range(std::vector<std::uint64_t>& bits, std::uint64_t first, std::uint64_t n) {
  each_word(first, n, [&](std::uint64_t w, std::uint64_t mask) { bits[w] |= mask; });
}

}  // namespace

void Arena::init(std::uint64_t offset, std::uint64_t block_size, std::uint64_t count, std::uint64_t* high_water,
                 Pool* pool) {
  std::lock_guard lk(mu_);
  offset_ = offset;
  block_size_ = block_size;
  block_count_ = count;
  high_water_ = high_water;
  pool_ = pool;
  ready_ = false;
  used_.assign((count + 63) / 64, 0);
  in_use_ = 0;
  hint_ = 0;
}

void Arena::reset_empty() {
  std::lock_guard lk(mu_);
  std::fill(used_.begin(), used_.end(), 0);
  in_use_ = 0;
  hint_ = 0;
  ready_ = true;
}

std::uint64_t Arena::blocks_in_use() const {
  std::lock_guard lk(mu_);
  return in_use_;
}

Result<std::uint64_t> Arena::alloc(std::uint64_t bytes) {
  if (bytes == 0) return make_error(Errc::invalid_argument, "arena allocation of 0 bytes");
  std::lock_guard lk(mu_);
  if (!ready_)
    return make_error(Errc::not_ready,
                      "the arena's allocation state has not been rebuilt since the pool was "
                      "opened; the owner of the roots must call arena().rebuild() first");
  const std::uint64_t need = blocks_for(bytes);
  if (need > block_count_ - in_use_)
    return make_error(Errc::out_of_space, "out of space in the pool: " + std::to_string(bytes) + " bytes (" +
                                              std::to_string(need) + " blocks) requested, " +
                                              std::to_string(block_count_ - in_use_) +
                                              " blocks free; create a larger pool");
  // First fit from the hint, wrapping once.
  for (int pass = 0; pass < 2; ++pass) {
    std::uint64_t start = pass == 0 ? hint_ : 0;
    std::uint64_t end = pass == 0 ? block_count_ : std::min(hint_ + need, block_count_);
    std::uint64_t run = 0;
    for (std::uint64_t i = start; i < end; ++i) {
      if (run == 0 && i % 64 == 0 && used_[i / 64] == ~std::uint64_t{0}) {
        i += 63;
        continue;
      }
      if (test(used_, i)) {
        run = 0;
        continue;
      }
      if (++run == need) {
        std::uint64_t first = i + 1 - need;
        // Space first (a pool that reserves as used): never hand out a block
        // the device might fail to provide at its first touch.
        if (pool_ != nullptr)
          if (auto r = pool_->reserve(offset_ + (i + 1) * block_size_); !r.ok()) return r.error();
        set_range(used_, first, need);
        in_use_ += need;
        hint_ = i + 1;
        // The high-water mark only ever grows; it is a hint for tools.
        const std::uint64_t hw = i + 1;
        if (hw > __atomic_load_n(high_water_, __ATOMIC_RELAXED)) {
          __atomic_store_n(high_water_, hw, __ATOMIC_RELAXED);
          pool_->persist(high_water_, sizeof *high_water_);
        }
        return offset_ + first * block_size_;
      }
    }
  }
  return make_error(Errc::out_of_space, "out of space in the pool: no run of " + std::to_string(need) +
                                            " free blocks (the arena is fragmented); create a larger pool");
}

void Arena::free(std::uint64_t offset, std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  const std::uint64_t first = (offset - offset_) / block_size_;
  const std::uint64_t n = blocks_for(bytes);
  for (std::uint64_t b = first; b < first + n && b < block_count_; ++b) {
    if (test(used_, b)) {
      clear(used_, b);
      --in_use_;
    }
  }
  if (first < hint_) hint_ = first;
}

Arena::Rebuild::Rebuild(Arena& a) : arena_(a), bits_((a.block_count_ + 63) / 64, 0) {}

Result<void> Arena::Rebuild::mark(std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0) return make_error(Errc::invalid_argument, "rebuild: extent of 0 bytes");
  if (offset < arena_.offset_ || (offset - arena_.offset_) % arena_.block_size_ != 0)
    return make_error(Errc::corrupted,
                      "rebuild: offset " + std::to_string(offset) + " is not the start of an arena block");
  const std::uint64_t first = (offset - arena_.offset_) / arena_.block_size_;
  const std::uint64_t n = arena_.blocks_for(bytes);
  if (first + n > arena_.block_count_)
    return make_error(Errc::corrupted, "rebuild: extent at " + std::to_string(offset) + " of " + std::to_string(bytes) +
                                           " bytes runs past the arena");
  if (any_set(bits_, first, n)) {
    std::uint64_t b = first;
    while (!test(bits_, b)) ++b;
    return make_error(Errc::corrupted,
                      "rebuild: block " + std::to_string(b) + " is reachable twice; the structure is corrupt");
  }
  set_range(bits_, first, n);
  marked_ += n;
  return {};
}

void Arena::Rebuild::finish() {
  std::lock_guard lk(arena_.mu_);
  arena_.used_ = std::move(bits_);
  arena_.in_use_ = marked_;
  arena_.hint_ = 0;
  arena_.ready_ = true;
}

}  // namespace cairn::pool
