// progress.hpp — the workflow driver's progress record (internal to
// apps/workflow): which step a resumed run starts at, committed to the
// stream `workflow.progress` after every step.
//
// Format 2, one line: "cairn-workflow-progress/2 next=K crc=XXXXXXXX SIGNATURE\n",
// the CRC-32C (8 hex digits) over the line without its " crc=XXXXXXXX" and
// newline. A pmem: stream checks its own bytes, but file: progress on a disk
// has only this: a damaged digit of K would resume at another step. Format 1
// (no CRC) is refused as wrong_version.
#pragma once

#include <string>
#include <string_view>

#include "cairn/error.hpp"

namespace cairn::apps::workflow {

// The record's longest form the reader accepts (the signature is a few
// dozen characters).
inline constexpr std::size_t kMaxProgressBytes = 4096;
// Steps a run has at most (a next= beyond it is damage, not a step).
inline constexpr int kMaxProgressStep = 1 << 20;

std::string format_progress(int next, const std::string& signature);
// The step to resume at, from the record's bytes read from `uri`: the record
// of another program is Errc::foreign_file, format 1 Errc::wrong_version,
// a damaged one Errc::corrupted, another run's Errc::layout_mismatch; each
// message names `uri` and what to do.
Result<int> parse_progress(std::string_view text, const std::string& signature, const std::string& uri);

}  // namespace cairn::apps::workflow
