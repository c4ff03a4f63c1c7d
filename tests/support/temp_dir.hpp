// temp_dir.hpp — a scratch directory for tests, removed on destruction.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace cairn::testing {

class TempDir {
 public:
  // Under $CAIRN_TEST_DIR, else /dev/shm (tmpfs), else the system temp dir.
  TempDir() {
    namespace fs = std::filesystem;
    const char* env = std::getenv("CAIRN_TEST_DIR");
    fs::path root = env ? fs::path(env) : (fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path());
    std::string tmpl = (root / "cairn-test-XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    path_ = made ? made : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cairn::testing
