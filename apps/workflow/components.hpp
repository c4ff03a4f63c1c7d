// components.hpp — the five components of the solve-adapt workflow (seed 002's
// PHASTA-chef loop), each a function here and a separate executable
// (component_main.cpp). They exchange data only through named streams opened
// with cairn_stream_open, the one-line change from fopen: the coupling
// ($CAIRN_STREAM_PREFIX) decides whether a name is a file on tmpfs or disk, a
// buffer of this process (mem:) or a stream in a persistent pool (pmem:).
//
//   solve       part.P      -> solution.P   Jacobi sweeps of -lap u = f on the
//                                           part's leaves (ghost values fixed);
//                                           writes u and an error indicator
//   sizefield   solution.P  -> size.P       target level of each leaf
//   adapt       size.*      -> mesh         refine, coarsen, 2:1 balance
//   rebalance   mesh        -> balanced     Morton ranges of equal length
//                                           (--uniform L: the first mesh)
//   preprocess  balanced    -> part.*       one input per solver process: its
//                                           leaves and its ghost leaves
//
// Every stream is a text header line ("cairn-workflow/1 KIND cycle=C part=P
// parts=N count=K") and K binary records {key, value, aux} written with
// fwrite, as a solver's restart file is. A reader checks the kind, cycle, part
// and length, so a stale, foreign or truncated input is a clear error, never
// a silently different run. The components are deterministic: the same inputs
// give the same bytes whatever the coupling.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::apps::workflow {

struct Params {
  int cycle = 0;
  int part = 0;   // solve, sizefield: which part; others: unused
  int parts = 2;  // solver processes
  int level_min = 3, level_max = 9;
  int sweeps = 100;       // Jacobi sweeps per solve
  double tol = 2e-3;      // refine where the indicator exceeds tol, coarsen below tol/4
  int uniform_level = 0;  // rebalance: > 0 writes the uniform first mesh instead of reading one
  // Fault injection (component executables only: $CAIRN_WORKFLOW_KILL): once
  // this fraction of the component's output bytes is written, it flushes and
  // SIGKILLs itself. < 0: never.
  double kill_fraction = -1;
  // With kill_fraction ($CAIRN_WORKFLOW_KILL_WAIT): instead of killing itself
  // at that point it creates this file and waits to be killed from outside,
  // so that a test's kill of the whole workflow lands there by construction.
  std::string kill_wait;
};

// Where a component spent its time; read and write include opening and
// closing (the commit of a pmem: writer).
struct Times {
  double read_s = 0, compute_s = 0, write_s = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
};

// The components, by name.
inline constexpr std::string_view kComponents[] = {"solve", "sizefield", "adapt", "rebalance", "preprocess"};
bool is_component(std::string_view name);

// Runs one component with the streams of the current $CAIRN_STREAM_PREFIX.
Result<Times> run_component(std::string_view component, const Params& params);

// The main() of the executable workflow-<component> (component_main.cpp):
// its options, the run, the times line for the driver; the exit status.
int component_main(std::string_view component, int argc, char** argv);

// Stream names.
std::string part_stream(int part);      // "part.P"
std::string solution_stream(int part);  // "solution.P"

// One record of a stream.
struct Record {
  std::uint64_t key;
  double value;
  double aux;  // indicator, target level, part or owned flag, by kind
};
static_assert(sizeof(Record) == 24);

// A stream's records, open for reading. Where the stream shows its
// committed bytes in place (cairn_stream_view: a pmem: version in the pool
// mapping, a mem: buffer, a file: mapping) and the records are 8-byte
// aligned there (writers pad the header line to a multiple of 8 bytes), they
// are used where they lie, without a copy; otherwise they are read with
// fread into a buffer, the FILE* path every stream has. The stream stays
// open, and its version pinned, while the Input lives.
class Input {
 public:
  std::span<const Record> records() const { return records_; }
  bool in_place() const { return copy_.empty() && !records_.empty(); }

 private:
  friend Result<Input> open_records(const std::string&, std::string_view, int, int, int, std::uint64_t*);
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Closer> file_;
  std::vector<Record> copy_;
  std::span<const Record> records_;
};

// Opens a stream written by a component and checks it (as described above).
Result<Input> open_records(const std::string& name, std::string_view kind, int cycle, int part, int parts,
                           std::uint64_t* bytes = nullptr);
// The same, copied out and the stream closed.
Result<std::vector<Record>> read_records(const std::string& name, std::string_view kind, int cycle, int part, int parts,
                                         std::uint64_t* bytes = nullptr);

// The source term of the solve at cycle `cycle`: a Gaussian that circles the
// square's centre once every 16 cycles.
double source(double x, double y, int cycle);

}  // namespace cairn::apps::workflow
