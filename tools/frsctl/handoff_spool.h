// frsctl/handoff_spool.h: the handoff's spool file, records checked whole.
//
// Each record is one line, "PAYLOAD #XXXXXXXXXXXXXXXX\n": the payload, then
// the XXH64 of the payload in hex. A record is there whole or it is not
// there: a write that a full disk or a kill -9 cut short leaves a tail
// without its newline or with a checksum that does not match, and Open cuts
// the file back to the last whole record before anything is appended. (A
// cut line used to stay: the next run appended its mark to it, read the
// spliced line as a node with half its JSON, and refused every run after,
// with the other nodes already erased.) A damaged record that is not the
// last one is refused, never guessed at. Lines without a checksum, from a
// spool an older frsctl wrote, are read as before, but only ahead of the
// first line with one: after it, a line without is a damaged record.
//
// Reserve() sets the room for the records a step will write aside before
// the step begins (fallocate beyond the end of the file, which appends then
// use; each reservation adds to what earlier ones set aside and appends have
// not used yet): a batch's nodes are erased only once the marks that say
// so, and the acknowledgements that follow, are sure to fit. (On a file
// system without fallocate, appends take their blocks as they go.)
//
// Fields that name things (a receipt, a shard) are written with
// EncodeField, so no byte of theirs can be taken for a separator.
//
// Thread safety: one HandoffSpool per process (it holds the file's flock).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"
#include "frs/unique_fd.h"

namespace frs::ctl {

struct SpoolRecord {
  std::string payload;
  bool checked = false;  // carried its checksum (false: an older frsctl's line)
};

class HandoffSpool {
 public:
  // Opens (creating) and locks `path`, reads its records, and cuts a torn
  // tail; `note` says what was cut ("" when nothing).
  Status Open(const std::string& path, std::vector<SpoolRecord>* records, std::string* note);
  // Room for `bytes` more bytes of records, taken from the disk now.
  Status Reserve(uint64_t bytes);
  // Appends each payload as one record; on a failed write, the file is cut
  // back to where this call began (no torn record stays behind).
  Status Append(const std::vector<std::string>& payloads);
  // Everything in it is settled: the next run starts from an empty file.
  Status Clear();

  // The bytes Append writes for `payload`.
  static uint64_t RecordBytes(std::string_view payload) { return payload.size() + kSuffixBytes; }
  static std::string Record(std::string_view payload);

  static constexpr uint64_t kSuffixBytes = 19;  // " #" + 16 hex + "\n"

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t reserved_end_ = 0;  // the end of the room set aside so far
};

// A field made safe for a space-separated record: bytes up to 0x20, 0x7f,
// '%' and '#' as %XX. DecodeField undoes it (false on a bad escape).
std::string EncodeField(std::string_view field);
bool DecodeField(std::string_view text, std::string* out);

}  // namespace frs::ctl
