#include "store/store_file.h"

#include <cstdio>

#include <atomic>
#include <cstring>
#include <ctime>
#include <filesystem>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "os/store_dir.h"

namespace frs::store {

uint64_t HeaderChecksum(const FileHeader& h) { return XXH3_64bits(&h, kChecksummedBytes); }

FileStats CountersOf(const FileHeader& h) {
  FileStats fs;
  fs.nodes_used = AtomicLoad(h.nodes_used);
  fs.slots_used = AtomicLoad(h.slots_used);
  fs.evictions_stale = AtomicLoad(h.evictions_stale);
  fs.evictions_live = AtomicLoad(h.evictions_live);
  fs.cuckoo_moves = AtomicLoad(h.cuckoo_moves);
  fs.lock_recoveries = AtomicLoad(h.lock_recoveries);
  fs.damaged_nodes = AtomicLoad(h.damaged_nodes);
  fs.created_unix = h.created_unix;
  return fs;
}

void AddCounters(const FileStats& fs, StoreStats* s) {
  s->total.nodes_used += fs.nodes_used;
  s->total.slots_used += fs.slots_used;
  s->total.evictions_stale += fs.evictions_stale;
  s->total.evictions_live += fs.evictions_live;
  s->total.cuckoo_moves += fs.cuckoo_moves;
  s->total.lock_recoveries += fs.lock_recoveries;
  s->total.damaged_nodes += fs.damaged_nodes;
  if (s->total.created_unix == 0) s->total.created_unix = fs.created_unix;
  s->per_file.push_back(fs);
}

std::string StoreFile::PathFor(const std::string& dir, uint32_t index) {
  return os::store_dir::In(dir, os::store_dir::StoreFileName(index));
}

std::string StoreFile::ForeignFileWords(const std::string& first, uint64_t first_id, const std::string& path,
                                        uint64_t id) {
  char ids[64];
  std::snprintf(ids, sizeof ids, "%016llx and %016llx", static_cast<unsigned long long>(first_id),
                static_cast<unsigned long long>(id));
  return first + " and " + path + " belong to two stores (store ids " + ids +
         "): one of them was copied here from another store of the same geometry, and the files cannot tell "
         "which. Put back the one that came from elsewhere from a backup of this store (its files share one "
         "store id); removing either throws away the counts it holds";
}

void StoreFile::WriteIdentity(FileHeader* h, const StoreGeometry& g, uint32_t index, uint64_t store_id,
                              uint64_t created_unix, const PlaceKey& place_key) {
  const FileLayout l = LayoutFor(g);
  std::memset(h, 0, offsetof(FileHeader, checksum));
  h->magic = kMagic;
  h->version = place_key.keyed() ? kFormatVersion : kUnkeyedFormatVersion;
  for (uint64_t* k : {h->place_key, h->place_key_copies[0], h->place_key_copies[1]}) {
    k[0] = place_key.k0;
    k[1] = place_key.k1;
  }
  h->header_bytes = kHeaderBytes;
  h->files = g.files;
  h->file_index = index;
  h->keynodes = g.keynodes;
  h->chain = g.chain;
  h->keynode_group = KeynodeGroup(g);
  h->slot_bytes = kSlotBytes;
  h->node_header_bytes = kNodeHeaderBytes;
  h->writer_entries = kWriterEntries;
  h->writer_entry_bytes = static_cast<uint32_t>(l.writer_entry_bytes);
  h->batch_entries = kBatchEntries;
  h->batch_entry_bytes = static_cast<uint32_t>(l.batch_entry_bytes);
  h->heads_offset = l.heads_offset;
  h->head_bytes = l.head_bytes;
  h->writers_offset = l.writers_offset;
  h->chains_offset = l.chains_offset;
  h->file_bytes = l.file_bytes;
  h->created_unix = created_unix;
  h->store_id = store_id;
  h->layout_signature = kLayoutSignature;
  h->checksum = HeaderChecksum(*h);
}

PlaceKey StoreFile::VotedPlaceKey(const FileHeader& h) {
  if (h.version == kUnkeyedFormatVersion) return PlaceKey{};
  uint8_t a[16], b[16], c[16], out[16];
  std::memcpy(a, h.place_key, 16);
  std::memcpy(b, h.place_key_copies[0], 16);
  std::memcpy(c, h.place_key_copies[1], 16);
  for (int i = 0; i < 16; ++i) out[i] = a[i] == b[i] || a[i] == c[i] ? a[i] : b[i] == c[i] ? b[i] : a[i];
  PlaceKey k;
  std::memcpy(&k.k0, out, 8);
  std::memcpy(&k.k1, out + 8, 8);
  return k;
}

namespace {

std::string DamagedHeader() {
  return ": header checksum mismatch (header damaged; with frsd stopped, frsctl verify --repair rebuilds a header "
         "damaged in a few bytes, and its nodes with it)";
}

}  // namespace

Status StoreFile::CheckHeader(const std::string& path, const FileHeader& h, const StoreGeometry& g, uint32_t index,
                              uint64_t file_size) {
  if (file_size < sizeof(FileHeader))
    return Status::Corruption(path + ": file is " + std::to_string(file_size) + " bytes, shorter than its header");
  if (h.magic != kMagic) {
    if (__builtin_bswap64(h.magic) == kMagic)
      return Status::Mismatch(path + ": store written on a machine of the other byte order");
    return Status::Corruption(path + ": bad magic, not an FRS store file");
  }
  // A version other than this build's whose checksum fails is damage, not
  // another format: a format-4 or a newer header is intact (one byte of a
  // format-5 header turned to 4 sent the operator to frsctl upgrade, which
  // found the header damaged).
  const bool intact = HeaderChecksum(h) == h.checksum;
  if (!IsReadableFormat(h.version) && !intact) return Status::Corruption(path + DamagedHeader());
  const std::string reads =
      "this build reads versions " + std::to_string(kUnkeyedFormatVersion) + " and " + std::to_string(kFormatVersion);
  if (h.version == 4)
    return Status::Mismatch(path + ": format version 4, " + reads +
                            ": run `frsctl upgrade` on the stopped store (it keeps every count, expiry and daily "
                            "statistic)");
  if (!IsReadableFormat(h.version))
    return Status::Mismatch(path + ": format version " + std::to_string(h.version) + ", " + reads +
                            " (export with the old frsctl, import with the new)");
  if (!intact) return Status::Corruption(path + DamagedHeader());
  if (h.version == kFormatVersion && !PlaceKeyOf(h).keyed())
    return Status::Corruption(path + ": format version " + std::to_string(kFormatVersion) +
                              " without a placement key (no build writes one)");
  if (h.version == kFormatVersion && (std::memcmp(h.place_key_copies[0], h.place_key, sizeof h.place_key) != 0 ||
                                      std::memcmp(h.place_key_copies[1], h.place_key, sizeof h.place_key) != 0))
    return Status::Corruption(path + ": the header's copies of its placement key disagree (no build writes such)");
  if (h.layout_signature != kLayoutSignature)
    return Status::Mismatch(path + ": written by a build with another node layout");
  auto differs = [&](const char* what, uint64_t file, uint64_t want) {
    return Status::Mismatch(path + ": store has " + what + "=" + std::to_string(file) + " but srv.xml says " + what +
                            "=" + std::to_string(want) +
                            " (a store is never reinterpreted: set srv.xml's <store> to the store's geometry, or "
                            "change the store's with frsctl grow)");
  };
  if (h.files != g.files) return differs("files", h.files, g.files);
  if (h.keynodes != g.keynodes) return differs("keynodes", h.keynodes, g.keynodes);
  if (h.chain != g.chain) return differs("chain", h.chain, g.chain);
  if (h.file_index != index)
    return Status::Corruption(path + ": header says it is file " + std::to_string(h.file_index) + ", expected file " +
                              std::to_string(index) + " (files renamed or copied over one another): with frsd " +
                              "stopped, give each file the name its header says, " +
                              StoreFile::PathFor(std::filesystem::path(path).parent_path().string(), h.file_index) +
                              " for this one");
  FileLayout l = LayoutFor(g);
  if (h.keynode_group != KeynodeGroup(g) || h.slot_bytes != kSlotBytes || h.node_header_bytes != kNodeHeaderBytes ||
      h.header_bytes != kHeaderBytes || h.writer_entries != kWriterEntries ||
      h.writer_entry_bytes != l.writer_entry_bytes || h.batch_entries != kBatchEntries ||
      h.batch_entry_bytes != l.batch_entry_bytes || h.heads_offset != l.heads_offset || h.head_bytes != l.head_bytes ||
      h.writers_offset != l.writers_offset || h.chains_offset != l.chains_offset || h.file_bytes != l.file_bytes)
    return Status::Corruption(path + ": header layout fields disagree with its geometry");
  // Each says what to do: a cut file lost its tail (restore it, or give up
  // its keys); one grown past its size lost nothing and is cut back.
  if (file_size < l.file_bytes)
    return Status::Corruption(path + ": file is " + std::to_string(file_size) + " bytes, its header says " +
                              std::to_string(l.file_bytes) +
                              " (truncated): restore it from a backup; without one, remove it and run frsctl init "
                              "--recreate-missing with frsd stopped (the keys it held start again from zero)");
  if (file_size > l.file_bytes)
    return Status::Corruption(path + ": file is " + std::to_string(file_size) + " bytes, its header says " +
                              std::to_string(l.file_bytes) + " (extended): with frsd stopped, truncate -s " +
                              std::to_string(l.file_bytes) + " " + path +
                              " gives it its size back; then frsctl verify checks what it holds");
  return Status::OK();
}

Result<std::unique_ptr<StoreFile>> StoreFile::Open(const std::string& dir, uint32_t index, const StoreGeometry& g,
                                                   bool create, uint64_t store_id, const PlaceKey& place_key,
                                                   bool read_only) {
  const std::string path = PathFor(dir, index);
  const FileLayout l = LayoutFor(g);
  auto m = os::MappedFile::Open(path,
                                read_only ? os::MappedFile::Mode::kReadOnly
                                : create  ? os::MappedFile::Mode::kCreateIfMissing
                                          : os::MappedFile::Mode::kOpenOnly,
                                l.file_bytes);
  if (!m.ok()) return m.status();
  std::unique_ptr<StoreFile> f(new StoreFile());  // private constructor
  f->map_ = std::move(m.value());
  FileHeader* h = f->header();
  if (f->map_->created()) {
    WriteIdentity(h, g, index, store_id, static_cast<uint64_t>(::time(nullptr)), place_key);
    if (Status s = f->map_->Sync(true); !s.ok()) return s;
    if (Status s = f->map_->FinishCreate(); !s.ok()) return s;
  } else if (Status s = CheckHeader(path, *h, g, index, f->map_->size()); !s.ok()) {
    return s;
  }
  f->chain_ = GroupGeometry(g).chain;
  f->writer_bytes_ = l.writer_entry_bytes;
  f->batch_bytes_ = l.batch_entry_bytes;
  f->heads_ = f->map_->data() + l.heads_offset;
  f->head_bytes_ = l.head_bytes;
  f->writers_ = f->map_->data() + l.writers_offset;
  f->chains_ = f->map_->data() + l.chains_offset;
  return f;
}

}  // namespace frs::store
