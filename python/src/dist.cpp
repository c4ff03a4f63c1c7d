// dist.cpp — cairn._cairn's MPI part, cairn.dist: cairn::dist::Context over
// an mpi4py communicator, its regions as numpy arrays over each rank's
// persistent memory, the collective commit and the restore of the global
// version. Built only where MPI (src/dist) and mpi4py's C API are found
// (python/CMakeLists.txt defines CAIRN_PY_DIST); cairn.dist_available()
// says which.
//
// A dist region's memory alternates between the rank's two lanes (and, in
// each lane, between the strategy's two buffers), so its arrays are made once
// per address (at most four) and read/write/array hand out the one over the
// current address: each stays the same object at the same address for the
// context's life, as the serial Context's do. Lifetimes as there: every array
// pins the context's state, and close() ends the dist::Context once no array
// is left. The context must be closed before MPI is finalized (mpi4py does it
// at exit): a `with` block, or close().
#include "cairn/dist.hpp"

#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

namespace cairn::python {
namespace {

// The MPI_Comm inside an mpi4py.MPI.Comm.
MPI_Comm comm_of(const py::object& comm) {
  static bool imported = false;
  if (!imported) {
    if (import_mpi4py() < 0) throw py::error_already_set();
    imported = true;
  }
  MPI_Comm* c = PyMPIComm_Get(comm.ptr());
  if (c == nullptr) {
    PyErr_Clear();
    raise(make_error(Errc::invalid_argument, "comm: an mpi4py communicator (mpi4py.MPI.Comm), not " +
                                                 std::string(py::str(py::type::of(comm)))));
  }
  if (*c == MPI_COMM_NULL) raise(make_error(Errc::invalid_argument, "comm: MPI.COMM_NULL"));
  return *c;
}

struct DistState {
  std::unique_ptr<dist::Context> ctx;
  int views = 0;
  bool closing = false;
  void release() {
    unlocked([&] { ctx.reset(); });  // frees its communicators (collective over none: no barrier without spares)
  }
};

dist::Context& live(const std::shared_ptr<DistState>& s) {
  if (!s || !s->ctx || s->closing) raise(make_error(Errc::not_ready, "the dist context is closed"));
  return *s->ctx;
}

// The arrays over one region's addresses, one per address.
class Views {
 public:
  Views(std::shared_ptr<DistState> s, std::vector<py::ssize_t> shape, py::dtype dt)
      : state_(std::move(s)), shape_(std::move(shape)), dtype_(std::move(dt)) {}
  py::array at(void* p, const std::string& name) {
    live(state_);
    if (p == nullptr) raise(make_error(Errc::not_ready, "region '" + name + "' has no memory before open()"));
    auto it = arrays_.find(p);
    if (it == arrays_.end()) it = arrays_.emplace(p, view_of(state_, p, shape_, dtype_)).first;
    return it->second;
  }
  py::tuple shape() const { return py::cast(shape_); }
  py::dtype dtype() const { return dtype_; }
  void forget() { arrays_.clear(); }

 private:
  std::shared_ptr<DistState> state_;
  std::vector<py::ssize_t> shape_;
  py::dtype dtype_;
  std::map<void*, py::array> arrays_;
};

class DistDualBinding {
 public:
  DistDualBinding(std::shared_ptr<DistState> s, dist::DualRegion* r, std::vector<py::ssize_t> shape, py::dtype dt)
      : views_(std::move(s), std::move(shape), std::move(dt)), region_(r) {}
  py::array read() { return views_.at(region_->read(), region_->name()); }
  py::array write() { return views_.at(region_->write(), region_->name()); }
  const std::string& name() const { return region_->name(); }
  std::size_t nbytes() const { return region_->bytes(); }
  Views& views() { return views_; }

 private:
  Views views_;
  dist::DualRegion* region_;
};

class DistRegionBinding {
 public:
  DistRegionBinding(std::shared_ptr<DistState> s, dist::Region* r, std::vector<py::ssize_t> shape, py::dtype dt)
      : views_(std::move(s), std::move(shape), std::move(dt)), region_(r) {}
  py::array array() { return views_.at(region_->data(), region_->name()); }
  const std::string& name() const { return region_->name(); }
  std::size_t nbytes() const { return region_->bytes(); }
  Views& views() { return views_; }

