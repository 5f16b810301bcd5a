// store/store_file.h: one mapped file of the cluster: create, validate, address.
//
// Thread safety: immutable after Open; accessors return pointers into shared
// memory whose synchronization is the caller's (chain locks).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "os/mapped_file.h"
#include "os/shm_lock.h"
#include "store/format.h"
#include "store/identity.h"

namespace frs::store {

class StoreFile {
 public:
  // Opens (or creates, when allowed) file `index` of the store in `dir`.
  // `store_id` and `place_key` are what a file created here gets (a key of
  // 0: a format-5 file, placed unkeyed, which only tests make); the caller
  // checks that every file says the same (store_id(), place_key()).
  static Result<std::unique_ptr<StoreFile>> Open(const std::string& dir, uint32_t index, const StoreGeometry& g,
                                                 bool create, uint64_t store_id, const PlaceKey& place_key,
                                                 bool read_only = false);

  static std::string PathFor(const std::string& dir, uint32_t index);
  // Why `path` (store id `id`) and `first` (`first_id`), both in one
  // store's directory, cannot be opened together: the words name both, since
  // which of the two came from elsewhere the files cannot tell.
  static std::string ForeignFileWords(const std::string& first, uint64_t first_id, const std::string& path,
                                      uint64_t id);
  // The checksummed part of a header (identity and geometry) as a new file
  // of store `store_id` gets it, its checksum included; the counters are
  // left as they are. A keyed `place_key` makes a file of format 6, none
  // one of format 5.
  static void WriteIdentity(FileHeader* h, const StoreGeometry& g, uint32_t index, uint64_t store_id,
                            uint64_t created_unix, const PlaceKey& place_key);
  // The placement key a header says (format 5: none).
  static PlaceKey PlaceKeyOf(const FileHeader& h) {
    return h.version == kUnkeyedFormatVersion ? PlaceKey{} : PlaceKey{h.place_key[0], h.place_key[1]};
  }
  // The same from a damaged header: each byte as two of its three copies
  // have it (the first copy's where all three differ).
  static PlaceKey VotedPlaceKey(const FileHeader& h);
  // Validates a header against the expected geometry (used by Open and Verify).
  static Status CheckHeader(const std::string& path, const FileHeader& h, const StoreGeometry& g, uint32_t index,
                            uint64_t file_size);

  FileHeader* header() const { return reinterpret_cast<FileHeader*>(map_->data()); }
  os::LockWord* lock(uint32_t keynode) const {
    return reinterpret_cast<os::LockWord*>(heads_ + uint64_t{keynode} * head_bytes_);
  }
  uint8_t* tags(uint32_t keynode) const { return heads_ + uint64_t{keynode} * head_bytes_ + kHeadLockBytes; }
  uint8_t* slot(uint32_t keynode, uint32_t s) const { return chains_ + (uint64_t{keynode} * chain_ + s) * kSlotBytes; }
  // Entries [0, kWriterEntries) are per-thread update journals, then
  // kBatchEntries batch journals (format.h).
  WriterEntryHeader* writer(uint32_t i) const {
    const uint64_t off = i < kWriterEntries
                             ? uint64_t{i} * writer_bytes_
                             : kWriterEntries * writer_bytes_ + uint64_t{i - kWriterEntries} * batch_bytes_;
    return reinterpret_cast<WriterEntryHeader*>(writers_ + off);
  }
  uint32_t writer_index(const WriterEntryHeader* w) const {
    const uint64_t off = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(w) - writers_);
    if (off < kWriterEntries * writer_bytes_) return static_cast<uint32_t>(off / writer_bytes_);
    return kWriterEntries + static_cast<uint32_t>((off - kWriterEntries * writer_bytes_) / batch_bytes_);
  }
  // Slots per chain as laid out: a key-node group's (format.h GroupGeometry).
  uint32_t chain() const { return chain_; }
  // Undo records entry `i` can hold.
  uint32_t capacity(uint32_t i) const { return JournalCapacity(chain_, i); }
  JournalRecord* records(WriterEntryHeader* w) const {
    return reinterpret_cast<JournalRecord*>(reinterpret_cast<uint8_t*>(w) + sizeof(WriterEntryHeader));
  }
  const std::string& path() const { return map_->path(); }
  // Made by this Open (not found there, nor made by a racing opener).
  bool created() const { return map_->created(); }
  uint64_t bytes() const { return map_->size(); }
  uint64_t store_id() const { return header()->store_id; }
  PlaceKey place_key() const { return PlaceKeyOf(*header()); }
  Status Sync(bool sync) const { return map_->Sync(sync); }
  Status Reserve() const { return map_->Reserve(); }
  Result<uint64_t> BytesToReserve() const { return map_->BytesToReserve(); }
  bool broken() const { return map_->broken(); }
  Status CheckStillThere() const { return map_->CheckStillThere(); }

 private:
  StoreFile() = default;
  std::unique_ptr<os::MappedFile> map_;
  uint8_t* heads_ = nullptr;
  uint32_t head_bytes_ = 0;
  uint8_t* writers_ = nullptr;
  uint8_t* chains_ = nullptr;
  uint64_t writer_bytes_ = 0;
  uint64_t batch_bytes_ = 0;
  uint32_t chain_ = 0;
};

uint64_t HeaderChecksum(const FileHeader& h);
// A field of a mapped file that other processes write, read whole (acquire:
// a writer entry's fields are read before the records they vouch for).
template <class T>
inline T AtomicLoad(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_acquire);
}
// A file header's counters (read atomically: other processes update them),
// and their sum into a store's totals.
FileStats CountersOf(const FileHeader& h);
void AddCounters(const FileStats& fs, StoreStats* s);

}  // namespace frs::store
