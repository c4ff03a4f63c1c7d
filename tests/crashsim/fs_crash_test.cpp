// fs_crash_test.cpp — the `file` strategy under the file-system crash
// explorer (README.md, "File-system crash states"). Crash/FsCrash.* is the CI
// share: CAIRN_CRASH_STATES (default 10^6, as suite_test.cpp) scaled by 0.1,
// so at least 10^5 power-failure states of the pessimistic POSIX model in
// the release run (10^4 under the sanitizers with `make test`). FsVariants.*
// checks the explorer can fail: each broken variant must be caught and its
// key must replay to the same failure. FsModel.* and FsRecord.* check the
// model and the interposition themselves (a recorder that saw nothing would
// make every state pass).
//
// Replay one state: CAIRN_FS_CRASH_KEY=fs1:... crashsim_fs_test --gtest_filter='FsReplay.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/persist.hpp"
#include "persist/strategy.hpp"
#include "tests/crashsim/budget.hpp"
#include "tests/crashsim/fs_explore.hpp"
#include "tests/crashsim/fs_record.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::testing::crashsim::fs {
namespace {

// ---- the model ----

Op make(OpKind k, std::uint32_t ino = 0, std::string name = {}, std::uint64_t off = 0, std::size_t bytes = 0,
        std::string to = {}) {
  Op op;
  op.kind = k;
  op.ino = ino;
  op.name = std::move(name);
  op.to = std::move(to);
  op.off = off;
  op.data.assign(bytes, std::byte{0x5a});
  return op;
}

std::vector<Image> states_after(const Image& initial, const std::vector<Op>& log, FsModel model) {
  Tracker t(initial);
  for (std::size_t i = 0; i < log.size(); ++i) t.apply(log[i], i);
  std::vector<Image> out;
  GenOptions g;
  g.model = model;
  t.for_each_state(g, [&](std::uint64_t, const Image& img) {
    out.push_back(img);
    return true;
  });
  return out;
}

TEST(FsModel, SyncedFileAndNameAreTheOnlyState) {
  const std::vector<Op> log = {make(OpKind::create, 1, "f"), make(OpKind::write, 1, "", 0, 6000),
                               make(OpKind::fsync, 1), make(OpKind::fsync_dir)};
  const auto states = states_after(Image{}, log, FsModel::posix);
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].files.at("f").size(), 6000u);
}

TEST(FsModel, UnsyncedDataMayBeMissingBlockBySizeOrTorn) {
  const std::vector<Op> log = {make(OpKind::create, 1, "f"), make(OpKind::fsync_dir),
                               make(OpKind::write, 1, "", 0, 6000)};
  const auto states = states_after(Image{}, log, FsModel::posix);
  // size 0 or 6000, each of 2 blocks old (zeros) or new, plus torn blocks.
  bool empty = false, zeros_tail = false, full = false, torn = false;
  for (const auto& s : states) {
    const auto& f = s.files.at("f");
    if (f.empty()) empty = true;
    if (f.size() == 6000 && f[0] == std::byte{0x5a} && f[5000] == std::byte{0}) zeros_tail = true;
    if (f.size() == 6000 && f[0] == std::byte{0x5a} && f[5999] == std::byte{0x5a}) full = true;
    if (f.size() == 6000 && std::count(f.begin(), f.begin() + 4096, std::byte{0x5a}) % 512 == 0 &&
        std::count(f.begin(), f.begin() + 4096, std::byte{0x5a}) != 0 &&
        std::count(f.begin(), f.begin() + 4096, std::byte{0x5a}) != 4096)
      torn = true;
  }
  EXPECT_TRUE(empty && zeros_tail && full && torn) << states.size() << " states";
  // The ordered model never shows a grown file with a zero tail.
  for (const auto& s : states_after(Image{}, log, FsModel::ordered)) {
    const auto& f = s.files.at("f");
    EXPECT_TRUE(f.empty() || f[5999] == std::byte{0x5a});
  }
}

