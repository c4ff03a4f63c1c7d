// common.hpp — what the parts of cairn._cairn share (module.cpp: contexts,
// streams, the PM-octree; dist.cpp: cairn.dist over mpi4py): the exception
// classes and the raising of a cairn::Error as one of them, running without
// the GIL, shapes, and numpy arrays over memory that pin its owner.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cairn/error.hpp"

namespace cairn::python {

namespace py = pybind11;

// ---- errors: cairn.Error and one subclass per Errc ----

constexpr int kErrcCount = static_cast<int>(Errc::busy) + 1;
inline PyObject* g_error_base = nullptr;                 // cairn.Error
inline std::array<PyObject*, kErrcCount> g_errors = {};  // indexed by Errc; never released

[[noreturn]] inline void raise(const Error& e) {
  const int i = static_cast<int>(e.code);
  PyObject* cls = i > 0 && i < kErrcCount ? g_errors[i] : g_error_base;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(e.message);
  exc.attr("message") = e.message;
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

inline void check(const Result<void>& r) {
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

inline std::vector<py::ssize_t> to_shape(const py::object& shape) {
  std::vector<py::ssize_t> out;
  if (py::isinstance<py::int_>(shape))
    out.push_back(shape.cast<py::ssize_t>());
  else
    for (auto d : shape) out.push_back(d.cast<py::ssize_t>());
  for (auto d : out)
    if (d <= 0) raise(make_error(Errc::invalid_argument, "a region's dimensions must be positive"));
  return out;
}

inline std::size_t byte_count(const std::vector<py::ssize_t>& shape, const py::dtype& dt) {
  std::size_t n = static_cast<std::size_t>(dt.itemsize());
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

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

}  // namespace cairn::python
