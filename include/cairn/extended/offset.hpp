// cairn/extended/offset.hpp — relocatable typed offsets: what persistent memory stores
// instead of raw pointers, so a pool can be mapped at any address.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>

namespace cairn {

// An offset in bytes from the pool base; 0 is the null offset (the pool header
// lives there, so no object can). 8 bytes, aligned: storing one is failure-atomic.
template <class T>
struct Offset {
  std::uint64_t value = 0;

  constexpr Offset() = default;
  constexpr explicit Offset(std::uint64_t v) : value(v) {}
  constexpr bool is_null() const { return value == 0; }
  constexpr explicit operator bool() const { return value != 0; }
  friend constexpr bool operator==(Offset a, Offset b) { return a.value == b.value; }

  // Resolves against a mapping. Debug builds check the whole object lies in it.
  T* get(std::byte* base, [[maybe_unused]] std::size_t size) const {
    assert(value != 0 && value + sizeof(T) <= size && "Offset out of the pool");
    return reinterpret_cast<T*>(base + value);
  }
  template <class U>
  Offset<U> cast() const {
    return Offset<U>(value);
  }
};
static_assert(sizeof(Offset<int>) == 8);

}  // namespace cairn
