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

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/octree.hpp"
#include "cairn/persist.hpp"
#include "cairn/stream.hpp"
#include "common.hpp"

namespace cairn::python {
#ifdef CAIRN_PY_DIST
void bind_dist(py::module_& m);  // dist.cpp
#endif
namespace {

// ---- errors: cairn.Error and one subclass per Errc ----

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

// ---- contexts ----

// What the Python Context and every array over its memory share.
struct State {
  std::unique_ptr<persist::Context> ctx;
  int views = 0;         // live arrays over the context's memory
  bool closing = false;  // close() was called while views were alive
};

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

// ---- the PM-octree in bulk ----

// An array that owns a std::vector's storage (no copy).
template <class T>
py::array owning_array(std::vector<T>&& v, std::vector<py::ssize_t> shape, const py::dtype& dt) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule base(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array(dt, std::move(shape), {}, owned->data(), base);
}

// cairn.Octree's C++ side (python/cairn/__init__.py wraps it with the
// payload's dtype). Every loop over leaves is here: masks are read and leaf
// arrays filled in C++, through the bulk cursor (Octree::leaves) and the bulk
// writer (Octree::write_leaves); refine and coarsen find a leaf's place in
// the mask by its Morton key among the leaves' keys (leaves in Morton order
// have increasing keys), without the GIL.
class OctreeBinding {
 public:
  explicit OctreeBinding(std::unique_ptr<octree::Octree> t) : tree_(std::move(t)) {}

  static octree::Options options(int dims, std::uint32_t payload_size) {
    if (dims != 2 && dims != 3)
      raise(make_error(Errc::invalid_argument, "octree dims " + std::to_string(dims) + ": 2 (quadtree) or 3 (octree)"));
    octree::Options o;
    o.dims = dims;
    o.data_size = payload_size;
    return o;
  }
  static std::unique_ptr<OctreeBinding> create(const std::string& path, int dims, std::uint32_t payload_size,
                                               std::uint64_t pool_size, bool keep_previous, std::uint64_t first_version,
                                               std::uint64_t dram_budget) {
    auto o = options(dims, payload_size);
    o.pool_size = pool_size;
    o.keep_previous = keep_previous;
    o.first_version = first_version;
    o.dram_budget = dram_budget;
    return std::make_unique<OctreeBinding>(check(unlocked([&] { return octree::Octree::create(path, o); })));
  }
  static std::unique_ptr<OctreeBinding> open(const std::string& path, int dims, std::uint32_t payload_size,
                                             std::uint64_t version, bool background_gc, std::uint64_t dram_budget) {
    auto o = options(dims, payload_size);
    o.version = version;
    o.background_gc = background_gc;
    o.dram_budget = dram_budget;
    return std::make_unique<OctreeBinding>(check(unlocked([&] { return octree::Octree::restore(path, o); })));
  }

  octree::Octree& live() {
    if (!tree_) raise(make_error(Errc::not_ready, "the octree is closed"));
    return *tree_;
  }
  void close() {
    unlocked([&] { tree_.reset(); });  // joins a background collection
  }
  bool closed() const { return !tree_; }

  // (coords (n, dims) uint32, levels (n,) uint8, payloads (n, payload_size) uint8), copies.
  py::tuple leaves(bool coords, bool payloads) {
    auto& t = live();
    const auto dims = static_cast<std::size_t>(t.dims()), ds = static_cast<std::size_t>(t.data_size());
    std::vector<std::uint32_t> xyz;
    std::vector<std::uint8_t> levels;
    std::vector<std::byte> data;
    check(unlocked([&]() -> Result<void> {
      auto cursor = t.leaves();
      for (;;) {
        auto batch = cursor.next();
        if (!batch.ok()) return batch.error();
        if (batch.value().empty()) return {};
        for (const octree::LeafView& l : batch.value()) {
          if (coords) {
            xyz.push_back(l.octant.x), xyz.push_back(l.octant.y);
            if (dims == 3) xyz.push_back(l.octant.z);
            levels.push_back(static_cast<std::uint8_t>(l.octant.level));
          }
          if (payloads) data.insert(data.end(), l.data, l.data + ds);
        }
      }
    }));
    py::object c = py::none(), lv = py::none(), p = py::none();
    if (coords) {
      const auto n = static_cast<py::ssize_t>(levels.size());
      c = owning_array(std::move(xyz), {n, static_cast<py::ssize_t>(dims)}, py::dtype::of<std::uint32_t>());
      lv = owning_array(std::move(levels), {n}, py::dtype::of<std::uint8_t>());
    }
    if (payloads) {
      const auto n = static_cast<py::ssize_t>(ds == 0 ? count() : data.size() / ds);
      p = owning_array(std::move(data), {n, static_cast<py::ssize_t>(ds)}, py::dtype::of<std::uint8_t>());
    }
    return py::make_tuple(c, lv, p);
  }

