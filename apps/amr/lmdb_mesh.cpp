// lmdb_mesh.cpp — the out-of-core baseline (seed 000 §5's Etree): the same
// simulation on a linear octree whose leaves live in an LMDB B+-tree, keyed
// by Morton code (big-endian, so LMDB's byte order is Morton order), with
// value {c, dv}. Every access goes through LMDB: the leaf containing a point
// is the greatest key not above the point's finest-level key (leaves tile the
// domain), fluxes are accumulated into the records' dv, adaptation and 2:1
// balance delete and insert records. Nothing of the mesh is kept in DRAM
// between operations except the lists of octants an operation changes.
//
// The operations follow the PM-octree ones face for face and in the same
// order (faces reported from the finer or the lower leaf, leaves in Morton
// order), so the run ends with the same checksum as the pm-octree and
// in-core backends: the test compares them.
//
// Persistence is LMDB's: one write transaction per persist_every steps,
// committed with its default synchronous commit; restart opens the
// environment and reads the step from the "meta" database.
#include <lmdb.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "apps/amr/amr.hpp"

namespace cairn::apps::amr {
namespace {

using octree::Octant;
using namespace model;
using Clock = std::chrono::steady_clock;

struct Fail {
  Error error;
};
void check(int rc, const char* what, const std::string& path) {
  if (rc == 0) return;
  const Errc code = rc == MDB_MAP_FULL ? Errc::out_of_space : rc == ENOENT ? Errc::not_found : Errc::io_error;
  throw Fail{{code, std::string("lmdb ") + what + " on " + path + ": " + mdb_strerror(rc) +
                        (rc == MDB_MAP_FULL ? " (raise --pool-size)" : "")}};
}

struct Record {
  double c, dv;
};

std::uint64_t key_of(const Octant& o) { return octree::morton(o, 3); }
void encode(std::uint64_t m, unsigned char out[8]) {
  for (int i = 7; i >= 0; --i, m >>= 8) out[i] = static_cast<unsigned char>(m);
}
std::uint64_t decode(const MDB_val& v) {
  std::uint64_t m = 0;
  const auto* b = static_cast<const unsigned char*>(v.mv_data);
  for (std::size_t i = 0; i < 8; ++i) m = (m << 8) | b[i];
  return m;
}
Octant octant_of(std::uint64_t m) {
  Octant o;
  o.level = static_cast<int>(m & 31);
  m >>= 5;
  for (int b = 0; b < octree::kMaxLevel; ++b) {
    o.x |= static_cast<std::uint32_t>((m >> (3 * b)) & 1) << b;
    o.y |= static_cast<std::uint32_t>((m >> (3 * b + 1)) & 1) << b;
    o.z |= static_cast<std::uint32_t>((m >> (3 * b + 2)) & 1) << b;
  }
  return o;
}

class Store {
 public:
  Store(const std::string& path, std::uint64_t map_size, bool fresh) : path_(path) {
    if (fresh) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
      std::filesystem::remove(path + "-lock", ec);
    } else if (!std::filesystem::exists(path)) {
      throw Fail{{Errc::not_found, path + ": no LMDB mesh to resume from (the run never committed a step)"}};
    }
    check(mdb_env_create(&env_), "env_create", path);
    check(mdb_env_set_mapsize(env_, map_size), "set_mapsize", path);
    check(mdb_env_set_maxdbs(env_, 2), "set_maxdbs", path);
    check(mdb_env_open(env_, path.c_str(), MDB_NOSUBDIR | MDB_NOTLS, 0600), "env_open", path);
    begin();
    check(mdb_dbi_open(txn_, "leaves", MDB_CREATE, &leaves_), "dbi_open", path);
    check(mdb_dbi_open(txn_, "meta", MDB_CREATE, &meta_), "dbi_open", path);
  }
  ~Store() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    if (env_ != nullptr) mdb_env_close(env_);
  }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void begin() { check(mdb_txn_begin(env_, nullptr, 0, &txn_), "txn_begin", path_); }
  void commit() {
    check(mdb_txn_commit(txn_), "txn_commit", path_);
    txn_ = nullptr;
    begin();
  }

