// workflow_test.cpp — the solve-adapt workflow: mesh operations, the
// components' checks of their inputs, one checksum under every coupling, and
// components (or the whole driver) killed by SIGKILL in the pmem: coupling.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "apps/workflow/driver.hpp"
#include "apps/workflow/mesh.hpp"
#include "cairn/cairn.h"

namespace cairn::apps::workflow {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint64_t> codes_of(const std::vector<Cell>& cells) {
  std::vector<std::uint64_t> c;
  for (const Cell& x : cells) c.push_back(x.code);
  return c;
}

TEST(WorkflowMesh, MortonOrderVisitsTheQuadrantsInZOrder) {
  const auto cells = uniform(2);
  ASSERT_EQ(cells.size(), 16u);
  const Key first[4] = {{2, 0, 0}, {2, 1, 0}, {2, 0, 1}, {2, 1, 1}};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(cells[static_cast<std::size_t>(i)].code, pack(first[i])) << i;
  EXPECT_EQ(cells[4].code, pack({2, 2, 0}));
  EXPECT_EQ(unpack(pack({7, 100, 27})), (Key{7, 100, 27}));
  EXPECT_EQ(check_mesh(codes_of(cells)), "");
}

TEST(WorkflowMesh, NeighboursAcrossLevelsHaveFiniteVolumeWeights) {
  // Level 1 everywhere except the lower-left quadrant, split into level 2.
  std::vector<std::uint64_t> codes = {pack({1, 1, 0}), pack({1, 0, 1}), pack({1, 1, 1})};
  for (std::uint32_t j = 0; j < 2; ++j)
    for (std::uint32_t i = 0; i < 2; ++i) codes.push_back(pack({2, i, j}));
  ASSERT_EQ(check_mesh(codes), "");
  const LeafIndex index(codes);
  std::vector<Neighbour> nb;
  ASSERT_TRUE(index.neighbours({1, 1, 0}, nb));
  // left: two finer leaves (2/3 each); right, bottom: boundary (2); top: same level (1).
  ASSERT_EQ(nb.size(), 5u);
  EXPECT_EQ(nb[0].code, pack({2, 1, 0}));
  EXPECT_DOUBLE_EQ(nb[0].weight, 2.0 / 3.0);
  EXPECT_EQ(nb[1].code, pack({2, 1, 1}));
  EXPECT_EQ(nb[2].code, kBoundary);
  EXPECT_DOUBLE_EQ(nb[2].weight, 2.0);
  EXPECT_EQ(nb[4].code, pack({1, 1, 1}));
  EXPECT_DOUBLE_EQ(nb[4].weight, 1.0);
  nb.clear();
  ASSERT_TRUE(index.neighbours({2, 1, 1}, nb));  // right and top: the coarser leaves
  EXPECT_EQ(nb[1].code, pack({1, 1, 0}));
  EXPECT_DOUBLE_EQ(nb[1].weight, 2.0 / 3.0);
  EXPECT_EQ(nb[3].code, pack({1, 0, 1}));
}

TEST(WorkflowMesh, CheckFindsHolesOverlapsAndImbalance) {
  auto codes = codes_of(uniform(2));
  auto hole = codes;
  hole.pop_back();
  EXPECT_NE(check_mesh(hole), "");
  auto overlap = codes;
  overlap.push_back(pack({1, 0, 0}));
  EXPECT_NE(check_mesh(overlap), "");
  // Level 1 next to level 3: not 2:1 balanced.
  std::vector<std::uint64_t> bad = {pack({1, 1, 0}), pack({1, 0, 1}), pack({1, 1, 1}),
                                    pack({2, 0, 0}), pack({2, 0, 1}), pack({2, 1, 1})};
  for (std::uint32_t j = 0; j < 2; ++j)
    for (std::uint32_t i = 2; i < 4; ++i) bad.push_back(pack({3, i, j}));
  ASSERT_EQ(bad.size(), 10u);
  EXPECT_NE(check_mesh(bad).find("2:1"), std::string::npos) << check_mesh(bad);
}

TEST(WorkflowMesh, AdaptRefinesCoarsensAndBalances) {
  auto cells = uniform(2);
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i].value = static_cast<double>(i);
  // Refine the leaf at (0.499, 0.499), next to the centre, three times: its
  // neighbours across the centre lines must be split to keep 2:1.
  std::vector<Cell> mesh = cells;
  for (int round = 0; round < 3; ++round) {
    std::vector<int> target;
    for (const Cell& c : mesh) {
      const Key k = unpack(c.code);
      const double h = cell_size(k.level);
      const bool inside = k.ix * h <= 0.499 && 0.499 < (k.ix + 1) * h && k.iy * h <= 0.499 && 0.499 < (k.iy + 1) * h;
      target.push_back(inside ? k.level + 1 : k.level);
    }
    mesh = adapt(mesh, target, 1, 8);
    ASSERT_EQ(check_mesh(codes_of(mesh)), "") << "round " << round;
  }
  int finest = 0;
  for (const Cell& c : mesh) finest = std::max(finest, unpack(c.code).level);
  EXPECT_EQ(finest, 5);
  EXPECT_GT(mesh.size(), 16u + 3 * 3);  // more than the three splits asked for: balance split others

