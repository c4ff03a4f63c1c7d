// syscall_faults.hpp — make a system call fail on demand (fmt's posix-mock
// idea), for the error paths of code that writes files. The definitions in
// syscall_faults.cpp interpose fsync, rename and the opening of directories
// (open* with O_DIRECTORY); they must be linked into the test executable
// itself (cairn_test(... ../tests/support/syscall_faults.cpp)), never into a
// library. Unarmed, each forwards to the next definition (libc, or a
// sanitizer's interceptor): the code under test is the shipping code.
#pragma once

namespace cairn::testing {

enum class Syscall { fsync, rename, open_dir };

// The nth call of `call` from now (1: the next one) fails with errno `err`,
// once; calls of other kinds are not counted. One fault armed at a time.
void fail_syscall(Syscall call, int nth, int err);
// Disarms; returns whether the armed fault was delivered.
bool clear_syscall_fault();

// Arms for a scope.
class SyscallFault {
 public:
  SyscallFault(Syscall call, int nth, int err) { fail_syscall(call, nth, err); }
  ~SyscallFault() { clear_syscall_fault(); }
  SyscallFault(const SyscallFault&) = delete;
  SyscallFault& operator=(const SyscallFault&) = delete;
  // Whether the fault was delivered (disarms).
  bool delivered() { return clear_syscall_fault(); }
};

}  // namespace cairn::testing
