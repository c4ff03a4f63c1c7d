// cg.hpp — NPB CG: the smallest eigenvalue of a random sparse symmetric
// positive definite matrix by inverse power iteration, each outer iteration
// solving A z = x with 25 unpreconditioned conjugate gradient iterations.
//
// Written from the NPB 3.x specification. The matrix is built exactly as the
// specification prescribes (randlc stream from seed 314159265; na random
// sparse vectors with nonzer + 1 entries each; A = sum_i size_i v_i v_i^T +
// (rcond - shift) I with size_i = rcond^(i/na)), so zeta agrees with the
// official values to the NPB tolerance (1e-10 relative).
//
// Persistence: one step is ONE inner CG iteration, so the CG vectors z, r, p
// are versioned every iteration (seed 004 Table 2). A step reads its input
// vectors from `in` and writes every element of the `out` vectors, so the
// caller may keep z, r, p in DualRegions (in = read(), out = write()) or in
// plain regions (in == out: every element is read before it is rewritten and
// no neighbouring element is read after). x changes only when an outer
// iteration ends; when in.x != out.x the step copies it. The scalars (rho,
// iteration counters, zeta) travel in CgScalars, also in -> out (may alias).
// The matrix is read-only and rebuilt identically on resume.
//
// Reductions are deterministic and independent of the thread count: partial
// sums over fixed 256-row chunks, added in chunk order (parallel.hpp).
//
// Distributed (apps/npb-cg-mpi): every process builds the whole matrix and
// owns a block of whole chunks; its vectors hold only its rows. A step asks a
// CgExchange for the two things it needs from the others: every row of p
// (and of z when an outer iteration ends) for the matrix-vector product, and
// the other chunks' partial sums, which every process then adds in chunk
// order itself. Each chunk's partial is computed over the same rows in the
// same order as in one process, so the results agree bit for bit with a
// single-process run on any number of processes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "apps/npb/parallel.hpp"

namespace cairn::npb {

struct CgClass {
  char name;
  int na;        // matrix order
  int nonzer;    // nonzeros per random vector (before the diagonal element is set)
  int niter;     // outer (inverse power) iterations
  double shift;  // lambda
  double zeta_verify;
};

inline constexpr int kCgIterations = 25;       // cgitmax: inner CG iterations per outer iteration
inline constexpr double kCgRcond = 0.1;        // condition number parameter
inline constexpr double kCgTolerance = 1e-10;  // relative, on zeta
inline constexpr int kCgChunk = 256;           // rows per partial sum; fixes the reduction order

// Chunks of kCgChunk rows (the last one shorter) of an order-n matrix.
inline int cg_chunks(int n) { return (n + kCgChunk - 1) / kCgChunk; }

// Classes S, W, A, B, C; nullopt for anything else.
std::optional<CgClass> cg_class(char name);

// Compressed sparse rows, column indices ascending within a row.
struct CsrMatrix {
  int n = 0;
  std::vector<std::int64_t> rowstr;  // n + 1 offsets
  std::vector<int> colidx;
  std::vector<double> a;
};

// NPB's makea: the random vectors (sprnvc, vecset) and their assembly (sparse).
CsrMatrix cg_make_matrix(const CgClass& cls);

// Persisted scalars. Trivially copyable, fixed layout.
struct CgScalars {
  std::int64_t outer = 0;  // outer iterations completed
  std::int64_t inner = 0;  // CG iterations completed within the current outer iteration
  double rho = 0;          // r.r after the last CG iteration
  double zeta = 0;         // shift + 1 / (x.z) of the last completed outer iteration
  double rnorm = 0;        // ||x - A z|| of the last completed outer iteration
};
static_assert(sizeof(CgScalars) == 40);

// The state vectors, each na doubles (distributed: this process's rows).
struct CgVectors {
  double* x;
  double* z;
  double* r;
  double* p;
};

// The same, read-only: a step's input (DualRegion::read()).
struct CgInputs {
  CgInputs(const double* x_, const double* z_, const double* r_, const double* p_) : x(x_), z(z_), r(r_), p(p_) {}
  CgInputs(const CgVectors& v) : x(v.x), z(v.z), r(v.r), p(v.p) {}  // NOLINT: implicit on purpose
  const double* x;
  const double* z;
  const double* r;
  const double* p;
};

// A step reports each output vector once it will not write it again (for
// proactive flushing, seed 004 §4.2).
enum class CgPart { z, r, p, x };
using CgWritten = std::function<void(CgPart)>;

struct CgResult {
  bool verified;
  double zeta;
  double reference;
  double relative_error;
};

// What a distributed step needs from the other processes (each owning a
// block of whole chunks). Every process calls both in the same order.
class CgExchange {
 public:
  virtual ~CgExchange() = default;
  // full[0, na) = every process's rows of one vector; `mine` holds this
  // process's rows.
  virtual void gather_rows(const double* mine, double* full) = 0;
  // Each process has written partial[stride * c + j] (0 <= j < stride) for
  // its own chunks c; fills in every other chunk's.
  virtual void gather_partials(double* partial, int stride) = 0;
};

class CgSolver {
 public:
  // Builds the matrix (serially; deterministic). Every row in this process.
  explicit CgSolver(const CgClass& cls);
  // This process owns chunks [chunk_lo, chunk_hi) of cg_chunks(na) (at least
  // one); its vectors hold rows [row_lo(), row_hi()). `exchange` must outlive
  // the solver.
  CgSolver(const CgClass& cls, int chunk_lo, int chunk_hi, CgExchange& exchange);

