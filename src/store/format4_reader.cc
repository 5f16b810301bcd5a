// Reading a format-4 store (format4_reader.h).
#include "store/format4_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "os/mapped_file.h"
#include "os/stop_request.h"
#include "os/unique_fd.h"
#include "store/chain_map.h"
#include "store/format.h"
#include "store/node_codec.h"
#include "store/store_file.h"

namespace frs::store {
namespace {

// Format 4's layout rules, where they differ from format 5's.
constexpr uint32_t kTagsRecord4 = 0xFFFFFFFFu;  // a journal record of a key-node's tags
uint32_t HeadBytes4(uint32_t chain) {
  uint32_t b = 16;
  while (b < kHeadLockBytes + chain) b *= 2;
  return b;
}
uint8_t TagOf4(uint64_t place_hash) {
  const uint8_t t = static_cast<uint8_t>(place_hash);
  return t ? t : 1;
}

using SlotImage = std::array<uint8_t, kSlotBytes>;

struct File4 {
  std::unique_ptr<os::MappedFile> map;
  FileHeader h;
  // What a dead writer's journal restores: the oldest saved image of each
  // slot and key-node tags it recorded.
  std::map<std::pair<uint32_t, uint32_t>, SlotImage> slots;
  std::map<uint32_t, SlotImage> tags;
};

class Format4Store final : public Store {
 public:
  Format4Store(std::string dir, StoreGeometry g, std::vector<File4> files)
      : dir_(std::move(dir)), geo_(g), files_(std::move(files)) {}

  const StoreGeometry& geometry() const override { return geo_; }

  Status ForEach(const Filter& filter, const Visitor& visit) override {
    return Walk(
        filter, [&](const NodeInfo& n) { visit(n); }, nullptr);
  }

  Result<VerifyReport> Verify(bool repair) override {
    if (repair) return Refused("verify --repair");
    VerifyReport rep;
    Status s = Walk(
        Filter{}, [&](const NodeInfo&) { ++rep.nodes; }, &rep);
    if (!s.ok()) return s;
    for (const File4& f : files_)
      if (!f.slots.empty() || !f.tags.empty())
        rep.recovered.push_back(f.map->path() + ": an unfinished write of a dead writer: read as its undo leaves it");
    return rep;
  }

  StoreStats Stats() const override {
    StoreStats st;
    st.geometry = geo_;
    st.slots = geo_.slots();
    for (const File4& f : files_) {
      st.bytes_mapped += f.map->size();
      AddCounters(CountersOf(f.h), &st);
    }
    return st;
  }

  Status Update(const KeyRef&, uint32_t, uint32_t, const Mutator&, UpdateResult*) override { return Refused("update"); }
  Status UpdateBatch(std::span<const BatchItem>, uint32_t, const BatchMutator&, std::vector<UpdateResult>*) override {
    return Refused("update");
  }
  Result<NodeInfo> Get(const KeyRef&) override { return Refused("get"); }
  Status Erase(const KeyRef&) override { return Refused("erase"); }
  Result<uint64_t> EraseIf(const Filter&, const std::function<bool(const NodeInfo&)>&) override {
    return Refused("erase");
  }
  void SetLiveBizzes(std::vector<bool>) override {}
  Status Reserve() override { return Refused("reserve"); }
  Status CheckFiles() override { return Status::OK(); }
  Status Flush(bool) override { return Status::OK(); }
  Result<uint32_t> RecoverDeadOwner(int32_t) override { return Refused("recover"); }

 private:
  Status Refused(const char* what) const {
    return Status::Unavailable(dir_ + " is a store of format 4, open only to be read for `frsctl upgrade`: " + what +
                               " is not possible on it");
  }

