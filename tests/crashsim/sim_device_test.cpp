// sim_device_test.cpp — the simulator device's durability models: what a
// flush, a drain, a non-temporal copy make durable, per thread, and what is
// pending at a crash point.
#include "tests/crashsim/sim_device.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace cairn::testing::crashsim {
namespace {

// A page-aligned buffer bound to a SimDevice, outside any pool.
struct Bound {
  explicit Bound(Durability d, bool track = true, std::size_t size = 4 * kPage) {
    auto img = Image::create(size);
    EXPECT_TRUE(img.ok());
    image = std::move(img.value());
    SimDevice::Config c;
    c.durability = d;
    c.track_writes = track;
    dev = std::make_unique<SimDevice>(c);
    devices::Mapping m{image->view(), image->size(), false, devices::FlushMode::cpu};
    auto o = dev->bind(m);
    EXPECT_TRUE(o.ok());
    ops = o.value();
  }
  ~Bound() { dev->unbind(); }
  std::uint64_t* word(std::size_t i) { return reinterpret_cast<std::uint64_t*>(image->view()) + i; }
  std::uint64_t durable(std::size_t i) const {
    std::uint64_t v;
    std::memcpy(&v, dev->durable() + i * 8, 8);
    return v;
  }
  void flush(std::size_t i, std::size_t n = 8) { ops.flush(dev.get(), word(i), n); }
  void drain() { ops.drain(dev.get()); }
  UnitSet pending() {
    UnitSet u;
    dev->pending(u);
    return u;
  }
  std::unique_ptr<Image> image;
  std::unique_ptr<SimDevice> dev;
  devices::Ops ops{};
};

std::uint64_t cand(const UnitSet& s, const Unit& u, unsigned i) {
  std::uint64_t v;
  std::memcpy(&v, s.candidate(u, i), 8);
  return v;
}

TEST(crashsim_device, StoreIsPendingUntilFlushedAndDrained) {
  Bound b(Durability::adr);
  *b.word(3) = 42;
  auto p = b.pending();
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].offset, 24u);
  EXPECT_EQ(p.units[0].n, 2);
  EXPECT_EQ(cand(p, p.units[0], 0), 0u);
  EXPECT_EQ(cand(p, p.units[0], 1), 42u);
  b.flush(3);
  EXPECT_EQ(b.durable(3), 0u) << "a flush alone makes nothing durable";
  EXPECT_EQ(b.pending().units.size(), 1u);
  b.drain();
  EXPECT_EQ(b.durable(3), 42u);
  EXPECT_TRUE(b.pending().units.empty());
}

TEST(crashsim_device, DrainMakesTheFlushTimeValueDurableAndKeepsLaterStoresPending) {
  Bound b(Durability::adr);
  *b.word(0) = 1;
  b.flush(0);
  *b.word(0) = 2;  // after the flush: not covered by it
  auto p = b.pending();
  ASSERT_EQ(p.units.size(), 1u);
  ASSERT_EQ(p.units[0].n, 3) << "durable, flush-time and current values";
  EXPECT_EQ(cand(p, p.units[0], 0), 0u);
  EXPECT_EQ(cand(p, p.units[0], 1), 1u);
  EXPECT_EQ(cand(p, p.units[0], 2), 2u);
  b.drain();
  EXPECT_EQ(b.durable(0), 1u);
  p = b.pending();
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(cand(p, p.units[0], 1), 2u);
}

TEST(crashsim_device, AdrDrainOrdersOnlyTheCallingThreadsFlushes) {
  Bound b(Durability::adr);
  *b.word(0) = 7;
  *b.word(100) = 9;
  std::thread t([&] { b.flush(100); });
  t.join();
  b.flush(0);
  b.drain();
  EXPECT_EQ(b.durable(0), 7u);
  EXPECT_EQ(b.durable(100), 0u) << "the other thread's flush is not fenced by this drain";
  std::thread t2([&] { b.drain(); });
  t2.join();
  EXPECT_EQ(b.durable(100), 9u);
}

TEST(crashsim_device, EadrFenceMakesEverythingWrittenDurable) {
  Bound b(Durability::eadr);
  *b.word(5) = 11;
  *b.word(400) = 12;
  b.flush(5);
  EXPECT_EQ(b.durable(5), 0u);
  EXPECT_EQ(b.pending().units.size(), 2u);
  b.drain();  // no flush of word 400 needed
  EXPECT_EQ(b.durable(5), 11u);
  EXPECT_EQ(b.durable(400), 12u);
  EXPECT_TRUE(b.pending().units.empty());
}

