// amr_test.cpp — the adaptive interface app: volume conserved, the shape error
// falls as the finest level rises, and a run SIGKILLed mid-way resumes from
// its last pm_persistent to the uninterrupted run's bits.
#include "apps/amr/amr.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "apps/amr/snapshot.hpp"

namespace cairn::apps::amr {
namespace {

std::string pool(const std::string& name) {
  const std::string dir = "/dev/shm/cairn-amr-test." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name + ".pool";
}

struct Cleanup {
  ~Cleanup() { std::filesystem::remove_all("/dev/shm/cairn-amr-test." + std::to_string(::getpid())); }
} cleanup;

Config small(const std::string& name, int level) {
  Config c;
  c.pool = pool(name);
  c.level_max = level;
  c.period = 0.5;
  c.pool_size = 256ull << 20;
  return c;
}

TEST(Amr, ConservesVolumeAndConvergesWithTheFinestLevel) {
  double error[2];
  for (int level : {3, 4}) {
    auto r = run(small("conv" + std::to_string(level), level));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Report& x = r.value();
    EXPECT_LT(std::fabs(x.volume - x.volume0) / x.volume0, 1e-12) << level;
    EXPECT_NEAR(x.volume0, 4.0 / 3.0 * M_PI * 0.15 * 0.15 * 0.15, 0.05 * x.volume0);  // the sampled sphere
    EXPECT_GT(x.leaves, 64u);
    EXPECT_GT(x.blocks_persisted, 0u);
    error[level - 3] = x.shape_error;
  }
  EXPECT_LT(error[1], error[0]);
}

// The three octrees of seed 000 §5 run the same operations in the same
// order: the same mesh and the same bits at the end, whatever the DRAM budget
// and the layout transformation do with the PM-octree's blocks.
TEST(Amr, EveryBackendAndLayoutEndsWithTheSameBits) {
  auto reference = run(small("ref", 4));
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  struct Case {
    const char* name;
    Backend backend;
    std::uint64_t budget;
    bool transform;
  };
  for (const Case& k : {Case{"incore", Backend::in_core, ~0ull, true}, Case{"lmdb", Backend::lmdb, ~0ull, true},
                        Case{"budget", Backend::pm_octree, 16u << 10, true},
                        Case{"notransform", Backend::pm_octree, 16u << 10, false}}) {
    Config c = small(k.name, 4);
    c.backend = k.backend;
    c.dram_budget = k.budget;
    c.transform = k.transform;
    auto r = run(c);
    ASSERT_TRUE(r.ok()) << k.name << ": " << r.error().message;
    EXPECT_EQ(r.value().checksum, reference.value().checksum) << k.name;
    EXPECT_EQ(r.value().leaves, reference.value().leaves) << k.name;
    EXPECT_EQ(r.value().volume, reference.value().volume) << k.name;
  }
}

// --emit-vtk: a .vtu ParaView reads, one hexahedron and one fraction per leaf.
TEST(Amr, EmitsTheLeafMeshAndFractionAsVtk) {
  Config c = small("vtk", 3);
  c.period = 0.1;
  c.vtk_dir = pool("vtk-out").substr(0, pool("vtk-out").rfind('/')) + "/vtk";
  c.vtk_every = 4;
  std::filesystem::create_directories(c.vtk_dir);
  c.step_limit = 4;
  auto r = run(c);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::ifstream f(c.vtk_dir + "/amr_000004.vtu");
  ASSERT_TRUE(f.good());
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("NumberOfCells=\"" + std::to_string(r.value().leaves) + "\""), std::string::npos);
  const auto at = text.find("Name=\"fraction\"");
  ASSERT_NE(at, std::string::npos);
  // The fraction array: one value per leaf, each in [0, 1].
  std::istringstream values(text.substr(text.find('>', at) + 1));
  std::size_t n = 0;
  double v;
  while (values >> v) {
    EXPECT_GE(v, -1e-12);
    EXPECT_LE(v, 1 + 1e-12);
    ++n;
  }
  EXPECT_EQ(n, r.value().leaves);
}

TEST(Amr, ASmallDramBudgetSendsMoreWritesToNvm) {
  Config all = small("all", 4);
  Config tight = small("tight", 4);
  tight.dram_budget = 8u << 10;
  tight.transform = false;
  auto a = run(all), t = run(tight);
  ASSERT_TRUE(a.ok() && t.ok());
  // Every step's blocks reach the pool at persist either way; a C0 too small
  // for them also takes the copies and updates of the step itself.
  EXPECT_GT(t.value().nvm_store_lines, a.value().nvm_store_lines);
}

struct Persistence {
  const char* name;
  Backend backend;
  std::uint64_t every;
  std::uint64_t resumes_at;  // the last committed step before step 17
};

TEST(Amr, ASigkilledRunResumesBitIdentically) {
  for (const Persistence& p :
       {Persistence{"pm1", Backend::pm_octree, 1, 17}, Persistence{"pm3", Backend::pm_octree, 3, 15},
        Persistence{"incore", Backend::in_core, 1, 10}, Persistence{"lmdb", Backend::lmdb, 2, 16}}) {
    const std::uint64_t every = p.every;
    Config base = small(std::string("clean-") + p.name, 4);
    base.backend = p.backend;
    base.persist_every = every;
    auto clean = run(base);
    ASSERT_TRUE(clean.ok()) << clean.error().message;
    ASSERT_GT(clean.value().steps, 20u);

    Config crash = small(std::string("killed-") + p.name, 4);
    crash.backend = p.backend;
    crash.persist_every = every;
    crash.crash_at = 17;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      (void)run(crash);
      ::_exit(0);  // not reached: the run raises SIGKILL at step 17
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    Config resume = crash;
    resume.crash_at = -1;
    resume.resume = true;
    auto back = run(resume);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back.value().first_step, p.resumes_at) << p.name;  // the last persisted step
    EXPECT_EQ(back.value().checksum, clean.value().checksum) << p.name;
    EXPECT_EQ(back.value().volume, clean.value().volume);
  }
}

