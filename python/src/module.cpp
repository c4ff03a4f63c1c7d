// module.cpp — cairn._cairn, the extension module behind the Python package:
// persist contexts whose regions are numpy arrays over the persistent memory
// itself, streams, and one Python exception class per cairn::Errc.
//
// Lifetimes. A numpy array over a region must never outlive the memory under
// it, and Python cannot invalidate an array. So every array's base is a
// capsule that pins the context's State; Context.close() destroys the
// persist::Context at once when no array of it is left, else when the last
// one is collected (its storage stays open until then). Region handles do not
// pin it: after close they raise NotReadyError. Streams do the same for the
// views of their committed bytes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/persist.hpp"
#include "cairn/stream.hpp"

namespace py = pybind11;

namespace cairn::python {
namespace {

// ---- errors: cairn.Error and one subclass per Errc ----

constexpr int kErrcCount = static_cast<int>(Errc::busy) + 1;
PyObject* g_error_base = nullptr;                 // cairn.Error
std::array<PyObject*, kErrcCount> g_errors = {};  // indexed by Errc; never released

std::string class_name(Errc code) {  // "layout_mismatch" -> "LayoutMismatchError", "io_error" -> "IoError"
  std::string out;
  bool upper = true;
  for (const char* c = errc_name(code); *c; ++c) {
    if (*c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(*c - 'a' + 'A') : *c;
    upper = false;
  }
  return out.ends_with("Error") ? out : out + "Error";
}

void make_error_classes(py::module_& m) {
  g_error_base = PyErr_NewExceptionWithDoc(
      "cairn.Error",
      "Base of every cairn error. Attributes: message (the library's message: what failed, why, what to do),\n"
      "code (the C API's negative CAIRN_E_* code) and name (the error's name, e.g. 'corrupted').",
      nullptr, nullptr);
  m.add_object("Error", py::handle(g_error_base));
  for (int i = 1; i < kErrcCount; ++i) {
    const auto code = static_cast<Errc>(i);
    const std::string name = class_name(code);
    const std::string qualified = "cairn." + name;
    // The builtin counterparts too, so that `except FileNotFoundError` and
    // `except ValueError` catch what they would catch from Python's own calls.
    py::tuple bases = py::make_tuple(py::handle(g_error_base));
    if (code == Errc::not_found) bases = py::make_tuple(py::handle(g_error_base), py::handle(PyExc_FileNotFoundError));
    if (code == Errc::invalid_argument) bases = py::make_tuple(py::handle(g_error_base), py::handle(PyExc_ValueError));
    const std::string doc = std::string("cairn error '") + errc_name(code) + "' (CAIRN_E_" + errc_name(code) +
                            " in the C API, upper case).";
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc.c_str(), bases.ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    py::handle h(cls);
    h.attr("code") = -i;
    h.attr("name") = errc_name(code);
    g_errors[i] = cls;
    m.add_object(name.c_str(), h);
  }
}

[[noreturn]] void raise(const Error& e) {
  const int i = static_cast<int>(e.code);
  PyObject* cls = i > 0 && i < kErrcCount ? g_errors[i] : g_error_base;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(e.message);
  exc.attr("message") = e.message;
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

void check(const Result<void>& r) {
  if (!r.ok()) raise(r.error());
}
template <class T>
T check(Result<T> r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}

// Runs f without the GIL (its result is checked after, with the GIL: raising needs it).
template <class F>
auto unlocked(F&& f) {
  py::gil_scoped_release released;
  return f();
}

// ---- shapes and dtypes ----

std::vector<py::ssize_t> to_shape(const py::object& shape) {
  std::vector<py::ssize_t> out;
  if (py::isinstance<py::int_>(shape))
    out.push_back(shape.cast<py::ssize_t>());
  else
    for (auto d : shape) out.push_back(d.cast<py::ssize_t>());
  for (auto d : out)
    if (d <= 0) raise(make_error(Errc::invalid_argument, "a region's dimensions must be positive"));
  return out;
}

std::size_t byte_count(const std::vector<py::ssize_t>& shape, const py::dtype& dt) {
  std::size_t n = static_cast<std::size_t>(dt.itemsize());
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

// ---- contexts ----

// What the Python Context and every array over its memory share.
struct State {
  std::unique_ptr<persist::Context> ctx;
  int views = 0;         // live arrays over the context's memory
  bool closing = false;  // close() was called while views were alive
};

// A numpy array over [data, data + bytes) that pins `state` while it lives.
template <class S>
py::array view_of(const std::shared_ptr<S>& state, void* data, const std::vector<py::ssize_t>& shape,
                  const py::dtype& dt, bool writeable = true) {
  auto* pin = new std::shared_ptr<S>(state);
  ++state->views;
  py::capsule base(pin, [](void* p) {
    auto* pinned = static_cast<std::shared_ptr<S>*>(p);
    if (--(*pinned)->views == 0 && (*pinned)->closing) (*pinned)->release();
    delete pinned;
  });
  py::array a(dt, shape, {}, data, base);
  if (!writeable) py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

struct ContextState : State {
  void release() {
    unlocked([&] { ctx.reset(); });  // the destructor may wait for in-place's helper thread
  }
};

persist::Context& live(const std::shared_ptr<ContextState>& s) {
  if (!s || !s->ctx || s->closing) raise(make_error(Errc::not_ready, "the context is closed"));
  return *s->ctx;
}

class RegionBinding {
 public:
  RegionBinding(std::shared_ptr<ContextState> s, persist::Region* r, std::vector<py::ssize_t> shape, py::dtype dt)
      : state_(std::move(s)), region_(r), shape_(std::move(shape)), dtype_(std::move(dt)) {}

  py::array array() {
    live(state_);
    if (region_->data() == nullptr)
      raise(make_error(Errc::not_ready, "region '" + region_->name() + "' has no memory before Context.open()"));
    if (!array_) array_ = view_of(state_, region_->data(), shape_, dtype_);
    return *array_;
  }
  const std::string& name() const { return region_->name(); }
  std::size_t nbytes() const { return region_->bytes(); }
  py::tuple shape() const { return py::cast(shape_); }
  py::dtype dtype() const { return dtype_; }
  void forget() { array_.reset(); }

 private:
  std::shared_ptr<ContextState> state_;
  persist::Region* region_;
  std::vector<py::ssize_t> shape_;
  py::dtype dtype_;
  std::optional<py::array> array_;
};

class DualRegionBinding {
 public:
  DualRegionBinding(std::shared_ptr<ContextState> s, persist::DualRegion* r, std::vector<py::ssize_t> shape,
                    py::dtype dt)
      : state_(std::move(s)), region_(r), shape_(std::move(shape)), dtype_(std::move(dt)) {}

  // The two versions' arrays are made once; read and write hand out the one
  // whose memory currently has that role, so each stays the same object.
  py::array version(bool read) {
    live(state_);
    void* want = read ? region_->read() : region_->write();
    if (want == nullptr)
      raise(make_error(Errc::not_ready, "dual region '" + region_->name() + "' has no memory before Context.open()"));
    if (!arrays_[0]) {
      base_[0] = region_->read();
      base_[1] = region_->write();
      arrays_[0] = view_of(state_, base_[0], shape_, dtype_);
      arrays_[1] = view_of(state_, base_[1], shape_, dtype_);
    }
    return *arrays_[want == base_[0] ? 0 : 1];
  }
  void carry_over(py::ssize_t start, std::optional<py::ssize_t> stop) {
    live(state_);
    const auto item = static_cast<py::ssize_t>(dtype_.itemsize());
    const py::ssize_t n = static_cast<py::ssize_t>(region_->bytes()) / item;
    const py::ssize_t end = stop.value_or(n);
    if (start < 0 || end < start || end > n)
      raise(make_error(Errc::invalid_argument, "carry_over: [" + std::to_string(start) + ", " + std::to_string(end) +
                                                   ") is not a range of the " + std::to_string(n) + " elements"));
    region_->carry_over(static_cast<std::size_t>(start * item), static_cast<std::size_t>((end - start) * item));
  }
  const std::string& name() const { return region_->name(); }
  std::size_t nbytes() const { return region_->bytes(); }
  py::tuple shape() const { return py::cast(shape_); }
  py::dtype dtype() const { return dtype_; }
  void forget() { arrays_[0].reset(), arrays_[1].reset(); }

 private:
  std::shared_ptr<ContextState> state_;
  persist::DualRegion* region_;
  std::vector<py::ssize_t> shape_;
  py::dtype dtype_;
  void* base_[2] = {nullptr, nullptr};
  std::optional<py::array> arrays_[2];
};

class ContextBinding {
 public:
  ContextBinding(const std::string& name, const std::string& strategy, const std::string& dir, unsigned threads,
                 bool async_flush, bool flush, bool incremental, bool checksums, const std::string& device)
      : state_(std::make_shared<ContextState>()) {
    persist::Options o;
    o.name = name;
    o.strategy = strategy;
    o.dir = dir;
    o.threads = threads;
    o.async_flush = async_flush;
    o.flush = flush;
    o.incremental = incremental;
    o.checksums = checksums;
    o.device = device;
    state_->ctx = check(persist::Context::create(std::move(o)));
  }
  ~ContextBinding() { close(); }

  std::shared_ptr<RegionBinding> region(const std::string& name, const py::object& shape, const py::object& dtype) {
    auto dims = to_shape(shape);
    auto dt = py::dtype::from_args(dtype);
    auto* r = check(live(state_).region(name, byte_count(dims, dt)));
    auto h = std::make_shared<RegionBinding>(state_, r, std::move(dims), std::move(dt));
    regions_.push_back(h);
    return h;
  }
  std::shared_ptr<DualRegionBinding> dual_region(const std::string& name, const py::object& shape,
                                                 const py::object& dtype) {
    auto dims = to_shape(shape);
    auto dt = py::dtype::from_args(dtype);
    auto* r = check(live(state_).dual_region(name, byte_count(dims, dt)));
    auto h = std::make_shared<DualRegionBinding>(state_, r, std::move(dims), std::move(dt));
    duals_.push_back(h);
    return h;
  }
  void open() {
    auto& c = live(state_);
    check(unlocked([&] { return c.open(); }));
  }
  std::optional<std::uint64_t> committed_version() { return live(state_).committed_version(); }
  std::uint64_t restore() {
    auto& c = live(state_);
    return check(unlocked([&] { return c.restore(); }));
  }
  void begin() { check(live(state_).begin()); }
  std::uint64_t commit() {
    auto& c = live(state_);
    return check(unlocked([&] { return c.commit(); }));
  }
  void flush_async() { live(state_).flush_async(); }
  void flush_barrier() {
    auto& c = live(state_);
    unlocked([&] { c.flush_barrier(); });
  }
  std::uint64_t version() { return live(state_).version(); }
  std::string strategy() { return live(state_).strategy(); }
  bool closed() const { return !state_->ctx || state_->closing; }
  py::dict stats() {
    const auto& s = live(state_).stats();
    py::dict d;
    d["commits"] = s.commits;
    d["restores"] = s.restores;
    d["last_commit_seconds"] = s.last_commit_seconds;
    d["total_commit_seconds"] = s.total_commit_seconds;
    d["last_restore_seconds"] = s.last_restore_seconds;
    d["bytes_copied"] = s.bytes_copied;
    d["nvm_bytes_written"] = s.nvm_bytes_written;
    d["sync_calls"] = s.sync_calls;
    d["synced_bytes"] = s.synced_bytes;
    return d;
  }
  void close() {
    if (closed()) return;
    for (auto& r : regions_) r->forget();
    for (auto& d : duals_) d->forget();
    regions_.clear();
    duals_.clear();
    if (state_->views == 0)
      state_->release();
    else
      state_->closing = true;  // the last array's capsule releases it
  }

 private:
  std::shared_ptr<ContextState> state_;
  std::vector<std::shared_ptr<RegionBinding>> regions_;
  std::vector<std::shared_ptr<DualRegionBinding>> duals_;
};

// ---- streams ----

std::string errc_prefix_message(Errc& code) {  // splits "<code>: <message>" of the stream layer
  const std::string& m = stream::last_error_message();
  code = Errc::io_error;
  for (int i = 1; i < kErrcCount; ++i) {
    const std::string name = errc_name(static_cast<Errc>(i));
    if (m.rfind(name + ": ", 0) == 0) {
      code = static_cast<Errc>(i);
      return m.substr(name.size() + 2);
    }
  }
  return m.empty() ? std::string(std::strerror(errno)) : m;
}

[[noreturn]] void raise_stream_error(const std::string& uri, const char* what) {
  Errc code;
  std::string message = errc_prefix_message(code);
  raise(make_error(code, uri + ": " + what + " failed: " + message));
}

struct StreamState {
  std::unique_ptr<stream::Stream> s;
  int views = 0;
  bool closing = false;
  void release() {
    if (s) (void)s->close();  // a reader: releases its version
    s.reset();
  }
};

class StreamBinding {
 public:
  StreamBinding(const std::string& uri, const std::string& mode, std::uint64_t size_hint, double wait_seconds)
      : state_(std::make_shared<StreamState>()) {
    if (mode != "r" && mode != "w") raise(make_error(Errc::invalid_argument, "stream mode '" + mode + "': 'r' or 'w'"));
    stream::OpenOptions o;
    o.size_hint = size_hint;
    o.wait_seconds = wait_seconds;
    state_->s = check(stream::Stream::open(uri, mode == "r" ? stream::Mode::read : stream::Mode::write, o));
    if (mode == "r") bytes_ = state_->s->view();
  }
  ~StreamBinding() {
    if (state_->s && !state_->closing) {
      if (writer())
        (void)state_->s->abandon();  // never closed: commit nothing
      else if (state_->views == 0)
        state_->release();
      else
        state_->closing = true;
    }
  }

  bool writer() const { return state_->s && state_->s->mode() == stream::Mode::write; }
  stream::Stream& live() {
    if (!state_->s || state_->closing) raise(make_error(Errc::not_ready, "the stream is closed"));
    return *state_->s;
  }
  std::size_t write(const py::buffer& b) {
    auto& s = live();
    if (!writer()) raise(make_error(Errc::invalid_argument, s.uri() + ": not open for writing"));
    py::buffer_info info = b.request();
    const auto len = static_cast<std::size_t>(info.size * info.itemsize);
    const std::size_t n = unlocked([&] { return std::fwrite(info.ptr, 1, len, s.file()); });
    if (n != len) raise_stream_error(s.uri(), "write");
    return n;
  }
  std::size_t readinto(const py::buffer& b) {
    live();
    py::buffer_info info = b.request(true);
    const auto want = static_cast<std::size_t>(info.size * info.itemsize);
    const std::size_t n = std::min(want, bytes_.size() - std::min(pos_, bytes_.size()));
    if (n > 0) std::memcpy(info.ptr, bytes_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  py::bytes readline(py::ssize_t limit) {
    live();
    const std::size_t from = std::min(pos_, bytes_.size());
    std::size_t end = bytes_.size();
    if (limit >= 0) end = std::min(end, from + static_cast<std::size_t>(limit));
    const void* nl = std::memchr(bytes_.data() + from, '\n', end - from);
    if (nl != nullptr) end = static_cast<std::size_t>(static_cast<const std::byte*>(nl) - bytes_.data()) + 1;
    pos_ = end;
    return py::bytes(reinterpret_cast<const char*>(bytes_.data() + from), end - from);
  }
  std::int64_t seek(std::int64_t offset, int whence) {
    auto& s = live();
    if (writer()) {
      if (std::fseek(s.file(), offset, whence) != 0) raise_stream_error(s.uri(), "seek");
      return std::ftell(s.file());
    }
    const std::int64_t origin = whence == SEEK_SET   ? 0
                                : whence == SEEK_CUR ? static_cast<std::int64_t>(pos_)
                                                     : static_cast<std::int64_t>(bytes_.size());
    if (origin + offset < 0) raise(make_error(Errc::invalid_argument, s.uri() + ": seek before the start"));
    pos_ = static_cast<std::size_t>(origin + offset);
    return static_cast<std::int64_t>(pos_);
  }
  std::int64_t tell() {
    auto& s = live();
    return writer() ? std::ftell(s.file()) : static_cast<std::int64_t>(pos_);
  }
  void flush() {
    auto& s = live();
    if (writer() && std::fflush(s.file()) != 0) raise_stream_error(s.uri(), "flush");
  }
  py::array view() {
    auto& s = live();
    if (writer()) raise(make_error(Errc::invalid_argument, s.uri() + ": a writer has no committed bytes to view"));
    std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(bytes_.size())};
    return view_of(state_, const_cast<std::byte*>(bytes_.data()), shape, py::dtype::of<std::uint8_t>(), false);
  }
  void close() {
    if (!state_->s || state_->closing) return;
    if (writer()) {
      Result<void> r = unlocked([&] { return state_->s->close(); });
      const std::string uri = state_->s->uri();
      state_->s.reset();
      if (!r.ok()) raise(make_error(r.error().code, uri + ": commit failed: " + r.error().message));
    } else if (state_->views == 0) {
      state_->release();
    } else {
      state_->closing = true;
    }
  }
  void abandon() {
    if (!state_->s || state_->closing) return;
    if (writer()) {
      (void)state_->s->abandon();
      state_->s.reset();
    } else {
      close();
    }
  }
  bool closed() const { return !state_->s || state_->closing; }
  std::string uri() const { return state_->s ? state_->s->uri() : std::string(); }

 private:
  std::shared_ptr<StreamState> state_;
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace
}  // namespace cairn::python

PYBIND11_MODULE(_cairn, m) {
  using namespace cairn;
  using namespace cairn::python;
  m.doc() = "cairn's extension module; import cairn instead.";
  make_error_classes(m);

  m.def("strategies", &persist::strategy_names, "The names of the persistence strategies, in registry order.");

  py::class_<RegionBinding, std::shared_ptr<RegionBinding>>(m, "Region", R"doc(
A region with one working copy, made by Context.region(). Its array (after
Context.open()) is the persistent memory itself: write it in place; commit()
makes what it holds durable. The array stays the same object at the same
address for the context's life, restore included.)doc")
      .def_property_readonly("array", &RegionBinding::array, "The region as a numpy array (no copy); after open().")
      .def_property_readonly("name", &RegionBinding::name)
      .def_property_readonly("nbytes", &RegionBinding::nbytes)
      .def_property_readonly("shape", &RegionBinding::shape)
      .def_property_readonly("dtype", &RegionBinding::dtype)
      .def(
          "__array__", [](RegionBinding& r, const py::object&) { return r.array(); }, py::arg("dtype") = py::none());

  py::class_<DualRegionBinding, std::shared_ptr<DualRegionBinding>>(m, "DualRegion", R"doc(
A region with two versions whose roles alternate (seed 004 §4.1), made by
Context.dual_region(): in an iteration read `read` and write all of `write`;
commit() makes `write` the consistent version and swaps the two, so that the
array just written is `read` next. Both are numpy arrays over the persistent
memory (no copy), each the same object for the context's life.)doc")
      .def_property_readonly(
          "read", [](DualRegionBinding& d) { return d.version(true); }, "The consistent version (read it).")
      .def_property_readonly(
          "write", [](DualRegionBinding& d) { return d.version(false); }, "The version this iteration writes.")
      .def("carry_over", &DualRegionBinding::carry_over, py::arg("start") = 0, py::arg("stop") = py::none(),
           "Copies flat elements [start, stop) from read to write: those this iteration does not update.")
      .def_property_readonly("name", &DualRegionBinding::name)
      .def_property_readonly("nbytes", &DualRegionBinding::nbytes)
      .def_property_readonly("shape", &DualRegionBinding::shape)
      .def_property_readonly("dtype", &DualRegionBinding::dtype);

  py::class_<ContextBinding>(m, "Context", R"doc(
Context(name="state", strategy="", dir="", threads=0, async_flush=True, flush=True,
        incremental=False, checksums=True, device="")

The state a simulation must not lose, committed as versions and restored
after a crash bit for bit (C++: cairn::persist::Context).

  with cairn.Context("heat", strategy="in-place") as ctx:
      u = ctx.dual_region("u", (n, n))       # numpy arrays u.read, u.write
      it = ctx.region("it", 1, "int64")      # it.array
      ctx.open()                             # storage attached, memory given
      if ctx.committed_version is not None:
          ctx.restore()                      # the arrays now hold the last version
      ...
      ctx.commit()                           # durable; u.read and u.write swap

strategy: one of cairn.strategies() ("" reads $CAIRN_STRATEGY, else "in-place").
name names the storage (<dir>/<name>.pool, or checkpoint files for "file"),
dir defaults to $CAIRN_POOL_DIR, else /dev/shm/cairn. Errors raise a subclass
of cairn.Error. close() (or leaving the with block) releases the storage once
no array over its memory is left.)doc")
      .def(py::init<const std::string&, const std::string&, const std::string&, unsigned, bool, bool, bool, bool,
                    const std::string&>(),
           py::arg("name") = "state", py::arg("strategy") = "", py::arg("dir") = "", py::arg("threads") = 0,
           py::arg("async_flush") = true, py::arg("flush") = true, py::arg("incremental") = false,
           py::arg("checksums") = true, py::arg("device") = "")
      .def("region", &ContextBinding::region, py::arg("name"), py::arg("shape"), py::arg("dtype") = "float64",
           "Registers a region of that shape and dtype whose memory cairn provides (before open()).")
      .def("dual_region", &ContextBinding::dual_region, py::arg("name"), py::arg("shape"), py::arg("dtype") = "float64",
           "Registers a region with two alternating versions (before open()).")
      .def("open", &ContextBinding::open, "Attaches storage: opens what an earlier run committed, or creates it.")
      .def_property_readonly("committed_version", &ContextBinding::committed_version,
                             "The last committed version in storage, None if nothing was committed (after open()).")
      .def("restore", &ContextBinding::restore,
           "Brings the last committed version into the arrays and returns its number (NoVersionError if none).")
      .def("begin", &ContextBinding::begin, "Starts an iteration (optional: commit() begins one itself).")
      .def("commit", &ContextBinding::commit, "Makes the state durable and consistent; returns the new version number.")
      .def("flush_async", &ContextBinding::flush_async,
           "in-place: hands this iteration's writes to the helper thread now.")
      .def("flush_barrier", &ContextBinding::flush_barrier, "in-place: waits for the helper thread's flush.")
      .def_property_readonly("version", &ContextBinding::version, "The last version committed or restored (0: none).")
      .def_property_readonly("strategy", &ContextBinding::strategy, "The strategy's name.")
      .def_property_readonly("closed", &ContextBinding::closed)
      .def_property_readonly("stats", &ContextBinding::stats, "Counters of this context (commits, times, bytes).")
      .def("close", &ContextBinding::close, "Releases the storage (once no array over its memory is left).")
      .def(
          "__enter__", [](ContextBinding& c) -> ContextBinding& { return c; }, py::return_value_policy::reference)
      .def("__exit__", [](ContextBinding& c, const py::args&) { c.close(); });

  py::class_<StreamBinding>(m, "_Stream", "One open stream; wrapped by cairn.open().")
      .def(py::init<const std::string&, const std::string&, std::uint64_t, double>(), py::arg("uri"), py::arg("mode"),
           py::arg("size_hint") = 0, py::arg("wait_seconds") = 0.0)
      .def_property_readonly("writer", &StreamBinding::writer)
      .def_property_readonly("closed", &StreamBinding::closed)
      .def_property_readonly("uri", &StreamBinding::uri)
      .def("write", &StreamBinding::write)
      .def("readinto", &StreamBinding::readinto)
      .def("readline", &StreamBinding::readline, py::arg("limit") = -1)
      .def("seek", &StreamBinding::seek)
      .def("tell", &StreamBinding::tell)
      .def("flush", &StreamBinding::flush)
      .def("view", &StreamBinding::view)
      .def("close", &StreamBinding::close)
      .def("abandon", &StreamBinding::abandon);
}
