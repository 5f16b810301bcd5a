// os/zero_pages.h: zero-filled memory that costs only the pages written: an
// anonymous private mapping, whose pages the kernel supplies, zeroed, when
// each is first touched, and returns at munmap.
//
// A side table kept in memory for a file that is not there (frsd's start
// checks, frsd -t, frsctl on a store that never served: os/mapped_table.h)
// is mostly never read and less often written; zeroing all of it by hand
// (denials.frs is 3 MB) cost every such start a page fault per page, and a
// sanitized build's leak check scanned it at exit besides.
//
// Thread safety: a plain owner; the bytes are the caller's to synchronize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "frs/status.h"

namespace frs::os {

class ZeroPages {
 public:
  ZeroPages() = default;
  // `bytes` (> 0) of zeros, read-write; an error value when the kernel
  // refuses the mapping.
  static Result<ZeroPages> Map(size_t bytes);

  ZeroPages(ZeroPages&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ZeroPages& operator=(ZeroPages&& o) noexcept {
    if (this != &o) {
      Unmap();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ZeroPages(const ZeroPages&) = delete;
  ZeroPages& operator=(const ZeroPages&) = delete;
  ~ZeroPages() { Unmap(); }

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void Unmap();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace frs::os
