// layout.cpp — layout descriptors, hashing and pointer relocation.
#include "persist/layout.hpp"

#include <cstring>

#include "cairn/extended/pool.hpp"

namespace cairn::persist::detail {

void* Entry::latest() const { return dual ? pair->read() : plain->data(); }
void* Entry::working() const { return dual ? pair->write() : plain->data(); }

std::size_t Layout::total_bytes() const {
  std::size_t n = 0;
  for (const auto& e : entries) n += e.bytes * (e.dual ? 2 : 1);
  return n;
}

std::vector<RegionDesc> Layout::descriptors() const {
  std::vector<RegionDesc> out(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::memset(&out[i], 0, sizeof(RegionDesc));
    std::strncpy(out[i].name, entries[i].name.c_str(), sizeof(out[i].name) - 1);
    out[i].bytes = entries[i].bytes;
    out[i].dual = entries[i].dual ? 1 : 0;
  }
  return out;
}

std::uint64_t Layout::hash() const {
  auto descs = descriptors();
  std::uint64_t h = pool::checksum64(descs.data(), descs.size() * sizeof(RegionDesc));
  for (const auto& [r, off] : pointers) {
    const std::uint64_t rec[3] = {h, r, off};
    h = pool::checksum64(rec, sizeof rec);
  }
  return h;
}

Result<void> Layout::check_same(const std::vector<RegionDesc>& stored, std::uint64_t stored_pointers,
                                std::uint64_t stored_hash) const {
  if (stored_hash == hash()) return {};
  std::string diff;
  const auto mine = descriptors();
  if (stored.size() != mine.size())
    diff += " stored " + std::to_string(stored.size()) + " regions, registered " + std::to_string(mine.size()) + ";";
  for (std::size_t i = 0; i < std::min(stored.size(), mine.size()); ++i) {
    std::string sn(stored[i].name, strnlen(stored[i].name, sizeof stored[i].name));
    if (sn != mine[i].name || stored[i].bytes != mine[i].bytes || stored[i].dual != mine[i].dual)
      diff += " region " + std::to_string(i) + " stored as '" + sn + "' (" + std::to_string(stored[i].bytes) +
              (stored[i].dual ? " bytes, dual" : " bytes") + "), registered as '" + mine[i].name + "' (" +
              std::to_string(mine[i].bytes) + (mine[i].dual ? " bytes, dual" : " bytes") + ");";
  }
  if (stored_pointers != pointers.size())
    diff +=
        " stored " + std::to_string(stored_pointers) + " pointers, registered " + std::to_string(pointers.size()) + ";";
  if (diff.empty()) diff = " pointer locations differ;";
  return make_error(Errc::layout_mismatch,
                    "the committed version was saved with a different registration layout:" + diff +
                        " register the same regions and pointers, in the same order, "
                        "or start from scratch with a new name");
}

bool Layout::locate(const void* p, std::uint32_t& region, std::uint64_t& offset) const {
  auto* b = static_cast<const std::byte*>(p);
  // Regions may be adjacent, so the end of one is the start of the next: an
  // address strictly inside a region wins; one past the end (a valid C++
  // pointer value, e.g. an end iterator) is accepted only when no region holds it.
  for (const bool past_end : {false, true}) {
    for (std::uint32_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      for (int k = 0; k < (e.dual ? 2 : 1); ++k) {
        auto* base =
            static_cast<const std::byte*>(e.dual ? (k == 0 ? e.pair->read() : e.pair->write()) : e.plain->data());
        if (b >= base && (past_end ? b == base + e.bytes : b < base + e.bytes)) {
          region = i;
          offset = static_cast<std::uint64_t>(b - base);
          return true;
        }
      }
    }
  }
  return false;
}

void** Layout::pointer_slot(std::size_t i) const {
  const auto& [r, off] = pointers[i];
  return reinterpret_cast<void**>(static_cast<std::byte*>(entries[r].latest()) + off);
}

Result<void> Layout::capture_pointers(std::vector<PointerRecord>& out) const {
  out.resize(pointers.size());
  for (std::size_t i = 0; i < pointers.size(); ++i) {
    void* target = *pointer_slot(i);
    PointerRecord rec{PointerRecord::kNull, 0, 0};
    if (target != nullptr && !locate(target, rec.region, rec.offset))
      return make_error(Errc::invalid_argument,
                        "registered pointer " + std::to_string(i) + " (in region '" + entries[pointers[i].first].name +
                            "' at offset " + std::to_string(pointers[i].second) +
                            ") points outside every registered region; it could not be relocated on restore. "
                            "Register the memory it points to, or set it to null before commit");
    out[i] = rec;
  }
  return {};
}

Result<void> Layout::apply_pointers(const std::vector<PointerRecord>& records) const {
  if (records.size() != pointers.size())
    return make_error(Errc::layout_mismatch, "stored pointer table has " + std::to_string(records.size()) +
                                                 " entries, " + std::to_string(pointers.size()) + " registered");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const PointerRecord& rec = records[i];
    if (rec.region == PointerRecord::kNull) {
      *pointer_slot(i) = nullptr;
      continue;
    }
    if (rec.region >= entries.size() || rec.offset > entries[rec.region].bytes)
      return make_error(Errc::corrupted, "stored pointer " + std::to_string(i) + " names region " +
                                             std::to_string(rec.region) + " offset " + std::to_string(rec.offset) +
                                             ", outside the layout");
    *pointer_slot(i) = static_cast<std::byte*>(entries[rec.region].latest()) + rec.offset;
  }
  return {};
}

}  // namespace cairn::persist::detail
