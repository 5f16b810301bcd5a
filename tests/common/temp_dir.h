// tests/common/temp_dir.h: a private temporary directory, removed at scope end.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace frs::testing {

class TempDir {
 public:
  // `prefix` names the directory under $TMPDIR (or /tmp): prefix-XXXXXX.
  explicit TempDir(const std::string& prefix = "frs-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty() && !keep_) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Leaves the directory behind, for a look after a failed run.
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace frs::testing
