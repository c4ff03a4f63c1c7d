// supervise.hpp — the channel between a supervised compute process and its
// rank process (internal to dist; cairn/dist.hpp describes supervise()).
//
// The compute process sends a request {op, commit version, n} and n 64-bit
// words over a socket pair; the rank process answers with the result words.
// min_int: MPI_Allreduce(MIN) of one int (commit version > 0: the agreement
// on that version, which the supervisor records as the job's newest global
// version when it succeeds); started: the compute process restored (or starts
// from scratch at) the version given, from now on a death is restarted in
// place. No answer to started.
// The exchanges of an iteration (commit version = the iteration being
// computed), each with its sequence number in the iteration: sendrecv {dest,
// source, send bytes, receive bytes, sequence} and the bytes, answered with
// the bytes received; allgather {sequence} and n words, answered with n words
// from every rank (commit version 0: restore's own, never replayed). The
// supervisor keeps the answers of the newest iteration and replays them to a
// replacement that recomputes it, refusing one whose calls differ.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::dist::detail {

enum class Op : std::uint32_t { min_int = 1, allgather = 2, started = 3, sendrecv = 4 };

struct Request {
  Op op;
  std::uint32_t words;
  std::uint64_t commit_version;
};

// Sends a request and waits for `out_words` words of answer. A supervisor
// that is gone ends the compute process (nothing else can answer).
void ask_supervisor(int fd, Op op, std::uint64_t commit_version, const std::uint64_t* in, std::size_t in_words,
                    std::uint64_t* out, std::size_t out_words);

}  // namespace cairn::dist::detail
