#include "os/zero_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <string>

namespace frs::os {

Result<ZeroPages> ZeroPages::Map(size_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("zero pages: a mapping of 0 bytes");
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno("cannot map " + std::to_string(bytes) + " bytes of memory", errno);
  ZeroPages z;
  z.data_ = static_cast<uint8_t*>(p);
  z.size_ = bytes;
  return z;
}

void ZeroPages::Unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace frs::os