  // Every leaf's payload from `values` (leaf_count * payload_size bytes, leaves in order).
  void write_payloads(const py::array& values) {
    auto& t = live();
    if (!(values.flags() & py::array::c_style))
      raise(make_error(Errc::invalid_argument, "write_payloads: the values are not a C-contiguous array"));
    const auto ds = static_cast<std::size_t>(t.data_size());
    const auto bytes = static_cast<std::size_t>(values.nbytes());
    const std::uint64_t n = count();
    if (bytes != n * ds)
      raise(make_error(Errc::invalid_argument, "write_payloads: " + std::to_string(bytes) + " bytes for " +
                                                   std::to_string(n) + " leaves of " + std::to_string(ds) +
                                                   " payload bytes (" + std::to_string(n * ds) + " expected)"));
    const auto* src = static_cast<const std::byte*>(values.data());
    check(unlocked([&]() -> Result<void> {
      auto writer = t.write_leaves();
      for (;;) {
        auto batch = writer.next();
        if (!batch.ok()) return batch.error();
        if (batch.value().empty()) return {};
        for (const octree::WritableLeaf& l : batch.value()) {
          std::memcpy(l.data, src, ds);
          src += ds;
        }
      }
    }));
  }

  std::uint64_t refine(const py::array& mask, int max_level) {
    auto& t = live();
    const auto marks = mask_of(mask, "refine");
    const std::uint64_t before = keys_.size();
    check(unlocked([&] {
      return t.refine(
          false, [&](const octree::Octant& o, const std::byte*) { return marked(marks, o); }, copy_parent(t),
          max_level);
    }));
    const std::uint64_t after = count();
    return (after - before) / ((1u << t.dims()) - 1);
  }

  std::uint64_t coarsen(const py::array& mask) {
    auto& t = live();
    const auto marks = mask_of(mask, "coarsen");
    const auto ds = t.data_size();
    const std::uint64_t before = keys_.size();
    check(unlocked([&] {
      return t.coarsen(
          false,
          [&](const octree::Octant&, std::span<const octree::LeafView> family) {
            for (const auto& l : family)
              if (!marked(marks, l.octant)) return false;
            return true;
          },
          [ds](const octree::Octant&, std::byte* data, std::span<const octree::LeafView> family) {
            if (ds > 0) std::memcpy(data, family[0].data, ds);
          });
    }));
    const std::uint64_t after = count();
    return (before - after) / ((1u << t.dims()) - 1);
  }

  void uniform(int level) {
    auto& t = live();
    check(unlocked([&] { return t.uniform(level, copy_parent(t)); }));
  }
  void balance(const std::string& connect) {
    auto& t = live();
    if (connect != "face" && connect != "full")
      raise(make_error(Errc::invalid_argument, "balance connect '" + connect + "': 'face' or 'full'"));
    const auto c = connect == "face" ? octree::Connect::face : octree::Connect::full;
    check(unlocked([&] { return t.balance(c, copy_parent(t)); }));
  }
  std::uint64_t persist() {
    auto& t = live();
    return check(unlocked([&] { return t.persist(); })).version;
  }
  std::uint64_t checksum() {
    auto& t = live();
    return check(unlocked([&] { return t.checksum(); }));
  }
  std::uint64_t count() {
    auto& t = live();
    return check(unlocked([&] { return t.leaf_count(); }));
  }
  py::bytes root_payload() {
    auto& t = live();
    return py::bytes(reinterpret_cast<const char*>(t.root_data()), t.data_size());
  }
  void set_root_payload(const py::buffer& value) {
    auto& t = live();
    py::buffer_info info = value.request();
    const auto bytes = static_cast<std::size_t>(info.size * info.itemsize);
    if (bytes != t.data_size())
      raise(make_error(Errc::invalid_argument, "set_root_payload: " + std::to_string(bytes) +
                                                   " bytes, the payload has " + std::to_string(t.data_size())));
    check(t.update_root([&](const octree::Octant&, std::byte* data) {
      std::memcpy(data, info.ptr, bytes);
      return true;
    }));
  }
  void gc() {
    auto& t = live();
    check(unlocked([&] { return t.gc(); }));
  }
  void verify() {
    auto& t = live();
    check(unlocked([&] { return t.verify(); }));
  }
  int dims() { return live().dims(); }
  std::uint32_t payload_size() { return live().data_size(); }
  std::uint64_t version() { return live().version(); }
  std::string path() { return live().path(); }

