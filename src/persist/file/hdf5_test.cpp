// hdf5_test.cpp — Options::hdf5: the file strategy writes each committed
// version as an HDF5 file, read back here with the HDF5 library itself.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "cairn/persist.hpp"
#include "tests/support/temp_dir.hpp"

namespace cairn::persist {
namespace {

using cairn::testing::TempDir;

constexpr std::size_t kN = 3000;  // doubles in the dual region

Options options(const TempDir& dir) {
  Options o;
  o.strategy = "file";
  o.name = "h5state";
  o.dir = dir.path();
  o.hdf5 = true;
  return o;
}

// The bytes of dataset `name` in `path`, and its "dual" attribute.
std::vector<unsigned char> read_dataset(const std::string& path, const std::string& name, int* dual,
                                        std::uint64_t* file_version) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(f, 0) << path;
  if (f < 0) return {};
  const hid_t root_attr = H5Aopen(f, "cairn_version", H5P_DEFAULT);
  EXPECT_GE(H5Aread(root_attr, H5T_NATIVE_UINT64, file_version), 0);
  H5Aclose(root_attr);
  const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  EXPECT_GE(d, 0) << name;
  const hid_t space = H5Dget_space(d);
  hsize_t dims[1] = {0};
  EXPECT_EQ(H5Sget_simple_extent_ndims(space), 1);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  std::vector<unsigned char> out(dims[0]);
  EXPECT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  const hid_t a = H5Aopen(d, "dual", H5P_DEFAULT);
  EXPECT_GE(H5Aread(a, H5T_NATIVE_INT, dual), 0);
  H5Aclose(a);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return out;
}

TEST(Hdf5Export, EachVersionIsAnHdf5FileWithOneDatasetPerRegion) {
  TempDir dir;
  auto ctx = Context::create(options(dir)).value();
  auto* u = ctx->dual_region("u", kN * sizeof(double)).value();
  auto* step = ctx->region("step", sizeof(std::uint64_t)).value();
  ctx->open().value();
  for (std::uint64_t s = 1; s <= 3; ++s) {
    for (std::size_t i = 0; i < kN; ++i) u->write<double>()[i] = static_cast<double>(s * 1000 + i) / 7.0;
    *step->as<std::uint64_t>() = s;
    EXPECT_EQ(ctx->commit().value(), s);
  }
  namespace fs = std::filesystem;
  // Kept like the checkpoints: the last version and the one before.
  EXPECT_TRUE(fs::exists(dir.file("h5state.3.h5")));
  EXPECT_TRUE(fs::exists(dir.file("h5state.2.h5")));
  EXPECT_FALSE(fs::exists(dir.file("h5state.1.h5")));
  EXPECT_FALSE(fs::exists(dir.file("h5state.3.h5.tmp")));

  int dual = -1;
  std::uint64_t version = 0;
  auto bytes = read_dataset(dir.file("h5state.3.h5"), "u", &dual, &version);
  ASSERT_EQ(bytes.size(), kN * sizeof(double));
  EXPECT_EQ(dual, 1);
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(std::memcmp(bytes.data(), u->read(), bytes.size()), 0);  // the version committed last
  std::vector<double> values(kN);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  EXPECT_EQ(values[17], (3000.0 + 17) / 7.0);

  auto s = read_dataset(dir.file("h5state.2.h5"), "step", &dual, &version);
  ASSERT_EQ(s.size(), sizeof(std::uint64_t));
  std::uint64_t step_value = 0;
  std::memcpy(&step_value, s.data(), sizeof step_value);
  EXPECT_EQ(step_value, 2u);
  EXPECT_EQ(dual, 0);
  EXPECT_EQ(version, 2u);

  // Clean-up of the state removes the HDF5 files with the checkpoints.
  ctx.reset();
  auto removed = remove_storage(options(dir)).value();
  EXPECT_EQ(removed.size(), 4u);
  EXPECT_FALSE(fs::exists(dir.file("h5state.3.h5")));
}

TEST(Hdf5Export, RestoreReadsTheCheckpointAndIgnoresTheHdf5Copy) {
  TempDir dir;
  {
    auto ctx = Context::create(options(dir)).value();
    auto* r = ctx->region("r", 4096).value();
    ctx->open().value();
    std::memset(r->data(), 0x5a, 4096);
    ctx->commit().value();
  }
  std::filesystem::remove(dir.file("h5state.1.h5"));
  auto ctx = Context::create(options(dir)).value();
  auto* r = ctx->region("r", 4096).value();
  ctx->open().value();
  EXPECT_EQ(ctx->restore().value(), 1u);
  EXPECT_EQ(static_cast<unsigned char*>(r->data())[4095], 0x5a);
}

TEST(Hdf5Export, BadUsesAreTypedErrors) {
  TempDir dir;
  Options o = options(dir);
  o.strategy = "nt-copy";
  auto other = Context::create(o);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, Errc::invalid_argument);
  EXPECT_NE(other.error().message.find("'file' strategy only"), std::string::npos) << other.error().message;

  auto ctx = Context::create(options(dir)).value();
  (void)ctx->region("mesh/cells", 64).value();
  auto opened = ctx->open();
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, Errc::invalid_argument);
  EXPECT_NE(opened.error().message.find("HDF5"), std::string::npos) << opened.error().message;
}

TEST(Hdf5Export, AnUnwritableExportFailsTheCommitAndKeepsThePreviousVersion) {
  TempDir dir;
  auto ctx = Context::create(options(dir)).value();
  auto* r = ctx->region("r", 4096).value();
  ctx->open().value();
  std::memset(r->data(), 1, 4096);
  ASSERT_EQ(ctx->commit().value(), 1u);
  // A directory where version 2's HDF5 temporary file must go: H5Fcreate fails.
  std::filesystem::create_directory(dir.file("h5state.2.h5.tmp"));
  std::memset(r->data(), 2, 4096);
  auto c = ctx->commit();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("version 2 is not committed"), std::string::npos) << c.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir.file("h5state.2.ckpt")));
  std::filesystem::remove(dir.file("h5state.2.h5.tmp"));

  auto again = Context::create(options(dir)).value();
  auto* r2 = again->region("r", 4096).value();
  again->open().value();
  EXPECT_EQ(again->restore().value(), 1u);
  EXPECT_EQ(static_cast<unsigned char*>(r2->data())[100], 1);
}

}  // namespace
}  // namespace cairn::persist