  const CgClass& problem() const { return cls_; }
  int n() const { return matrix_.n; }
  int row_lo() const { return chunk_lo_ * kCgChunk; }
  int row_hi() const { return std::min(matrix_.n, chunk_hi_ * kCgChunk); }
  std::size_t rows() const { return static_cast<std::size_t>(row_hi() - row_lo()); }
  std::size_t nonzeros() const { return matrix_.a.size(); }
  // Persistence steps of a whole run: niter * 25.
  std::int64_t total_steps() const { return std::int64_t{cls_.niter} * kCgIterations; }
  // Steps taken so far according to s.
  static std::int64_t steps_done(const CgScalars& s) { return s.outer * kCgIterations + s.inner; }
  // Steps may continue past the class's iteration count (more inverse power
  // iterations), but only a state at exactly niter outer iterations verifies.
  bool done(const CgScalars& s) const { return s.outer >= cls_.niter; }

  // The starting state: x = 1, z = r = p = 0, counters zero.
  void init(const CgVectors& out, CgScalars& s, const LoopRunner& loops) const;
  // One CG iteration; the 25th also ends the outer iteration (zeta, rnorm,
  // x = z / ||z||). in and out may be the same buffers; s_in may be s_out.
  // written (optional) hears of each output vector as soon as it is final.
  void step(const CgInputs& in, const CgVectors& out, const CgScalars& s_in, CgScalars& s_out, const LoopRunner& loops,
            const CgWritten& written = {});

  // The verification test on the zeta of the final state.
  CgResult verify(const CgScalars& s) const;

 private:
  // body(c, lo, hi) for each chunk c this process owns, rows [lo, hi).
  void each_chunk(const LoopRunner& loops, const std::function<void(int c, int lo, int hi)>& body) const;
  // Every chunk's partials (stride K), every process's, added in chunk order.
  template <int K>
  std::array<double, K> sum_partials() const;
  // All rows of a vector of which this process holds its rows (one process: `mine`).
  const double* whole(const double* mine) const;
  double dot(const double* a, const double* b, const LoopRunner& loops) const;
  CgClass cls_;
  CsrMatrix matrix_;
  int chunk_lo_ = 0, chunk_hi_ = 0;
  CgExchange* exchange_ = nullptr;
  std::vector<double> q_;                // A p (this process's rows), scratch
  mutable std::vector<double> partial_;  // per-chunk partial sums, 3 per chunk (every chunk)
  mutable std::vector<double> all_;      // distributed: every row of p, then of z
};

}  // namespace cairn::npb