TEST(Amr, BadOptionsAndAForeignResume) {
  Config c = small("bad", 4);
  c.level_min = 5;
  EXPECT_EQ(run(c).error().code, Errc::invalid_argument);
  c = small("missing", 4);
  c.resume = true;
  EXPECT_EQ(run(c).error().code, Errc::not_found);
  // A pool of a finer run holds more steps than a coarser run has.
  Config fine = small("fine", 5);
  fine.crash_at = -1;
  fine.period = 0.25;
  ASSERT_TRUE(run(fine).ok());
  Config coarse = fine;
  coarse.level_max = 3;
  coarse.resume = true;
  auto r = run(coarse);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::layout_mismatch) << r.error().message;
  // The baselines' files: missing, truncated, damaged.
  for (Backend b : {Backend::in_core, Backend::lmdb}) {
    Config m = small(std::string("nothing-") + backend_name(b), 4);
    m.backend = b;
    m.resume = true;
    EXPECT_EQ(run(m).error().code, Errc::not_found) << backend_name(b);
  }
  Config snap = small("snap", 4);
  snap.backend = Backend::in_core;
  snap.period = 0.1;
  ASSERT_TRUE(run(snap).ok());
  const std::string file = snap.pool + ".snapshot";
  const auto bytes = std::filesystem::file_size(file);
  snap.resume = true;
  {
    std::FILE* f = std::fopen(file.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 100, SEEK_SET);
    std::fputc(0x5a ^ std::fgetc(f), f);
    std::fclose(f);
  }
  auto damaged = run(snap);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.error().code, Errc::corrupted) << damaged.error().message;
  std::filesystem::resize_file(file, bytes - 30);
  auto truncated = run(snap);
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error().code, Errc::corrupted) << truncated.error().message;
}

