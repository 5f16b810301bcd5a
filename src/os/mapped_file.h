// os/mapped_file.h: a file mapped shared and read-write into this process.
//
// The mapping is made with Boost.Interprocess (file_mapping + mapped_region);
// the file is created here (O_CREAT|O_EXCL, mode 0600, sparse by ftruncate)
// so that two processes racing to create it cannot both initialize it: the
// creator holds an exclusive flock on the file until it calls
// FinishCreate(), and every opener takes a shared flock first, so nobody
// validates a half-written header.
//
// Thread safety: the object is immutable after Open; the bytes are shared
// memory and need the caller's own synchronization.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::os {

class MappedFile {
 public:
  // kReadOnly: opened O_RDONLY and mapped PROT_READ (a store on a read-only
  // file system, or files this user may not write); nothing may be written.
  enum class Mode { kOpenOnly, kCreateIfMissing, kReadOnly };

  // Maps `path`. When created, the file is `create_size` bytes of zeros and
  // created() is true: the caller initializes it and calls FinishCreate().
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path, Mode mode, uint64_t create_size);
  ~MappedFile();

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool created() const { return created_; }
  bool read_only() const { return read_only_; }

  // Releases the creator's exclusive lock (keeps a shared one).
  Status FinishCreate();
  // Allocates the file's blocks (posix_fallocate) and prefaults the mapping
  // writable where the kernel supports it.
  Status Reserve() const;
  // Bytes Reserve() would still allocate: the size minus the blocks the file
  // already has (0 when it has them all).
  Result<uint64_t> BytesToReserve() const;
  // `sync`: msync(MS_SYNC), waits for the disk. Else starts the writeback
  // of every dirty page now and returns (sync_file_range WRITE); each page
  // written takes a fault at its next write.
  Status Sync(bool sync) const;

  // The file was deleted or truncated under us (CheckStillThere), or a page
  // of it faulted (the SIGBUS guard replaced the mapping with zero pages):
  // nothing read from or written to it counts any more.
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // fstat: a file unlinked (st_nlink 0) or shorter than mapped is marked
  // broken, with a message saying which; so is one whose path names another
  // file now, or none for 2 s (moved away, or replaced by a copy renamed
  // over it): what it holds would not be at the path a restart opens.
  Status CheckStillThere() const;
  // Whether `path` names the very file this maps (same device and inode):
  // a creator that removes a file it could not finish removes only its own,
  // never one another process made at that name meanwhile.
  bool IsAt(const std::string& path) const;

 private:
  MappedFile() = default;
  struct Region;
  std::unique_ptr<Region> region_;
  UniqueFd fd_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  std::string at_;  // path_ made absolute at the open: a later chdir moves no file
  // When CheckStillThere first found no file at at_ (0: one is there). A
  // path missing for kAbsentNs is a move; a shorter gap is not.
  static constexpr int64_t kAbsentNs = 2'000'000'000;
  mutable std::atomic<int64_t> absent_since_ns_{0};
  bool created_ = false;
  bool read_only_ = false;
  mutable std::atomic<bool> broken_{false};
  int guard_ = -1;  // os/sigbus_guard.h handle
};

}  // namespace frs::os