TEST(FsModel, UnsyncedRenameIsAtomicAndOptional) {
  Image init;
  init.files["old"] = std::vector<std::byte>(10, std::byte{1});
  const std::vector<Op> log = {make(OpKind::create, 2, "t"), make(OpKind::write, 2, "", 0, 100), make(OpKind::fsync, 2),
                               make(OpKind::rename, 2, "t", 0, 0, "old")};
  bool before = false, after = false;
  for (const auto& s : states_after(init, log, FsModel::posix)) {
    ASSERT_EQ(s.files.count("old"), 1u);  // never lost: the rename is atomic
    if (s.files.at("old").size() == 10) before = true;
    if (s.files.at("old").size() == 100) after = true;
    EXPECT_TRUE(s.files.count("t") == 0 || s.files.at("old").size() == 10);
  }
  EXPECT_TRUE(before && after);
}

TEST(FsModel, UnsyncedDirectoryMayVanish) {
  const std::vector<Op> log = {make(OpKind::mkdir), make(OpKind::create, 1, "f"), make(OpKind::fsync, 1),
                               make(OpKind::fsync_dir)};
  bool gone = false;
  for (const auto& s : states_after(Image{false, {}}, log, FsModel::posix)) gone |= !s.dir_exists;
  EXPECT_TRUE(gone);
  auto synced = log;
  synced.push_back(make(OpKind::fsync_parent));
  const auto states = states_after(Image{false, {}}, synced, FsModel::posix);
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(states[0].dir_exists);
}

// ---- the recorder sees what the shipping code does ----

TEST(FsRecord, OneCommitIsWriteFsyncRenameFsyncDir) {
  TempDir root;
  const std::string dir = root.file("d");
  record_start(dir, Image{false, {}});
  {
    persist::Options o;
    o.strategy = "file";
    o.dir = dir;
    o.threads = 1;
    auto ctx = persist::Context::create(o).value();
    auto* r = ctx->region("r", 10000).value();
    ASSERT_TRUE(ctx->open().ok());
    std::memset(r->data(), 7, 10000);
    ASSERT_TRUE(ctx->begin().ok());
    ASSERT_TRUE(ctx->commit().ok());
  }
  const auto log = record_stop();
  std::string seq;
  for (const auto& op : log) seq += std::string(op_name(op.kind)) + " ";
  // mkdir, fsync of the parent (if the directory's creation is made durable),
  // then the commit protocol.
  EXPECT_NE(seq.find("create write write fsync rename fsync(dir)"), std::string::npos) << seq;
  EXPECT_EQ(seq.rfind("mkdir", 0), 0u) << seq;
  EXPECT_EQ(seq.find("unsupported"), std::string::npos) << seq;
}

// ---- the CI share ----

struct Share {
  std::string workload;
  FsModel model;
  double weight;  // of CAIRN_CRASH_STATES
};
void PrintTo(const Share& s, std::ostream* os) { *os << s.workload << "/" << model_name(s.model); }

class FsCrash : public ::testing::TestWithParam<Share> {};

TEST_P(FsCrash, EveryPowerFailureStateRecoversACommittedVersion) {
  const Share s = GetParam();
  const FsWorkload* w = find_fs_workload(s.workload);
  ASSERT_NE(w, nullptr);
  FsOptions o;
  o.model = s.model;
  o.seed = 20261123;
  o.max_failures = 5;
  const auto want = static_cast<std::uint64_t>(static_cast<double>(ci_crash_states()) * s.weight);
  o.target_states = want + want / 8;  // the step count is chosen from an estimate: aim a little higher
  const FsReport r = run_fs(*w, o);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_GE(r.states, want) << r.summary();
  EXPECT_GT(r.depth2_runs, 0u) << r.summary();
  RecordProperty("states", std::to_string(r.states));
  std::printf("%s\n", r.summary().c_str());
}

// Every strategy the registry marks CrashHarness::files, under both models.
std::vector<Share> shares() {
  std::vector<Share> out;
  for (const auto& r : persist::detail::registry())
    if (r.crash == persist::detail::CrashHarness::files) {
      out.push_back({r.name, FsModel::posix, 0.1});
      out.push_back({r.name, FsModel::ordered, 0.01});
    }
  // dist's flushed versions and their retention (issue 41).
  out.push_back({"dist_flush", FsModel::posix, 0.01});
  out.push_back({"dist_flush", FsModel::ordered, 0.004});
  // cairn stage out of a stream (issue 41).
  out.push_back({"stage_out", FsModel::posix, 0.02});
  out.push_back({"stage_out", FsModel::ordered, 0.005});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Crash, FsCrash, ::testing::ValuesIn(shares()), [](const ::testing::TestParamInfo<Share>& p) {
  std::string name = p.param.workload + "_" + model_name(p.param.model);
  for (char& c : name)
    if (c == '.' || c == '-') c = '_';
  return name;
});

