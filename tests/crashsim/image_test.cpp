// image_test.cpp — memfd images and write tracking through write faults.
#include "tests/crashsim/image.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

namespace cairn::testing::crashsim {
namespace {

TEST(crashsim_image, ViewAndAliasShareBytes) {
  auto img = Image::create(3 * kPage + 5);
  ASSERT_TRUE(img.ok());
  auto& i = *img.value();
  EXPECT_EQ(i.size(), 4 * kPage);
  i.alias()[100] = std::byte{7};
  EXPECT_EQ(i.view()[100], std::byte{7});
}

TEST(crashsim_image, TrackerLearnsWrittenPagesOnceAndIgnoresAliasWrites) {
  auto img = Image::create(16 * kPage);
  ASSERT_TRUE(img.ok());
  auto& i = *img.value();
  ASSERT_TRUE(i.tracker().start().ok());
  i.alias()[5 * kPage] = std::byte{1};  // the harness's own writes do not count
  i.view()[3 * kPage + 10] = std::byte{2};
  i.view()[3 * kPage + 20] = std::byte{3};
  i.view()[9 * kPage] = std::byte{4};
  std::memset(i.view() + 12 * kPage - 8, 0x55, 16);  // spans pages 11 and 12
  std::set<std::uint32_t> got;
  for (std::size_t k = 0; k < i.tracker().learned_count(); ++k) got.insert(i.tracker().learned(k));
  EXPECT_EQ(got, (std::set<std::uint32_t>{3, 9, 11, 12}));
  EXPECT_EQ(i.tracker().learned_count(), 4u);
  EXPECT_EQ(i.view()[3 * kPage + 20], std::byte{3});
  // Forgetting clean pages protects them again; writing learns them again.
  i.tracker().forget_clean([](std::uint32_t p) { return p == 9; });
  EXPECT_EQ(i.tracker().learned_count(), 3u);
  i.view()[9 * kPage + 1] = std::byte{5};
  EXPECT_EQ(i.tracker().learned_count(), 4u);
  i.tracker().stop();
  i.view()[0] = std::byte{6};  // not tracked any more: no fault
  EXPECT_EQ(i.tracker().learned_count(), 4u);
}

TEST(crashsim_image, PrivatizedViewKeepsAChildsWritesInTheChild) {
  auto img = Image::create(2 * kPage);
  ASSERT_TRUE(img.ok());
  auto& i = *img.value();
  i.alias()[0] = std::byte{1};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!i.privatize_view().ok()) _exit(2);
    i.view()[0] = std::byte{9};
    _exit(i.view()[0] == std::byte{9} ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(i.alias()[0], std::byte{1});
  EXPECT_EQ(i.view()[0], std::byte{1});
}

}  // namespace
}  // namespace cairn::testing::crashsim