  // Coarsen the four level-2 leaves of the upper-right quadrant: the parent gets their mean.
  std::vector<int> target;
  double sum = 0;
  for (const Cell& c : cells) {
    const Key k = unpack(c.code);
    const bool ur = k.ix >= 2 && k.iy >= 2;
    target.push_back(ur ? 1 : 2);
    if (ur) sum += c.value;
  }
  const auto coarse = adapt(cells, target, 1, 8);
  ASSERT_EQ(check_mesh(codes_of(coarse)), "");
  ASSERT_EQ(coarse.size(), 13u);
  bool found = false;
  for (const Cell& c : coarse)
    if (c.code == pack({1, 1, 1})) {
      found = true;
      EXPECT_DOUBLE_EQ(c.value, sum / 4);
    }
  EXPECT_TRUE(found);

  // A family next to a finer leaf stays: merging it would break 2:1.
  std::vector<Cell> mixed = adapt(cells, std::vector<int>(16, 2), 1, 8);  // unchanged
  std::vector<int> t2;
  for (const Cell& c : mixed) {
    const Key k = unpack(c.code);
    t2.push_back(k.ix == 1 && k.iy == 1 ? 3 : (k.ix < 2 && k.iy < 2 ? 1 : 2));  // refine (1,1), coarsen its family
  }
  const auto kept = adapt(mixed, t2, 1, 8);
  ASSERT_EQ(check_mesh(codes_of(kept)), "");
  for (const Cell& c : kept) EXPECT_NE(c.code, pack({1, 0, 0}));
}

// ---- components and couplings

Config small(const std::string& coupling) {
  Config c;
  c.coupling = coupling;
  c.cycles = 4;
  c.params.parts = 2;
  c.params.level_min = 3;
  c.params.level_max = 7;
  c.params.sweeps = 20;
  c.bin_dir = CAIRN_WORKFLOW_BIN_DIR;
  return c;
}

std::string scratch(const std::string& name) {
  const std::string d = "/dev/shm/cairn-workflow-test." + std::to_string(::getpid()) + "." + name;
  fs::remove_all(d);
  return d;
}

