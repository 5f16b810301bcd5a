// stats/recent_denials.h: the keys denied in the last minutes, with their
// text, for `frsctl top --denied` ("who is being denied right now?"), even
// for a biz whose nodes do not keep their keys.
//
// `denials.frs` in the store directory: a 64-byte header (magic, version,
// geometry, checksum) and kSlots slots of 384 bytes (3 MB), an open-addressed table
// on a hash of (biz, key) probed kProbe slots deep. A slot holds the key's
// hash, its biz and text, and a count for each of the last kMinutes minutes
// (a ring of per-minute counters, each stamped with its minute). A denial
// counts into its key's slot; a key not in the table takes an empty slot or
// one whose newest minute is older than kMinutes (the stalest of its probe).
// When every probed slot is live the denial is only counted in the header's
// `dropped`: the table keeps the keys it has, which are the ones being
// denied now.
//
// Lock-free and kill-safe: a slot is claimed by a compare-and-swap of its
// hash, then its text is written; a reader shows a slot only when its text
// hashes to the slot's hash, so a slot half written by a process killed
// mid-way (or being replaced) is skipped, never shown with another key's
// count. A minute's counter and its minute are one word, updated by one
// compare-and-swap: no denial is lost to a racing restart of the minute.
//
// Thread safety: all methods are safe from any thread and process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"
#include "os/zero_pages.h"

namespace frs::os {
class MappedFile;
}

namespace frs::stats {

class RecentDenials {
 public:
  static constexpr uint32_t kSlots = 8192;
  static constexpr uint32_t kProbe = 8;
  static constexpr uint32_t kMinutes = 10;

  // Opens (creating when missing) `dir`/denials.frs; "" keeps the table in
  // memory only. `read_only`: never written (frsctl on a live store).
  static Result<std::unique_ptr<RecentDenials>> Open(const std::string& dir, bool read_only);
  ~RecentDenials();

  void Count(uint16_t biz, std::string_view key, int64_t now_s);

  struct Row {
    uint16_t biz = 0;
    std::string key;
    uint64_t denied = 0;      // in the last `minutes`
    int64_t last_minute = 0;  // unix minute of the newest denial
  };
  // The keys denied in the last `minutes` (1..kMinutes), most denied first;
  // `biz` 0: every biz.
  std::vector<Row> Top(uint32_t minutes, uint16_t biz, size_t n, int64_t now_s) const;
  uint64_t dropped() const;

  struct Header;
  struct Slot;

 private:
  RecentDenials() = default;
  Header* header() const;
  Slot* slot(uint32_t i) const;

  std::unique_ptr<os::MappedFile> file_;
  os::ZeroPages memory_;
  uint8_t* base_ = nullptr;
  bool read_only_ = false;
};

}  // namespace frs::stats
