// hdf5_export.hpp — the `file` strategy's HDF5 copy of each committed version
// (Options::hdf5): one dataset per region (internal).
#pragma once

#include <cstdint>
#include <string>

#include "cairn/error.hpp"
#include "persist/layout.hpp"

namespace cairn::persist::detail {

// Errc::invalid_argument if a region's name cannot name an HDF5 dataset.
Result<void> check_hdf5_names(const Layout& layout);

// Writes the latest version of every region into `path` (through path.tmp,
// fsynced, renamed); the directory's fsync is the caller's. Errc::io_error if
// the HDF5 library fails, the errno's code if the fsync or rename does.
Result<void> write_hdf5(const std::string& path, const std::string& state, const Layout& layout, std::uint64_t version);

}  // namespace cairn::persist::detail