TEST(WorkflowComponents, InputsThatAreMissingStaleForeignOrTruncatedAreTypedErrors) {
  const std::string dir = scratch("inputs");
  fs::create_directories(dir);
  ::setenv("CAIRN_STREAM_PREFIX", ("file:" + dir + "/").c_str(), 1);
  Params p;
  p.parts = 1;
  auto missing = run_component("solve", p);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_NE(missing.error().message.find("part.0"), std::string::npos) << missing.error().message;

  p.uniform_level = 3;
  ASSERT_TRUE(run_component("rebalance", p).ok());
  p.uniform_level = 0;
  ASSERT_TRUE(run_component("preprocess", p).ok());
  Params later = p;
  later.cycle = 1;
  auto stale = run_component("solve", later);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, Errc::wrong_version);
  EXPECT_NE(stale.error().message.find("cycle 0"), std::string::npos) << stale.error().message;
  auto t = run_component("solve", p);
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto solution = read_records("solution.0", "solution", 0, 0, 1);
  ASSERT_TRUE(solution.ok()) << solution.error().message;
  EXPECT_EQ(solution.value().size(), 64u);  // every leaf of the uniform level-3 mesh, no ghosts with one part

  // Truncated: cut the solution short.
  const std::string sol = dir + "/solution.0";
  fs::resize_file(sol, fs::file_size(sol) - 10);
  auto torn = run_component("sizefield", p);
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.error().code, Errc::corrupted);
  EXPECT_NE(torn.error().message.find("truncated"), std::string::npos) << torn.error().message;
  // Foreign: not a workflow stream at all, or the wrong kind.
  {
    std::FILE* f = std::fopen(sol.c_str(), "w");
    std::fputs("hello\n", f);
    std::fclose(f);
  }
  auto foreign = run_component("sizefield", p);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().code, Errc::foreign_file);
  fs::copy_file(dir + "/part.0", sol, fs::copy_options::overwrite_existing);
  auto kind = run_component("sizefield", p);
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.error().message.find("holds part data"), std::string::npos) << kind.error().message;
  ::unsetenv("CAIRN_STREAM_PREFIX");
  fs::remove_all(dir);
}

// Writes a stream of `records` behind `header` (no padding added) through
// the FILE* of cairn_stream_open.
void write_raw(const std::string& name, const std::string& header, const std::vector<Record>& records) {
  std::FILE* f = cairn_stream_open(name.c_str(), "w", 0);
  ASSERT_NE(f, nullptr) << cairn_errormsg();
  std::fputs(header.c_str(), f);
  std::fwrite(records.data(), sizeof(Record), records.size(), f);
  ASSERT_EQ(std::fclose(f), 0) << cairn_stream_errormsg();
}

