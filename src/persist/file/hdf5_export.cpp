// hdf5_export.cpp — Options::hdf5 for the `file` strategy: each committed
// version is also written as <dir>/<name>.<version>.h5, an ordinary HDF5 file
// that h5dump, h5py or ParaView's readers open without cairn:
//
//   /                      attributes cairn_version (uint64), cairn_state (string)
//   /<region>              one dataset per region: its bytes (uint8, 1-D), with
//                          attributes bytes (uint64) and dual (int: 1 for a dual
//                          region, whose latest version is the one written)
//
// The checkpoint file stays the version of record (restore reads it, not the
// HDF5 file); the HDF5 file is for analysis. It is written under a temporary
// name, fsynced and renamed before the checkpoint's own commit point, so a
// committed version always has its HDF5 file beside it (the directory fsync
// of the checkpoint's commit makes both renames durable).
#include "persist/file/hdf5_export.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "util/io.hpp"

namespace cairn::persist::detail {
namespace {

// Closes an HDF5 identifier with the function that owns its kind.
class H5Id {
 public:
  H5Id(hid_t id, herr_t (*closer)(hid_t)) : id_(id), close_(closer) {}
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded (a file's close is
  // where HDF5 writes its metadata).
  bool close() {
    const herr_t r = id_ >= 0 ? close_(id_) : -1;
    id_ = -1;
    return r >= 0;
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

bool write_scalar_attr(hid_t obj, const char* name, hid_t type, const void* value) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!space.ok()) return false;
  H5Id attr(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  return attr.ok() && H5Awrite(attr.get(), type, value) >= 0;
}

bool write_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!type.ok() || H5Tset_size(type.get(), value.size() + 1) < 0) return false;
  return write_scalar_attr(obj, name, type.get(), value.c_str());
}

bool write_region(hid_t file, const Entry& e) {
  const hsize_t dims[1] = {e.bytes};
  H5Id space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  if (!space.ok()) return false;
  H5Id set(H5Dcreate2(file, e.name.c_str(), H5T_NATIVE_UINT8, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
           H5Dclose);
  if (!set.ok() || H5Dwrite(set.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.latest()) < 0) return false;
  const std::uint64_t bytes = e.bytes;
  const int dual = e.dual ? 1 : 0;
  return write_scalar_attr(set.get(), "bytes", H5T_NATIVE_UINT64, &bytes) &&
         write_scalar_attr(set.get(), "dual", H5T_NATIVE_INT, &dual);
}

// HDF5 prints its error stack to stderr by default; cairn reports its own
// typed error instead, so the stack is silenced for the calls made here.
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace

Result<void> check_hdf5_names(const Layout& layout) {
  for (const auto& e : layout.entries)
    if (e.name.find('/') != std::string::npos || e.name == ".")
      return make_error(Errc::invalid_argument, "region name '" + e.name +
                                                    "' cannot name an HDF5 dataset ('/' separates HDF5 groups, '.' "
                                                    "is the root); rename the region or unset Options::hdf5");
  return {};
}

Result<void> write_hdf5(const std::string& path, const std::string& state, const Layout& layout,
                        std::uint64_t version) {
  util::AtomicFileOptions o;
  o.what = "the HDF5 export of version " + std::to_string(version);
  o.advice = [&](Errc) { return "version " + std::to_string(version) + " is not committed"; };
  return util::write_file_atomically_by_name(
      path,
      [&](const std::string& tmp) -> Result<void> {
        auto fail = [&](const char* what) {
          return make_error(Errc::io_error, tmp + ": the HDF5 library failed " + std::string(what) +
                                                " (a full device or an unwritable directory?); version " +
                                                std::to_string(version) + " is not committed");
        };
        QuietHdf5 quiet;
        H5Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
        if (!file.ok()) return fail("to create the file");
        if (!write_scalar_attr(file.get(), "cairn_version", H5T_NATIVE_UINT64, &version) ||
            !write_string_attr(file.get(), "cairn_state", state))
          return fail("to write the file's attributes");
        for (const auto& e : layout.entries)
          if (!write_region(file.get(), e)) return fail(("to write region '" + e.name + "'").c_str());
        if (!file.close()) return fail("to close the file");
        return {};
      },
      o);
}

}  // namespace cairn::persist::detail