  void put(const Octant& o, Record r) {
    unsigned char k[8];
    encode(key_of(o), k);
    MDB_val key{8, k}, val{sizeof r, &r};
    check(mdb_put(txn_, leaves_, &key, &val, 0), "put", path_);
  }
  void del(const Octant& o) {
    unsigned char k[8];
    encode(key_of(o), k);
    MDB_val key{8, k};
    check(mdb_del(txn_, leaves_, &key, nullptr), "del", path_);
  }
  Record get(const Octant& o) {
    unsigned char k[8];
    encode(key_of(o), k);
    MDB_val key{8, k}, val;
    check(mdb_get(txn_, leaves_, &key, &val), "get", path_);
    return value(val);
  }
  Record value(const MDB_val& v) const {
    if (v.mv_size != sizeof(Record)) throw Fail{{Errc::corrupted, path_ + ": a leaf record of the wrong size"}};
    Record r;
    std::memcpy(&r, v.mv_data, sizeof r);
    return r;
  }

  // The leaf containing the finest-level point p.
  Octant containing(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
    unsigned char k[8];
    encode(key_of({octree::kMaxLevel, x, y, z}), k);
    MDB_val key{8, k}, val;
    Cursor cur(*this);
    int rc = mdb_cursor_get(cur.c, &key, &val, MDB_SET_RANGE);
    if (rc == 0 && std::memcmp(key.mv_data, k, 8) == 0) return octant_of(decode(key));
    rc = mdb_cursor_get(cur.c, &key, &val, rc == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
    if (rc != 0) throw Fail{{Errc::corrupted, path_ + ": no leaf contains a point of the domain"}};
    return octant_of(decode(key));
  }

  // Every leaf in Morton order: fn(octant, record).
  template <class F>
  void each(F&& fn) {
    Cursor cur(*this);
    MDB_val key, val;
    for (int rc = mdb_cursor_get(cur.c, &key, &val, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur.c, &key, &val, MDB_NEXT))
      fn(octant_of(decode(key)), value(val));
  }

  std::uint64_t step() {
    MDB_val key{4, const_cast<char*>("step")}, val;
    const int rc = mdb_get(txn_, meta_, &key, &val);
    if (rc == MDB_NOTFOUND) throw Fail{{Errc::no_version, path_ + ": the mesh was never committed"}};
    check(rc, "get step", path_);
    std::uint64_t s;
    std::memcpy(&s, val.mv_data, sizeof s);
    return s;
  }
  void set_step(std::uint64_t s) {
    MDB_val key{4, const_cast<char*>("step")}, val{sizeof s, &s};
    check(mdb_put(txn_, meta_, &key, &val, 0), "put step", path_);
  }

 private:
  struct Cursor {
    MDB_cursor* c = nullptr;
    explicit Cursor(Store& s) { check(mdb_cursor_open(s.txn_, s.leaves_, &c), "cursor_open", s.path_); }
    ~Cursor() { mdb_cursor_close(c); }
  };
  std::string path_;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi leaves_ = 0, meta_ = 0;
};

// The neighbour across a face, as the PM-octree's visit_faces classifies it:
// nullopt at the wall or when finer leaves lie across (they report the face).
bool across(Store& st, const Octant& o, int axis, bool upper, Octant& nb) {
  std::uint32_t p[3] = {o.x, o.y, o.z};
  if (upper) {
    if (p[axis] + o.length() >= octree::kRootLength) return false;
    p[axis] += o.length();
  } else {
    if (p[axis] == 0) return false;
    p[axis] -= 1;
  }
  nb = st.containing(p[0], p[1], p[2]);
  return nb.level <= o.level;
}

void transport(Store& st, double t, double dt, double period) {
  std::vector<Octant> leaves;
  st.each([&](const Octant& o, Record) { leaves.push_back(o); });
  for (const Octant& a : leaves)
    for (int axis = 0; axis < 3; ++axis)
      for (int upper = 0; upper < 2; ++upper) {
        Octant b;
        if (!across(st, a, axis, upper != 0, b)) continue;
        if (b.level == a.level && !upper) continue;  // conforming: from the lower leaf
        Record ra = st.get(a), rb = st.get(b);
        const double flux = face_flux(a, axis, upper != 0, ra.c, rb.c, t, dt, period);
        ra.dv -= flux;
        rb.dv += flux;
        st.put(a, ra);
        st.put(b, rb);
      }
  for (const Octant& a : leaves) {
    Record r = st.get(a);
    if (r.dv == 0.0) continue;
    st.put(a, {r.c + r.dv / volume(a), 0.0});
  }
}

void split(Store& st, const Octant& o, double c) {
  st.del(o);
  for (int k = 0; k < 8; ++k) st.put(octree::child_of(o, k), {c, 0.0});
}

// 2:1 face balance: split every leaf more than one level coarser than a face
// neighbour, until none is.
void balance(Store& st) {
  for (;;) {
    std::set<std::uint64_t> coarse;
    st.each([&](const Octant& o, Record) {
      for (int axis = 0; axis < 3; ++axis)
        for (int upper = 0; upper < 2; ++upper) {
          Octant nb;
          if (across(st, o, axis, upper != 0, nb) && nb.level < o.level - 1) coarse.insert(key_of(nb));
        }
    });
    if (coarse.empty()) return;
    for (std::uint64_t k : coarse) {
      const Octant o = octant_of(k);
      split(st, o, st.get(o).c);
    }
  }
}

void adapt(Store& st, int level_min, int level_max) {
  std::vector<std::pair<Octant, double>> refine;
  st.each([&](const Octant& o, Record r) {
    if (refine_wanted(o, r.c, level_max)) refine.push_back({o, r.c});
  });
  for (const auto& [o, c] : refine) split(st, o, c);
  // Families of eight sibling leaves, from child 0 (the parent's corner).
  std::vector<std::pair<Octant, double>> merged;
  std::vector<std::pair<Octant, double>> run;
  st.each([&](const Octant& o, Record r) {
    if (!run.empty()) {
      const Octant p = octree::parent_of(run.front().first);
      if (o.level == run.front().first.level && octree::parent_of(o) == p) {
        run.push_back({o, r.c});
        if (run.size() == 8) {
          double c[8];
          for (int k = 0; k < 8; ++k) c[k] = run[static_cast<std::size_t>(k)].second;
          if (coarsen_wanted(p, c, 8, level_min)) {
            double s = 0;
            for (double x : c) s += x;
            merged.push_back({p, s / 8.0});
          }
          run.clear();
        }
        return;
      }
      run.clear();
    }
    if (o.level > 0 && octree::parent_of(o).x == o.x && octree::parent_of(o).y == o.y && octree::parent_of(o).z == o.z)
      run.push_back({o, r.c});
  });
  for (const auto& [p, c] : merged) {
    for (int k = 0; k < 8; ++k) st.del(octree::child_of(p, k));
    st.put(p, {c, 0.0});
  }
  balance(st);
}

void initial_leaves(Store& st, const Octant& o, int level_min, int level_max) {
  if (o.level < level_min || (o.level < level_max && touches_surface(o))) {
    for (int k = 0; k < 8; ++k) initial_leaves(st, octree::child_of(o, k), level_min, level_max);
    return;
  }
  st.put(o, {0.0, 0.0});
}

}  // namespace

