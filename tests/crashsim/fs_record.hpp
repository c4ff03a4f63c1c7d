// fs_record.hpp — records what a program does to one directory's files by
// interposing the libc calls (open*, creat, write, pwrite, fsync, fdatasync,
// ftruncate, rename*, unlink*, remove, mkdir, close, and the calls the model
// does not know, which are recorded as `unsupported`). The definitions live
// in fs_record.cpp, which must be linked into the test executable itself
// (never into a library: it would interpose every program linking it); each
// forwards to the next definition (dlsym RTLD_NEXT), so the real I/O happens
// and the code under test is the shipping code. Off by default: a call costs
// one atomic load then.
#pragma once

#include <string>
#include <vector>

#include "tests/crashsim/fs_model.hpp"

namespace cairn::testing::crashsim::fs {

// Starts recording operations on `dir` (an absolute path without a trailing
// slash; it need not exist yet) and its entry in its parent. `initial` is
// what it holds now; its files get inode numbers 1.. in name order.
void record_start(const std::string& dir, const Image& initial);
// A workload marker (OpKind::begin / OpKind::end) in the log.
void record_marker(OpKind kind, std::uint64_t value);
// Stops recording and returns the log.
std::vector<Op> record_stop();

}  // namespace cairn::testing::crashsim::fs