 private:
  static octree::Octree::InitFn copy_parent(const octree::Octree& t) {
    const auto ds = t.data_size();
    return [ds](const octree::Octant&, std::byte* data, const std::byte* parent) {
      if (ds == 0) return;
      if (parent != nullptr)
        std::memcpy(data, parent, ds);
      else
        std::memset(data, 0, ds);
    };
  }
  // The leaves' Morton keys (in their order, increasing) and levels, into keys_/levels_.
  void scan_keys() {
    auto& t = live();
    keys_.clear();
    levels_.clear();
    check(unlocked([&]() -> Result<void> {
      auto cursor = t.leaves();
      for (;;) {
        auto batch = cursor.next();
        if (!batch.ok()) return batch.error();
        if (batch.value().empty()) return {};
        for (const octree::LeafView& l : batch.value()) {
          keys_.push_back(octree::morton(l.octant, t.dims()));
          levels_.push_back(static_cast<std::uint8_t>(l.octant.level));
        }
      }
    }));
  }
  // A boolean mask over the leaves in their order, checked against their count.
  py::array_t<bool> mask_of(const py::array& mask, const char* what) {
    scan_keys();
    if (mask.ndim() != 1 || static_cast<std::size_t>(mask.shape(0)) != keys_.size())
      raise(make_error(Errc::invalid_argument, std::string(what) + ": the mask has shape " + shape_text(mask) +
                                                   ", the tree has " + std::to_string(keys_.size()) +
                                                   " leaves (one boolean per leaf, in their order)"));
    if (mask.dtype().kind() != 'b')
      raise(make_error(Errc::invalid_argument, std::string(what) + ": the mask's dtype is " +
                                                   std::string(py::str(mask.dtype())) + ", not bool"));
    return py::array_t<bool, py::array::c_style | py::array::forcecast>::ensure(mask);
  }
  static std::string shape_text(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t i = 0; i < a.ndim(); ++i)
      s += std::to_string(a.shape(i)) + (a.ndim() == 1 ? "," : i + 1 < a.ndim() ? ", " : "");
    return s + ")";
  }
  bool marked(const py::array_t<bool>& marks, const octree::Octant& o) const {
    const std::uint64_t k = octree::morton(o, tree_->dims());
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), k);
    if (it == keys_.end() || *it != k) return false;
    const auto i = static_cast<std::size_t>(it - keys_.begin());
    return levels_[i] == o.level && marks.data()[i];
  }

  std::unique_ptr<octree::Octree> tree_;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint8_t> levels_;
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

  py::class_<OctreeBinding>(m, "_Octree", "The PM-octree's C++ side; wrapped by cairn.Octree.")
      .def_static("create", &OctreeBinding::create, py::arg("path"), py::arg("dims"), py::arg("payload_size"),
                  py::arg("pool_size"), py::arg("keep_previous"), py::arg("first_version"), py::arg("dram_budget"))
      .def_static("open", &OctreeBinding::open, py::arg("path"), py::arg("dims"), py::arg("payload_size"),
                  py::arg("version"), py::arg("background_gc"), py::arg("dram_budget"))
      .def_static("remove", [](const std::string& path) { check(octree::Octree::remove(path)); })
      .def("leaves", &OctreeBinding::leaves, py::arg("coords") = true, py::arg("payloads") = true)
      .def("write_payloads", &OctreeBinding::write_payloads)
      .def("refine", &OctreeBinding::refine, py::arg("mask"), py::arg("max_level") = octree::kMaxLevel)
      .def("coarsen", &OctreeBinding::coarsen)
      .def("uniform", &OctreeBinding::uniform)
      .def("balance", &OctreeBinding::balance, py::arg("connect") = "face")
      .def("persist", &OctreeBinding::persist)
      .def("checksum", &OctreeBinding::checksum)
      .def("count", &OctreeBinding::count)
      .def("root_payload", &OctreeBinding::root_payload)
      .def("set_root_payload", &OctreeBinding::set_root_payload)
      .def("gc", &OctreeBinding::gc)
      .def("verify", &OctreeBinding::verify)
      .def_property_readonly("dims", &OctreeBinding::dims)
      .def_property_readonly("payload_size", &OctreeBinding::payload_size)
      .def_property_readonly("version", &OctreeBinding::version)
      .def_property_readonly("path", &OctreeBinding::path)
      .def_property_readonly("closed", &OctreeBinding::closed)
      .def("close", &OctreeBinding::close);
  m.attr("MAX_LEVEL") = octree::kMaxLevel;

#ifdef CAIRN_PY_DIST
  bind_dist(m);
  m.def("dist_available", [] { return true; });
#else
  m.def("dist_available", [] { return false; });
#endif
}