 private:
  Views views_;
  dist::Region* region_;
};

persist::Options persist_options(const std::string& name, const std::string& strategy, const std::string& dir,
                                 unsigned threads, bool checksums) {
  persist::Options p;
  p.name = name;
  p.strategy = strategy;
  p.dir = dir;
  p.threads = threads;
  p.checksums = checksums;
  return p;
}

class DistContextBinding {
 public:
  DistContextBinding(const py::object& comm, const std::string& name, const std::string& strategy,
                     const std::string& dir, unsigned threads, const std::string& redundancy, int ranks_per_node,
                     bool checksums)
      : state_(std::make_shared<DistState>()) {
    const MPI_Comm c = comm_of(comm);
    dist::Options o;
    o.persist = persist_options(name, strategy, dir, threads, checksums);
    o.redundancy = check(dist::parse_redundancy(redundancy));
    o.ranks_per_node = ranks_per_node;
    state_->ctx = check(unlocked([&] { return dist::Context::create(c, std::move(o)); }));
  }
  ~DistContextBinding() { close(); }

  std::shared_ptr<DistDualBinding> dual_region(const std::string& name, const py::object& shape,
                                               const py::object& dtype) {
    auto dims = to_shape(shape);
    auto dt = py::dtype::from_args(dtype);
    auto* r = check(live(state_).dual_region(name, byte_count(dims, dt)));
    auto h = std::make_shared<DistDualBinding>(state_, r, std::move(dims), std::move(dt));
    duals_.push_back(h);
    return h;
  }
  std::shared_ptr<DistRegionBinding> region(const std::string& name, const py::object& shape, const py::object& dtype) {
    auto dims = to_shape(shape);
    auto dt = py::dtype::from_args(dtype);
    auto* r = check(live(state_).region(name, byte_count(dims, dt)));
    auto h = std::make_shared<DistRegionBinding>(state_, r, std::move(dims), std::move(dt));
    plains_.push_back(h);
    return h;
  }
  void open() {
    auto& c = live(state_);
    check(unlocked([&] { return c.open(); }));
  }
  std::uint64_t restore() {
    auto& c = live(state_);
    return check(unlocked([&] { return c.restore(); }));
  }
  void begin() { check(live(state_).begin()); }
  std::uint64_t commit() {
    auto& c = live(state_);
    return check(unlocked([&] { return c.commit(); }));
  }
  std::uint64_t version() { return live(state_).version(); }
  int rank() { return live(state_).rank(); }
  int size() { return live(state_).size(); }
  py::dict stats() {
    const auto& s = live(state_).stats();
    py::dict d;
    d["commits"] = s.commits;
    d["local_commit_seconds"] = s.local_commit_seconds;
    d["redundancy_seconds"] = s.redundancy_seconds;
    d["agree_seconds"] = s.agree_seconds;
    d["restore_seconds"] = s.restore_seconds;
    d["restored_from"] = s.restored_from;
    return d;
  }
  bool closed() const { return !state_->ctx || state_->closing; }
  void close() {
    if (closed()) return;
    for (auto& d : duals_) d->views().forget();
    for (auto& r : plains_) r->views().forget();
    duals_.clear();
    plains_.clear();
    if (state_->views == 0)
      state_->release();
    else
      state_->closing = true;
  }