TEST(FsCoverage, EveryFileStrategyHasAnExplorerWorkload) {
  for (const auto& r : persist::detail::registry()) {
    if (r.crash != persist::detail::CrashHarness::files) continue;
    EXPECT_NE(find_fs_workload(r.name), nullptr) << r.name << ": no file-system explorer workload (fs_explore.cpp)";
  }
}

// ---- test the tester ----

struct VariantCase {
  const char* workload;
  FsModel model;
};
void PrintTo(const VariantCase& c, std::ostream* os) { *os << c.workload << "/" << model_name(c.model); }

class FsVariants : public ::testing::TestWithParam<VariantCase> {};

TEST_P(FsVariants, BrokenVariantIsCaughtAndItsKeyReplays) {
  const VariantCase c = GetParam();
  const FsWorkload* w = find_fs_workload(c.workload);
  ASSERT_NE(w, nullptr);
  FsOptions o;
  o.model = c.model;
  o.seed = 7;
  o.steps = 4;
  o.depth2_every = 0;  // caught by depth 1 alone
  const FsReport r = run_fs(*w, o);
  std::printf("%s\n", r.summary().c_str());
  if (!w->broken) {
    EXPECT_TRUE(r.passed()) << r.summary();
    return;
  }
  ASSERT_FALSE(r.passed()) << "the explorer missed a broken variant: " << r.summary();
  auto again = replay_fs(r.failures[0].key);
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_FALSE(again.value().passed()) << "key did not replay: " << r.failures[0].key;
  EXPECT_EQ(again.value().failures[0].key, r.failures[0].key);
  EXPECT_EQ(again.value().failures[0].reason, r.failures[0].reason);
  EXPECT_EQ(again.value().states, 1u);
  if (w->variant == Variant::trust_header || w->variant == Variant::trust_tmp) return;  // no commit after recovery
  // Depth 2 catches it too: the commit made after a recovery is as broken.
  o.depth2_every = 1;
  o.max_failures = 40;
  const FsReport r2 = run_fs(*w, o);
  EXPECT_GT(r2.depth2_runs, 0u);
  EXPECT_TRUE(std::any_of(r2.failures.begin(), r2.failures.end(), [](const Failure& f) {
    return f.key.find('+') != std::string::npos;
  })) << r2.summary();
}

INSTANTIATE_TEST_SUITE_P(All, FsVariants,
                         ::testing::Values(VariantCase{"file.no_tmp_fsync", FsModel::posix},
                                           VariantCase{"file.no_tmp_fsync", FsModel::ordered},
                                           VariantCase{"file.no_dir_fsync", FsModel::posix},
                                           VariantCase{"file.no_dir_fsync", FsModel::ordered},
                                           VariantCase{"file.fsync_after_rename", FsModel::posix},
                                           VariantCase{"file.fsync_after_rename", FsModel::ordered},
                                           VariantCase{"file.trust_tmp", FsModel::posix},
                                           VariantCase{"file.trust_header", FsModel::posix},
                                           VariantCase{"dist_flush.no_tmp_fsync", FsModel::posix},
                                           VariantCase{"stage_out.no_tmp_fsync", FsModel::posix}),
                         [](const ::testing::TestParamInfo<VariantCase>& p) {
                           std::string name = std::string(p.param.workload) + "_" + model_name(p.param.model);
                           for (char& ch : name)
                             if (ch == '.' || ch == '-') ch = '_';
                           return name;
                         });

// A passing state replays as passing (and a key names exactly one state).
TEST(FsReplay, KeyFromTheEnvironment) {
  const char* key = std::getenv("CAIRN_FS_CRASH_KEY");
  const std::string k = key != nullptr ? key : "fs1:file:posix:7:3:7.3+9.2";
  auto r = replay_fs(k);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::printf("%s\n", r.value().summary().c_str());
  EXPECT_TRUE(r.value().passed()) << r.value().summary();
  if (key == nullptr) {
    EXPECT_EQ(r.value().states, 2u);
  }
}

}  // namespace
}  // namespace cairn::testing::crashsim::fs