TEST(WorkflowComponents, ReadersUseTheRecordsInPlaceWhereTheStreamShowsThemAligned) {
  const std::string dir = scratch("in-place");
  fs::create_directories(dir);
  for (const std::string& prefix : {"file:" + dir + "/", "pmem:" + dir + "/p.pool#", std::string("mem:")}) {
    ::setenv("CAIRN_STREAM_PREFIX", prefix.c_str(), 1);
    Params p;
    p.parts = 1;
    p.uniform_level = 3;
    ASSERT_TRUE(run_component("rebalance", p).ok()) << prefix;
    // A component's output: the padded header puts the records on an
    // 8-byte boundary of the stream, and the reader uses them where they are.
    std::uint64_t bytes = 0;
    auto in = open_records("balanced", "balanced", 0, 0, 1, &bytes);
    ASSERT_TRUE(in.ok()) << prefix << ": " << in.error().message;
    EXPECT_TRUE(in.value().in_place()) << prefix;
    ASSERT_EQ(in.value().records().size(), 64u) << prefix;
    EXPECT_EQ(bytes % 8, 0u) << prefix;
    const auto copy = read_records("balanced", "balanced", 0, 0, 1);
    ASSERT_TRUE(copy.ok()) << prefix;
    for (std::size_t i = 0; i < 64; ++i) {
      EXPECT_EQ(copy.value()[i].key, in.value().records()[i].key) << prefix << " " << i;
      EXPECT_EQ(copy.value()[i].aux, in.value().records()[i].aux) << prefix << " " << i;
    }

    // An unpadded header (as earlier writers made): the records are not
    // aligned in the stream, so they are read through the FILE* instead.
    std::string header = "cairn-workflow/1 mesh cycle=2 part=0 parts=1 count=2";
    if ((header.size() + 1) % 8 == 0) header += ' ';
    header += '\n';
    const std::vector<Record> two = {{11, 1.5, 0.0}, {12, -2.5, 3.0}};
    write_raw("mesh", header, two);
    auto odd = open_records("mesh", "mesh", 2, 0, 1, &bytes);
    ASSERT_TRUE(odd.ok()) << prefix << ": " << odd.error().message;
    EXPECT_FALSE(odd.value().in_place()) << prefix;
    ASSERT_EQ(odd.value().records().size(), 2u) << prefix;
    EXPECT_EQ(odd.value().records()[1].key, 12u) << prefix;
    EXPECT_EQ(odd.value().records()[1].value, -2.5) << prefix;
    EXPECT_EQ(bytes, header.size() + 2 * sizeof(Record)) << prefix;

    // Either way a stream shorter or longer than its header says is corrupted.
    std::string aligned = "cairn-workflow/1 mesh cycle=2 part=0 parts=1 count=2";
    aligned.append((8 - (aligned.size() + 1) % 8) % 8, ' ');
    aligned += '\n';
    for (const std::string& h : {aligned, header})
      for (const std::size_t n : {std::size_t{1}, std::size_t{3}}) {
        write_raw("mesh", h, std::vector<Record>(n, Record{5, 0.0, 0.0}));
        auto bad = open_records("mesh", "mesh", 2, 0, 1);
        ASSERT_FALSE(bad.ok()) << prefix << " " << n;
        EXPECT_EQ(bad.error().code, Errc::corrupted) << prefix << " " << n;
      }
  }
  ::unsetenv("CAIRN_STREAM_PREFIX");
  for (const char* name : {"balanced", "mesh"}) (void)cairn_stream_remove((std::string("mem:") + name).c_str());
  fs::remove_all(dir);
}

TEST(WorkflowCouplings, EveryCouplingGivesTheSameChecksum) {
  std::uint64_t reference = 0;
  for (const char* coupling : {"mem", "file-tmpfs", "pmem", "file-disk"}) {
    auto r = run_workflow(small(coupling));
    ASSERT_TRUE(r.ok()) << coupling << ": " << r.error().message;
    const Report& rep = r.value();
    EXPECT_EQ(rep.mesh_error, "") << coupling;
    EXPECT_GT(rep.leaves, 64u) << coupling;  // refined beyond the uniform level-3 mesh
    EXPECT_GT(rep.max_value, 0.0);
    EXPECT_EQ(rep.components.at("solve").runs, 8) << coupling;  // 4 cycles x 2 parts
    EXPECT_EQ(rep.components.at("adapt").runs, 3) << coupling;
    EXPECT_GT(rep.transfer_s, 0.0);
    if (reference == 0) reference = rep.checksum;
    EXPECT_EQ(rep.checksum, reference) << coupling;
  }
  // The checksum sees the computation: one sweep more changes it.
  Config other = small("mem");
  other.params.sweeps = 21;
  auto r = run_workflow(other);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r.value().checksum, reference);
}

TEST(WorkflowCouplings, BadOptionsAreInvalidArguments) {
  Config c = small("nfs");
  EXPECT_EQ(run_workflow(c).error().code, Errc::invalid_argument);
  c = small("mem");
  c.kill = "solve";
  EXPECT_EQ(run_workflow(c).error().code, Errc::invalid_argument);
  c = small("pmem");
  c.kill = "meshing";
  EXPECT_EQ(run_workflow(c).error().code, Errc::invalid_argument);
  c = small("pmem");
  c.params.level_min = 9;
  EXPECT_EQ(run_workflow(c).error().code, Errc::invalid_argument);
  c = small("pmem");
  c.resume = true;
  c.dir = scratch("noresume");
  auto r = run_workflow(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::not_found) << r.error().message;
  fs::remove_all(c.dir);
}