 private:
  std::shared_ptr<DistState> state_;
  std::vector<std::shared_ptr<DistDualBinding>> duals_;
  std::vector<std::shared_ptr<DistRegionBinding>> plains_;
};

}  // namespace

void bind_dist(py::module_& top) {
  py::module_ m = top.def_submodule("_dist", "cairn.dist's C++ side; import cairn.dist instead.");

  py::class_<DistDualBinding, std::shared_ptr<DistDualBinding>>(m, "DualRegion", R"doc(
A dist region with two versions (Context.dual_region()): `read` is the newest
global version, `write` the version this iteration writes (every element).
Both are numpy arrays over the rank's persistent memory (no copy); take them
again every iteration: after a commit they are other arrays (the memory
alternates between the rank's two lanes), each the same object whenever its
memory comes back.)doc")
      .def_property_readonly("read", &DistDualBinding::read, "The newest global version (read it).")
      .def_property_readonly("write", &DistDualBinding::write, "The version this iteration writes.")
      .def_property_readonly("name", &DistDualBinding::name)
      .def_property_readonly("nbytes", &DistDualBinding::nbytes)
      .def_property_readonly("shape", [](DistDualBinding& d) { return d.views().shape(); })
      .def_property_readonly("dtype", [](DistDualBinding& d) { return d.views().dtype(); });

  py::class_<DistRegionBinding, std::shared_ptr<DistRegionBinding>>(m, "Region", R"doc(
A dist region with one working copy (Context.region()), updated in place:
outside an iteration `array` is the newest version (a fresh run writes its
initial values there); begin() copies it into the lane being written, and
`array` is then that copy: take it after begin(). Costs a copy per
iteration: keep large arrays in dual regions.)doc")
      .def_property_readonly("array", &DistRegionBinding::array, "The region's current memory as a numpy array.")
      .def_property_readonly("name", &DistRegionBinding::name)
      .def_property_readonly("nbytes", &DistRegionBinding::nbytes)
      .def_property_readonly("shape", [](DistRegionBinding& r) { return r.views().shape(); })
      .def_property_readonly("dtype", [](DistRegionBinding& r) { return r.views().dtype(); });

  py::class_<DistContextBinding>(m, "Context", R"doc(
Context(comm, name="state", strategy="", dir="", threads=0, redundancy="local",
        ranks_per_node=0, checksums=True)

Many MPI ranks, one version (C++: cairn::dist::Context): every rank of the
mpi4py communicator `comm` persists its part with a persist strategy, commit()
is collective and makes the iteration global, restore() gives every rank the
same global version after any failure.

  from mpi4py import MPI
  import cairn.dist
  with cairn.dist.Context(MPI.COMM_WORLD, "heat", strategy="in-place") as ctx:
      u = ctx.dual_region("u", (rows, n))
      ctx.open()                         # collective
      try:
          start = ctx.restore()          # collective: the global version
      except cairn.NoVersionError:
          start = 0; u.read[:] = initial # fresh start (on empty storage)
      for it in range(start, steps):
          ctx.begin()
          step(u.read, u.write)          # write every element of u.write
          ctx.commit()                   # collective: global when it returns

Every rank calls open, restore and commit in the same order. A fresh job
starts on empty storage (cairn.dist.remove_storage). redundancy: "local",
"partner" or "xor" (copies of each rank's version on other nodes). Storage:
<dir>/<name>.n<size>.r<rank>.{a,b}.)doc")
      .def(py::init<const py::object&, const std::string&, const std::string&, const std::string&, unsigned,
                    const std::string&, int, bool>(),
           py::arg("comm"), py::arg("name") = "state", py::arg("strategy") = "", py::arg("dir") = "",
           py::arg("threads") = 0, py::arg("redundancy") = "local", py::arg("ranks_per_node") = 0,
           py::arg("checksums") = true)
      .def("dual_region", &DistContextBinding::dual_region, py::arg("name"), py::arg("shape"),
           py::arg("dtype") = "float64", "Registers a region with two versions (before open()).")
      .def("region", &DistContextBinding::region, py::arg("name"), py::arg("shape"), py::arg("dtype") = "float64",
           "Registers a region with one working copy (before open()).")
      .def("open", &DistContextBinding::open, "Collective: attaches every rank's storage.")
      .def("restore", &DistContextBinding::restore,
           "Collective: every rank restores the same global version and returns it (NoVersionError on every rank "
           "if none is global).")
      .def("begin", &DistContextBinding::begin, "Starts the next iteration (commit() needs it).")
      .def("commit", &DistContextBinding::commit,
           "Collective: local commit, then agreement; returns the new global version.")
      .def_property_readonly("version", &DistContextBinding::version, "The newest global version (0: none).")
      .def_property_readonly("rank", &DistContextBinding::rank)
      .def_property_readonly("size", &DistContextBinding::size)
      .def_property_readonly("stats", &DistContextBinding::stats, "Counters of this rank (commits, times).")
      .def_property_readonly("closed", &DistContextBinding::closed)
      .def("close", &DistContextBinding::close, "Releases the rank's storage (once no array over it is left).")
      .def(
          "__enter__", [](DistContextBinding& c) -> DistContextBinding& { return c; },
          py::return_value_policy::reference)
      .def("__exit__", [](DistContextBinding& c, const py::args&) { c.close(); });

  m.def(
      "remove_storage",
      [](int rank, int nranks, const std::string& name, const std::string& strategy, const std::string& dir) {
        dist::Options o;
        o.persist = persist_options(name, strategy, dir, 0, true);
        return check(dist::Context::remove_storage(o, rank, nranks));
      },
      py::arg("rank"), py::arg("nranks"), py::arg("name") = "state", py::arg("strategy") = "", py::arg("dir") = "",
      "Removes what a job stored for rank `rank` of `nranks` (not collective; never while its Context is open). "
      "Returns the paths removed.");
}

}  // namespace cairn::python
