// cg.cpp — NPB CG: matrix generation (makea) and the CG iteration as a
// persistence step.
#include "apps/npb/cg.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "apps/npb/randlc.hpp"

namespace cairn::npb {

namespace {

// One random sparse vector of the specification (sprnvc, then vecset):
// `nonzer` distinct positions in [0, n) with random values, drawn as
// (value, position) pairs from the stream; positions are drawn as
// floor(nn1 * u) with nn1 the least power of two >= n and rejected when out of
// range or already present. Then element `diagonal` is set to 0.5 (appended
// if absent).
void random_vector(int n, int nn1, int nonzer, int diagonal, std::uint64_t& stream, std::vector<int>& idx,
                   std::vector<double>& val) {
  idx.clear();
  val.clear();
  while (static_cast<int>(idx.size()) < nonzer) {
    const double value = randlc(stream);
    const double where = randlc(stream);
    const int pos = static_cast<int>(static_cast<double>(nn1) * where);
    if (pos >= n) continue;
    if (std::find(idx.begin(), idx.end(), pos) != idx.end()) continue;
    idx.push_back(pos);
    val.push_back(value);
  }
  const auto it = std::find(idx.begin(), idx.end(), diagonal);
  if (it != idx.end()) {
    val[static_cast<std::size_t>(it - idx.begin())] = 0.5;
  } else {
    idx.push_back(diagonal);
    val.push_back(0.5);
  }
}

}  // namespace

std::optional<CgClass> cg_class(char name) {
  switch (name) {
    case 'S': return CgClass{'S', 1400, 7, 15, 10.0, 8.5971775078648};
    case 'W': return CgClass{'W', 7000, 8, 15, 12.0, 10.362595087124};
    case 'A': return CgClass{'A', 14000, 11, 15, 20.0, 17.130235054029};
    case 'B': return CgClass{'B', 75000, 13, 75, 60.0, 22.712745482631};
    case 'C': return CgClass{'C', 150000, 15, 75, 110.0, 28.973605592845};
    default: return std::nullopt;
  }
}

CsrMatrix cg_make_matrix(const CgClass& cls) {
  const int n = cls.na;
  std::uint64_t stream = kRandSeed;
  randlc(stream);  // the benchmark draws one number (its initial "zeta") before makea
  int nn1 = 1;
  while (nn1 < n) nn1 *= 2;

  // The n random vectors, stored back to back.
  std::vector<std::int64_t> vstart(static_cast<std::size_t>(n) + 1, 0);
  std::vector<int> vidx;
  std::vector<double> vval;
  std::vector<int> idx;
  std::vector<double> val;
  for (int i = 0; i < n; ++i) {
    random_vector(n, nn1, cls.nonzer, i, stream, idx, val);
    vidx.insert(vidx.end(), idx.begin(), idx.end());
    vval.insert(vval.end(), val.begin(), val.end());
    vstart[static_cast<std::size_t>(i) + 1] = static_cast<std::int64_t>(vidx.size());
  }

  // Row j receives one entry per element of every vector that has a nonzero
  // at j: count them, then lay the outer-product terms out row by row.
  std::vector<std::int64_t> tstart(static_cast<std::size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const std::int64_t len = vstart[i + 1] - vstart[i];
    for (std::int64_t e = vstart[i]; e < vstart[i + 1]; ++e) tstart[vidx[e] + 1] += len;
  }
  for (int j = 0; j < n; ++j) tstart[j + 1] += tstart[j];
  struct Term {
    int col;
    double value;
  };
  std::vector<Term> terms(static_cast<std::size_t>(tstart[n]));
  std::vector<std::int64_t> cursor(tstart.begin(), tstart.end() - 1);

  // A = sum_i size_i v_i v_i^T + (rcond - shift) I, size_i = rcond^(i/n).
  // The diagonal shift joins entry (i, i) with vector i's own term, and terms
  // are summed in order of i: the same floating-point sums as the benchmark.
  const double ratio = std::pow(kCgRcond, 1.0 / static_cast<double>(n));
  double size = 1.0;
  for (int i = 0; i < n; ++i) {
    for (std::int64_t e = vstart[i]; e < vstart[i + 1]; ++e) {
      const int row = vidx[e];
      const double scale = size * vval[e];
      for (std::int64_t f = vstart[i]; f < vstart[i + 1]; ++f) {
        const int col = vidx[f];
        double value = vval[f] * scale;
        if (col == row && row == i) value = value + kCgRcond - cls.shift;
        terms[cursor[row]++] = Term{col, value};
      }
    }
    size = size * ratio;
  }

  // Sort each row by column (stable: equal columns stay in order of i) and
  // add up the duplicates.
  CsrMatrix m;
  m.n = n;
  m.rowstr.assign(static_cast<std::size_t>(n) + 1, 0);
  m.colidx.reserve(terms.size());
  m.a.reserve(terms.size());
  for (int j = 0; j < n; ++j) {
    const auto first = terms.begin() + tstart[j], last = terms.begin() + tstart[j + 1];
    std::stable_sort(first, last, [](const Term& l, const Term& r) { return l.col < r.col; });
    for (auto t = first; t != last;) {
      const int col = t->col;
      double sum = 0.0;
      for (; t != last && t->col == col; ++t) sum += t->value;
      m.colidx.push_back(col);
      m.a.push_back(sum);
    }
    m.rowstr[j + 1] = static_cast<std::int64_t>(m.a.size());
  }
  return m;
}

CgSolver::CgSolver(const CgClass& cls)
    : cls_(cls),
      matrix_(cg_make_matrix(cls)),
      chunk_hi_(cg_chunks(cls.na)),
      q_(static_cast<std::size_t>(cls.na)),
      partial_(3 * static_cast<std::size_t>(cg_chunks(cls.na))) {}

CgSolver::CgSolver(const CgClass& cls, int chunk_lo, int chunk_hi, CgExchange& exchange)
    : cls_(cls),
      matrix_(cg_make_matrix(cls)),
      chunk_lo_(chunk_lo),
      chunk_hi_(chunk_hi),
      exchange_(&exchange),
      q_(rows()),
      partial_(3 * static_cast<std::size_t>(cg_chunks(cls.na))),
      all_(static_cast<std::size_t>(cls.na)) {
  assert(0 <= chunk_lo && chunk_lo < chunk_hi && chunk_hi <= cg_chunks(cls.na));
}

void CgSolver::init(const CgVectors& out, CgScalars& s, const LoopRunner& loops) const {
  loops(rows(), [&](std::size_t lo, std::size_t hi) {
    std::fill(out.x + lo, out.x + hi, 1.0);
    std::fill(out.z + lo, out.z + hi, 0.0);
    std::fill(out.r + lo, out.r + hi, 0.0);
    std::fill(out.p + lo, out.p + hi, 0.0);
  });
  s = CgScalars{};
}

void CgSolver::each_chunk(const LoopRunner& loops, const std::function<void(int c, int lo, int hi)>& body) const {
  const int n = matrix_.n;
  loops(static_cast<std::size_t>(chunk_hi_ - chunk_lo_), [&](std::size_t c0, std::size_t c1) {
    for (int c = chunk_lo_ + static_cast<int>(c0); c < chunk_lo_ + static_cast<int>(c1); ++c)
      body(c, c * kCgChunk, std::min(n, (c + 1) * kCgChunk));
  });
}

template <int K>
std::array<double, K> CgSolver::sum_partials() const {
  if (exchange_) exchange_->gather_partials(partial_.data(), K);
  std::array<double, K> sum{};
  const int nc = cg_chunks(matrix_.n);
  for (int c = 0; c < nc; ++c)
    for (int j = 0; j < K; ++j) sum[j] += partial_[static_cast<std::size_t>(K * c + j)];
  return sum;
}

const double* CgSolver::whole(const double* mine) const {
  if (!exchange_) return mine;
  exchange_->gather_rows(mine, all_.data());
  return all_.data();
}

double CgSolver::dot(const double* a, const double* b, const LoopRunner& loops) const {
  const int row0 = row_lo();
  double* partial = partial_.data();
  each_chunk(loops, [&](int c, int lo, int hi) {
    double sum = 0.0;
    for (int i = lo - row0; i < hi - row0; ++i) sum += a[i] * b[i];
    partial[c] = sum;
  });
  return sum_partials<1>()[0];
}

// Vectors are indexed from this process's first row (row0; 0 in one
// process), the matrix and the gathered whole vectors by global row.
void CgSolver::step(const CgInputs& in, const CgVectors& out, const CgScalars& s_in, CgScalars& s_out,
                    const LoopRunner& loops, const CgWritten& written) {
  const auto report = [&](CgPart part) {
    if (written) written(part);
  };
  CgScalars s = s_in;
  const int row0 = row_lo();
  const std::int64_t* rowstr = matrix_.rowstr.data();
  const int* colidx = matrix_.colidx.data();
  const double* a = matrix_.a.data();
  double* q = q_.data();
  double* partial = partial_.data();

  // The first iteration of an outer iteration starts from z = 0, r = p = x.
  const bool first = s.inner == 0;
  const double* x_in = in.x;
  const double* z_in = in.z;
  const double* r_in = first ? in.x : in.r;
  const double* p_in = first ? in.x : in.p;
  const double rho = first ? dot(in.x, in.x, loops) : s.rho;

  // q = A p, and p.q.
  const double* p_all = whole(p_in);
  each_chunk(loops, [&](int c, int lo, int hi) {
    double sum = 0.0;
    for (int i = lo; i < hi; ++i) {
      double t = 0.0;
      for (std::int64_t k = rowstr[i]; k < rowstr[i + 1]; ++k) t += a[k] * p_all[colidx[k]];
      q[i - row0] = t;
      sum += p_in[i - row0] * t;
    }
    partial[c] = sum;
  });
  const double pq = sum_partials<1>()[0];
  const double alpha = rho / pq;

  // z += alpha p, r -= alpha q, and the new r.r.
  double* z_out = out.z;
  double* r_out = out.r;
  each_chunk(loops, [&](int c, int lo, int hi) {
    double sum = 0.0;
    for (int i = lo - row0; i < hi - row0; ++i) {
      z_out[i] = (first ? 0.0 : z_in[i]) + alpha * p_in[i];
      const double ri = r_in[i] - alpha * q[i];
      r_out[i] = ri;
      sum += ri * ri;
    }
    partial[c] = sum;
  });
  report(CgPart::z);
  report(CgPart::r);
  const double rho_new = sum_partials<1>()[0];
  const double beta = rho_new / rho;

  // p = r + beta p; x is carried over unless this step ends the outer iteration.
  const bool last = s.inner + 1 == kCgIterations;
  double* p_out = out.p;
  double* x_out = out.x;
  const bool copy_x = !last && x_out != x_in;
  loops(rows(), [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      p_out[i] = r_out[i] + beta * p_in[i];
      if (copy_x) x_out[i] = x_in[i];
    }
  });
  report(CgPart::p);
  if (copy_x) report(CgPart::x);
  s.rho = rho_new;
  s.inner += 1;