// A component killed mid-write in the pmem: coupling is rerun alone; the
// result is the uninterrupted run's, bit for bit.
TEST(WorkflowKill, AKilledComponentIsRerunAloneWithTheSameResult) {
  auto clean = run_workflow(small("pmem"));
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  std::uint64_t seed = 11;
  for (const char* component : {"solve", "sizefield", "adapt", "rebalance", "preprocess"}) {
    Config c = small("pmem");
    c.kill = component;
    c.seed = seed++;
    auto r = run_workflow(c);
    ASSERT_TRUE(r.ok()) << component << ": " << r.error().message;
    EXPECT_EQ(r.value().reruns, 1) << component;
    EXPECT_NE(r.value().killed.find(component), std::string::npos) << r.value().killed;
    EXPECT_EQ(r.value().checksum, clean.value().checksum) << component;
    EXPECT_EQ(r.value().components.at(component).runs, clean.value().components.at(component).runs) << component;
  }
}

pid_t spawn_driver(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  const std::string exe = std::string(CAIRN_WORKFLOW_BIN_DIR) + "/workflow";
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: the kill takes its components too
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// Waits until `path` exists (the run's progress signal) or the process `pid`
// has ended; true if the file came. The bound only turns a broken run into a
// failure instead of a hang: the kill waits for the signal, never for a time.
bool wait_for_file(const std::string& path, pid_t pid) {
  for (int i = 0; i < 60000; ++i) {
    if (fs::exists(path)) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// The whole workflow (driver and the running component) dies by SIGKILL at a
// random point of a component's output in a random step after the first
// cycle; --resume reruns only the unfinished step onwards. The kill lands
// inside the run by construction: the component creates a file at the point
// (--kill-wait) and waits there, and the test kills the process group when
// the file appears.
TEST(WorkflowKill, AKilledDriverResumesAtItsUnfinishedStep) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // the killed driver's component becomes our child
  auto clean = run_workflow(small("pmem"));
  ASSERT_TRUE(clean.ok()) << clean.error().message;
  std::mt19937 rng(5);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string dir = scratch("resume" + std::to_string(round));
    const std::string kill_point = dir + ".at-kill-point";
    fs::remove(kill_point);
    const Config c = small("pmem");
    const std::string cycle = std::to_string(std::uniform_int_distribution<int>(1, 3)(rng));
    const std::string seed = std::to_string(rng());
    const pid_t pid = spawn_driver({"--coupling", "pmem",   "--dir",       dir,           "--cycles",    "4",
                                    "--parts",    "2",      "--level-min", "3",           "--level-max", "7",
                                    "--sweeps",   "20",     "--quiet",     "--kill",      "random",      "--kill-cycle",
                                    cycle,        "--seed", seed,          "--kill-wait", kill_point});
    ASSERT_GT(pid, 0);
    const bool at_point = wait_for_file(kill_point, pid);
    ::killpg(pid, SIGKILL);
    // Reap the driver and, as their subreaper, the component it was running: the restart begins once
    // the whole workflow is gone, as after a crash (a component still dying, under the sanitizers
    // for a while, holds its stream's writer lock and the resume would be refused).
    int status = 0;
    ::waitpid(pid, &status, 0);
    while (::waitpid(-pid, nullptr, 0) > 0) {
    }
    fs::remove(kill_point);
    ASSERT_TRUE(at_point) << "the workflow ended before its component reached the kill point";
    ASSERT_TRUE(WIFSIGNALED(status)) << "the driver was not killed";
    Config resume = c;
    resume.dir = dir;
    resume.resume = true;
    auto r = run_workflow(resume);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().checksum, clean.value().checksum) << "killed in cycle " << cycle << ", seed " << seed;
    EXPECT_GT(r.value().first_step, 0) << "the resume did not start at the unfinished step (cycle " << cycle << ")";
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace cairn::apps::workflow
