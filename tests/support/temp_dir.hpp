// temp_dir.hpp — a scratch directory for tests, removed on destruction.
#pragma once

#include <sys/statfs.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace cairn::testing {

// The system temp directory when it is on a disk file system (not tmpfs),
// else "": where a test finds pools that write back through the page cache.
inline std::string disk_temp_root() {
  constexpr unsigned long kTmpfsMagic = 0x01021994UL;
  const std::string tmp = std::filesystem::temp_directory_path().string();
  struct statfs fs {};
  if (::statfs(tmp.c_str(), &fs) != 0 || static_cast<unsigned long>(fs.f_type) == kTmpfsMagic) return "";
  return tmp;
}

class TempDir {
 public:
  // Under $CAIRN_TEST_DIR, else /dev/shm (tmpfs), else the system temp dir.
  TempDir() {
    namespace fs = std::filesystem;
    const char* env = std::getenv("CAIRN_TEST_DIR");
    fs::path root = env ? fs::path(env) : (fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path());
    make(root.string());
  }
  // Under `root`.
  explicit TempDir(const std::string& root) { make(root); }
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  void make(const std::string& root) {
    std::string tmpl = root + "/cairn-test-XXXXXX";
    char* made = mkdtemp(tmpl.data());
    path_ = made ? made : tmpl;
  }
  std::string path_;
};

}  // namespace cairn::testing