  if (last) {
    // End of the outer iteration: ||x - A z||, zeta = shift + 1 / (x.z), x = z / ||z||.
    const double* z_all = whole(z_out);
    each_chunk(loops, [&](int c, int lo, int hi) {
      double res = 0.0, xz = 0.0, zz = 0.0;
      for (int i = lo; i < hi; ++i) {
        double t = 0.0;
        for (std::int64_t k = rowstr[i]; k < rowstr[i + 1]; ++k) t += a[k] * z_all[colidx[k]];
        const double d = x_in[i - row0] - t;
        res += d * d;
        xz += x_in[i - row0] * z_out[i - row0];
        zz += z_out[i - row0] * z_out[i - row0];
      }
      partial[3 * c] = res;
      partial[3 * c + 1] = xz;
      partial[3 * c + 2] = zz;
    });
    const auto [res, xz, zz] = sum_partials<3>();
    const double scale = 1.0 / std::sqrt(zz);
    loops(rows(), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) x_out[i] = scale * z_out[i];
    });
    report(CgPart::x);
    s.rnorm = std::sqrt(res);
    s.zeta = cls_.shift + 1.0 / xz;
    s.outer += 1;
    s.inner = 0;
  }
  s_out = s;
}

CgResult CgSolver::verify(const CgScalars& s) const {
  const double err = std::fabs(s.zeta - cls_.zeta_verify) / cls_.zeta_verify;
  const bool complete = s.outer == cls_.niter && s.inner == 0;
  return CgResult{complete && err <= kCgTolerance, s.zeta, cls_.zeta_verify, err};
}

}  // namespace cairn::npb