  // Every node of every chain, as format 4 reads it: a node is whole when
  // its span is in range, its fields fit it, its tag is its fingerprint's
  // and the rest of its slots are untagged; anything else is damage, which
  // `rep` (verify) lists and everyone skips.
  template <class Fn>
  Status Walk(const Filter& filter, Fn&& fn, VerifyReport* rep) {
    const uint32_t chain = geo_.chain;
    std::vector<uint8_t> slots(size_t{chain} * kSlotBytes);
    std::vector<uint8_t> tags(chain);
    NodeInfo info;
    for (uint32_t fi = 0; fi < files_.size(); ++fi) {
      if (filter.file >= 0 && filter.file != fi) continue;
      const File4& f = files_[fi];
      const uint8_t* base = f.map->data();
      for (uint32_t k = 0; k < geo_.keynodes; ++k) {
        if (filter.keynode >= 0 && filter.keynode != k) continue;
        if ((k & 1023) == 0 && os::StopRequested())
          return Status::Unavailable("interrupted between chains; nothing is half done");
        std::memcpy(slots.data(), base + f.h.chains_offset + uint64_t{k} * chain * kSlotBytes, slots.size());
        std::memcpy(tags.data(), base + f.h.heads_offset + uint64_t{k} * f.h.head_bytes + kHeadLockBytes, chain);
        // Format 4 saved a key-node's tags in one 32-byte image (a chain
        // longer than 32 overran it): the first 32 at most come back.
        if (auto t = f.tags.find(k); t != f.tags.end())
          std::memcpy(tags.data(), t->second.data(), std::min<uint32_t>(chain, kSlotBytes));
        for (auto it = f.slots.lower_bound({k, 0}); it != f.slots.end() && it->first.first == k; ++it)
          if (it->first.second < chain)
            std::memcpy(&slots[size_t{it->first.second} * kSlotBytes], it->second.data(), kSlotBytes);
        if (rep) ++rep->chains;
        for (uint32_t i = 0; i < chain;) {
          const uint8_t* p = &slots[size_t{i} * kSlotBytes];
          const NodeHeader* h = HeaderAt(p);
          if (IsFree(h) && tags[i] == 0) {
            ++i;
            continue;
          }
          const uint32_t span = SpanOf(h);
          bool ok = span >= 1 && span <= kMaxSpan && span <= chain - i && FieldsFit(h, span) &&
                    tags[i] == TagOf4(PlaceHashOf(h));
          for (uint32_t s = 1; ok && s < span; ++s) ok = tags[i + s] == 0;
          if (!ok) {
            if (rep)
              rep->problems.push_back(f.map->path() + ": keynode " + std::to_string(k) + " slot " + std::to_string(i) +
                                      ": a node whose span, lengths or tag do not fit (torn or damaged node)");
            uint32_t n = 1;
            while (n < kMaxSpan && i + n < chain && tags[i + n] == 0 && !IsFree(HeaderAt(p + n * kSlotBytes))) ++n;
            i += n;
            continue;
          }
          if (filter.biz < 0 || filter.biz == h->biz) {
            DecodeNode(p, &info);
            info.file = fi;
            info.keynode = k;
            info.slot = i;
            fn(info);
          }
          i += span;
        }
      }
    }
    return Status::OK();
  }

  std::string dir_;
  StoreGeometry geo_;
  std::vector<File4> files_;
};

// Lays a dead writer's unfinished journals over the file's chains, as the
// undo would: each entry that is active and not part of a committed batch.
void ReadJournals(std::vector<File4>& files) {
  for (File4& f : files) {
    const uint8_t* base = f.map->data();
    const uint32_t entries = f.h.writer_entries + f.h.batch_entries;
    for (uint32_t e = 0; e < entries; ++e) {
      const uint64_t off = e < f.h.writer_entries
                               ? f.h.writers_offset + uint64_t{e} * f.h.writer_entry_bytes
                               : f.h.writers_offset + uint64_t{f.h.writer_entries} * f.h.writer_entry_bytes +
                                     uint64_t{e - f.h.writer_entries} * f.h.batch_entry_bytes;
      const uint64_t bytes = e < f.h.writer_entries ? f.h.writer_entry_bytes : f.h.batch_entry_bytes;
      if (off + bytes > f.map->size() || bytes < sizeof(WriterEntryHeader)) continue;
      WriterEntryHeader w;
      std::memcpy(&w, base + off, sizeof w);
      if (w.active == 0) continue;
      if (w.batch != 0 && w.coord_file < files.size()) {
        // A batch across files whose coordinator committed stays written.
        const File4& c = files[w.coord_file];
        const uint32_t ce = w.coord_entry;
        if (ce >= c.h.writer_entries && ce < c.h.writer_entries + c.h.batch_entries) {
          const uint64_t coff = c.h.writers_offset + uint64_t{c.h.writer_entries} * c.h.writer_entry_bytes +
                                uint64_t{ce - c.h.writer_entries} * c.h.batch_entry_bytes;
          WriterEntryHeader cw;
          std::memcpy(&cw, c.map->data() + coff, sizeof cw);
          if (cw.committed == w.batch) continue;
        }
      }
      const uint64_t cap = (bytes - sizeof(WriterEntryHeader)) / sizeof(JournalRecord);
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(w.count, cap));
      // Newest first: a slot saved twice ends with its oldest image.
      for (uint32_t i = n; i-- > 0;) {
        JournalRecord r;
        std::memcpy(&r, base + off + sizeof(WriterEntryHeader) + uint64_t{i} * sizeof r, sizeof r);
        if (r.keynode >= f.h.keynodes) continue;
        SlotImage img;
        std::memcpy(img.data(), r.image, kSlotBytes);
        if (r.slot == kTagsRecord4) f.tags[r.keynode] = img;
        else if (r.slot < f.h.chain) f.slots[{r.keynode, r.slot}] = img;
      }
    }
  }
}

}  // namespace