// The in-core snapshot's bit-flip sweep: a small snapshot (a sphere's
// interface at level 4), single-bit flips of its bytes and truncations, each
// decoded in a child: a typed error or the identical leaves, payloads and
// step, never a signal. A forged snapshot (checksum recomputed) whose leaves
// are off their grid or finer than the run is refused too.
TEST(AmrSnapshot, EveryBitFlipAndTruncationGivesATypedErrorOrTheSameTree) {
  octree::Options o;
  o.dims = 3;
  o.data_size = sizeof(double);
  o.pool_size = 16u << 20;
  o.dram_budget = ~0ull;
  auto tree = octree::Octree::create(pool("snap-src"), o).value();
  ASSERT_TRUE(tree->uniform(1, nullptr).ok());
  ASSERT_TRUE(tree->refine(
                      true, [](const octree::Octant& q, const std::byte*) { return q.x == 0 && q.y == 0; },
                      [](const octree::Octant& q, std::byte* d, const std::byte*) {
                        const double c = 0.125 * q.level + 1e-6 * q.x;
                        std::memcpy(d, &c, sizeof c);
                      },
                      4)
                  .ok());
  auto leaves = [](const octree::Octree& t) {
    std::vector<std::pair<octree::Octant, double>> out;
    (void)t.visit_leaves([&](const octree::Octant& q, const std::byte* d) {
      double c;
      std::memcpy(&c, d, sizeof c);
      out.emplace_back(q, c);
    });
    return out;
  };
  const auto want = leaves(*tree);
  const auto image = encode_snapshot(17, *tree).value();
  ASSERT_GT(want.size(), 8u);
  std::vector<std::pair<std::size_t, int>> cases;  // byte, bit (-1: truncation to byte)
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto next = [&x] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  for (std::size_t i = 0; i < 32; ++i) cases.emplace_back(i, static_cast<int>(i % 8));  // the head, every byte
  for (int i = 0; i < 150; ++i) cases.emplace_back(next() % image.size(), static_cast<int>(next() % 8));
  for (std::size_t t : {std::size_t{0}, std::size_t{8}, std::size_t{31}, std::size_t{32}, image.size() / 2,
                        image.size() - 8, image.size() - 1})
    cases.emplace_back(t, -1);
  int typed = 0, identical = 0;
  for (const auto& [byte, bit] : cases) {
    std::vector<unsigned char> d = image;
    if (bit >= 0)
      d[byte] ^= static_cast<unsigned char>(1u << bit);
    else
      d.resize(byte);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::alarm(30);
      // pool() names a directory after the calling process: the child's own,
      // removed before it exits (a leftover of an earlier run whose pid this
      // child reuses would make create refuse an existing file).
      const std::string path = pool("snap");
      const auto dir = std::filesystem::path(path).parent_path();
      std::filesystem::remove(path);
      int rc = 14;
      {
        auto fresh = octree::Octree::create(path, o);
        if (fresh.ok()) {
          auto step = decode_snapshot(d, "s.snapshot", 4, *fresh.value());
          if (!step.ok())
            rc = step.error().message.find("s.snapshot") != std::string::npos ? 12 : 13;
          else
            rc = step.value() == 17 && leaves(*fresh.value()) == want ? 10 : 11;
        }
      }
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
      ::_exit(rc);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    const std::string what = bit >= 0 ? "bit " + std::to_string(bit) + " of byte " + std::to_string(byte)
                                      : "truncation to " + std::to_string(byte);
    ASSERT_FALSE(WIFSIGNALED(status)) << what << ": signal " << WTERMSIG(status);
    ASSERT_TRUE(WIFEXITED(status)) << what;
    EXPECT_TRUE(WEXITSTATUS(status) == 10 || WEXITSTATUS(status) == 12) << what << ": exit " << WEXITSTATUS(status);
    typed += WEXITSTATUS(status) == 12;
    identical += WEXITSTATUS(status) == 10;
  }
  std::cout << "amr snapshot bit-flip sweep: " << cases.size() << " cases, " << identical << " identical, " << typed
            << " typed errors\n";
  // Forged: the checksum made to match a leaf off its level's grid, and a
  // leaf finer than the run's --size.
  auto forge = [&](std::size_t at, std::uint32_t value) {
    std::vector<unsigned char> d = image;
    std::memcpy(d.data() + at, &value, 4);
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i + 8 < d.size(); ++i) h = (h ^ d[i]) * 0x100000001b3ull;
    std::memcpy(d.data() + d.size() - 8, &h, 8);
    std::filesystem::remove(pool("snap-forged"));
    auto fresh = octree::Octree::create(pool("snap-forged"), o).value();
    return decode_snapshot(d, "s.snapshot", 4, *fresh);
  };
  EXPECT_EQ(forge(24 + 4, 1).error().code, Errc::corrupted);         // x of leaf 0 off its grid
  EXPECT_EQ(forge(24 + 4, 1u << 31).error().code, Errc::corrupted);  // outside the domain
  EXPECT_EQ(forge(24, 5).error().code, Errc::layout_mismatch);       // level 5 > --size 4
}

}  // namespace
}  // namespace cairn::apps::amr