TEST(crashsim_device, MsyncFlushWritesWholePagesAndTearsAtSectors) {
  Bound b(Durability::msync);
  *b.word(0) = 1;    // sector 0 of page 0
  *b.word(100) = 2;  // sector 1 of page 0
  *b.word(600) = 3;  // page 1
  auto p = b.pending();
  ASSERT_EQ(p.units.size(), 3u);
  EXPECT_EQ(p.units[0].len, 512u);
  EXPECT_EQ(p.units[0].group, p.units[1].group);
  EXPECT_NE(p.units[1].group, p.units[2].group);
  b.flush(0, 8);  // msync of page 0
  EXPECT_EQ(b.durable(0), 1u);
  EXPECT_EQ(b.durable(100), 2u) << "msync writes back the whole page";
  EXPECT_EQ(b.durable(600), 0u);
  b.drain();
  EXPECT_EQ(b.durable(600), 0u);
}

TEST(crashsim_device, PagecacheWritesRecordedPagesBackAtTheDrainOfAnyThread) {
  Bound b(Durability::pagecache);
  *b.word(0) = 1;    // page 0
  *b.word(100) = 2;  // page 0, another sector
  *b.word(600) = 3;  // page 1, never flushed
  b.flush(0, 8);     // records page 0 only
  EXPECT_EQ(b.durable(0), 0u) << "a flush only records its pages";
  EXPECT_EQ(b.pending().units.size(), 3u) << "every dirty sector may reach the disk before the drain";
  *b.word(1) = 4;  // after the flush, before the drain: the drain writes the page as it is then
  std::thread other([&] { b.drain(); });
  other.join();
  EXPECT_EQ(b.durable(0), 1u);
  EXPECT_EQ(b.durable(1), 4u);
  EXPECT_EQ(b.durable(100), 2u) << "the whole page";
  EXPECT_EQ(b.durable(600), 0u) << "page 1 was never flushed";
  ASSERT_EQ(b.pending().units.size(), 1u);
  b.drain();
  EXPECT_EQ(b.durable(600), 0u) << "a drain writes back only recorded pages";
}

TEST(crashsim_device, NonTemporalCopyIsPendingUntilTheFence) {
  Bound b(Durability::adr);
  std::uint64_t src[16];
  for (int i = 0; i < 16; ++i) src[i] = 100 + i;
  b.ops.copy_nodrain(b.dev.get(), b.word(8), src, sizeof src);
  EXPECT_EQ(*b.word(8), 100u);
  EXPECT_EQ(b.pending().units.size(), 16u);
  EXPECT_EQ(b.durable(8), 0u);
  b.drain();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b.durable(8 + i), 100u + i);
}

TEST(crashsim_device, FullComparisonFindsTheSameWordsAsTracking) {
  Bound tracked(Durability::adr, true), full(Durability::adr, false);
  for (Bound* b : {&tracked, &full}) {
    *b->word(1) = 5;
    *b->word(513) = 6;
    *b->word(1500) = 7;
  }
  auto a = tracked.pending(), c = full.pending();
  ASSERT_EQ(a.units.size(), 3u);
  ASSERT_EQ(c.units.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.units[i].offset, c.units[i].offset);
}

TEST(crashsim_device, CrashPointsAreNumberedAndDeferredOffTheArmingThread) {
  Bound b(Durability::adr);
  std::vector<SimDevice::Point> seen;
  b.dev->set_hook([&](const SimDevice::Point& p) { seen.push_back(p); });
  b.flush(0);  // not armed: no crash point
  b.dev->arm(true);
  b.flush(0);
  b.drain();
  b.dev->marker(devices::Marker::commit_point, "here");
  std::thread t([&] { b.flush(1); });
  t.join();
  b.dev->end_point();
  ASSERT_EQ(seen.size(), 5u);
  for (std::uint64_t i = 0; i < 5; ++i) EXPECT_EQ(seen[i].id, i);
  EXPECT_EQ(seen[0].kind, SimDevice::PointKind::flush);
  EXPECT_EQ(seen[1].kind, SimDevice::PointKind::drain);
  EXPECT_EQ(seen[2].kind, SimDevice::PointKind::marker);
  EXPECT_EQ(seen[2].marker, devices::Marker::commit_point);
  EXPECT_FALSE(seen[2].deferred);
  EXPECT_TRUE(seen[3].deferred) << "another thread";
  EXPECT_EQ(seen[4].kind, SimDevice::PointKind::end);
}

}  // namespace
}  // namespace cairn::testing::crashsim