Result<uint32_t> FormatVersionOf(const std::string& path) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: at once
  if (!fd.valid()) return Status::FromErrno(path, errno);
  FileHeader h{};
  const ssize_t n = ::pread(fd.get(), &h, sizeof h, 0);
  if (n < 0) return Status::FromErrno(path, errno);
  if (static_cast<size_t>(n) < sizeof h) return Status::Corruption(path + ": shorter than a store file header");
  if (h.magic != kMagic) return Status::Corruption(path + ": bad magic, not an FRS store file");
  return h.version;
}

Result<std::unique_ptr<Store>> OpenFormat4(const std::string& dir) {
  std::vector<File4> files;
  StoreGeometry g;
  uint64_t id = 0;
  for (uint32_t i = 0;; ++i) {
    const std::string path = StoreFile::PathFor(dir, i);
    if (i > 0 && i >= g.files) break;
    auto m = os::MappedFile::Open(path, os::MappedFile::Mode::kReadOnly, 0);
    if (!m.ok()) return m.status();
    File4 f;
    f.map = std::move(m.value());
    if (f.map->size() < sizeof(FileHeader)) return Status::Corruption(path + ": shorter than a store file header");
    std::memcpy(&f.h, f.map->data(), sizeof f.h);
    const FileHeader& h = f.h;
    if (h.magic != kMagic) return Status::Corruption(path + ": bad magic, not an FRS store file");
    if (h.version != kPreviousFormatVersion)
      return Status::Mismatch(path + ": format version " + std::to_string(h.version) + ", not " +
                              std::to_string(kPreviousFormatVersion));
    if (HeaderChecksum(h) != h.checksum)
      return Status::Corruption(path + ": header checksum mismatch (header damaged)");
    if (i == 0) {
      g = StoreGeometry{h.files, h.keynodes, h.chain};
      id = h.store_id;
      if (g.files < 1 || g.files > 256 || g.keynodes < 1 || g.keynodes > (1u << 26) || g.chain < 1 || g.chain > 64)
        return Status::Corruption(path + ": its geometry is out of range");
    } else if (h.files != g.files || h.keynodes != g.keynodes || h.chain != g.chain || h.store_id != id) {
      return Status::Mismatch(path + ": belongs to another store than " + StoreFile::PathFor(dir, 0));
    }
    if (h.file_index != i) return Status::Corruption(path + ": header says it is file " + std::to_string(h.file_index));
    const uint64_t chains_end = h.chains_offset + uint64_t{h.keynodes} * h.chain * kSlotBytes;
    if (h.slot_bytes != kSlotBytes || h.node_header_bytes != kNodeHeaderBytes || h.head_bytes != HeadBytes4(h.chain) ||
        h.heads_offset + uint64_t{h.keynodes} * h.head_bytes > h.writers_offset || chains_end != h.file_bytes ||
        h.file_bytes != f.map->size())
      return Status::Corruption(path + ": header layout fields disagree with format 4 or with the file's size");
    files.push_back(std::move(f));
  }
  ReadJournals(files);
  return std::unique_ptr<Store>(std::make_unique<Format4Store>(dir, g, std::move(files)));
}

}  // namespace frs::store