Result<Report> run_lmdb(const Config& c, std::uint64_t steps, double dt) {
  const auto t0 = Clock::now();
  try {
    Report rep;
    rep.dt = dt;
    rep.steps = steps;
    Store st(c.pool, c.pool_size, !c.resume);
    if (c.resume) {
      rep.first_step = st.step();
      rep.restore_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
      initial_leaves(st, Octant{}, c.level_min, c.level_max);
      balance(st);
      std::vector<Octant> leaves;
      st.each([&](const Octant& o, Record) { leaves.push_back(o); });
      for (const Octant& o : leaves) st.put(o, {sphere_fraction(o), 0.0});
      st.set_step(0);
      st.commit();
    }
    rep.volume0 = reference_volume(c.level_max);
    const auto last = last_step(c, rep.first_step, steps);
    if (!last.ok()) return last.error();
    for (std::uint64_t s = rep.first_step; s < last.value(); ++s) {
      step_begins(c, s, std::chrono::duration<double>(Clock::now() - t0).count(), rep);
      transport(st, static_cast<double>(s) * dt, dt, c.period);
      adapt(st, c.level_min, c.level_max);
      st.set_step(s + 1);
      if ((s + 1) % c.persist_every == 0 || s + 1 == last.value()) {
        const auto p0 = Clock::now();
        st.commit();
        rep.persist_seconds += std::chrono::duration<double>(Clock::now() - p0).count();
      }
    }
    Checksum sum;
    st.each([&](const Octant& o, Record r) {
      ++rep.leaves;
      rep.volume += r.c * volume(o);
      rep.shape_error += std::fabs(r.c - sphere_fraction(o)) * volume(o);
      sum.add(o, r.c);
    });
    rep.checksum = sum.h;
    rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return rep;
  } catch (const Fail& f) {
    return f.error;
  }
}

}  // namespace cairn::apps::amr
