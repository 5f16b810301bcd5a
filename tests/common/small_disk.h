// tests/common/small_disk.h: a small tmpfs mounted over a test's directory,
// for what a full disk does; unmounted at scope end. Root only (CI runs as
// root): mounted() says whether the test has one.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace frs::testing {

class SmallDisk {
 public:
  SmallDisk(const std::string& dir, const std::string& size) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    mounted_ =
        ::getuid() == 0 && std::system(("mount -t tmpfs -o size=" + size + " tmpfs '" + dir_ + "'").c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) std::system(("umount -l '" + dir_ + "'").c_str());
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

}  // namespace frs::testing
