// progress_test.cpp — the workflow driver's progress record: written and
// read back, an older format and another run's record refused, and every
// single-bit flip and truncation of a record a typed error or the same step.
#include "apps/workflow/progress.hpp"

#include <gtest/gtest.h>

#include <string>

namespace cairn::apps::workflow {
namespace {

const std::string kSig = "parts=4 cycles=2 level-max=6";

TEST(WorkflowProgress, ARecordReadsBackAsItsStep) {
  for (int next : {0, 1, 7, 123}) {
    auto r = parse_progress(format_progress(next, kSig), kSig, "pmem:p#workflow.progress");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value(), next);
  }
}

TEST(WorkflowProgress, AnOlderForeignOrOtherRunsRecordIsTyped) {
  const std::string uri = "file:/x/workflow.progress";
  auto old = parse_progress("cairn-workflow-progress/1 next=3 " + kSig + "\n", kSig, uri);
  EXPECT_EQ(old.error().code, Errc::wrong_version);
  EXPECT_NE(old.error().message.find(uri), std::string::npos) << old.error().message;
  EXPECT_NE(old.error().message.find("format 1"), std::string::npos) << old.error().message;
  EXPECT_EQ(parse_progress("hello\n", kSig, uri).error().code, Errc::foreign_file);
  EXPECT_EQ(parse_progress("", kSig, uri).error().code, Errc::foreign_file);
  EXPECT_EQ(parse_progress(format_progress(2, "parts=8"), kSig, uri).error().code, Errc::layout_mismatch);
  // A step past any run, or an integer no int holds, with a matching CRC.
  EXPECT_EQ(parse_progress(format_progress(kMaxProgressStep + 1, kSig), kSig, uri).error().code, Errc::corrupted);
  EXPECT_EQ(parse_progress("cairn-workflow-progress/2 next=99999999999999999999 crc=00000000 " + kSig + "\n", kSig, uri)
                .error()
                .code,
            Errc::corrupted);
  // Trailing bytes after the record.
  EXPECT_EQ(parse_progress(format_progress(2, kSig) + "x", kSig, uri).error().code, Errc::corrupted);
}

// Before the CRC (format 1) a flipped digit of next= resumed at another step.
TEST(WorkflowProgress, EveryBitFlipAndTruncationGivesATypedErrorOrTheSameStep) {
  const std::string record = format_progress(5, kSig);
  int typed = 0, same = 0;
  for (std::size_t cut = 0; cut <= record.size(); ++cut)
    for (int bit = -1; bit < static_cast<int>(8 * cut); ++bit) {
      std::string d = record.substr(0, cut);
      if (bit >= 0)
        d[static_cast<std::size_t>(bit / 8)] =
            static_cast<char>(d[static_cast<std::size_t>(bit / 8)] ^ (1 << (bit % 8)));
      auto r = parse_progress(d, kSig, "u");
      if (!r.ok()) {
        EXPECT_NE(r.error().code, Errc::ok);
        ++typed;
        continue;
      }
      EXPECT_EQ(r.value(), 5) << "bit " << bit << " of a record cut to " << cut << " bytes: another step";
      ++same;
    }
  EXPECT_EQ(same, 1);
  EXPECT_GT(typed, 0);
}

}  // namespace
}  // namespace cairn::apps::workflow
