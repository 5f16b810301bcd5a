#include "handoff_spool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "frs/percent_encode.h"

namespace frs::ctl {

namespace {

std::string HashHex(std::string_view payload) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<uint64_t>(XXH64(payload.data(), payload.size(), 0)));
  return hex;
}

bool IsHex16(std::string_view s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string HandoffSpool::Record(std::string_view payload) {
  std::string r(payload);
  r += " #";
  r += HashHex(payload);
  r += '\n';
  return r;
}

namespace {

// A line that ends as a record of ours, " #" and 16 hex digits, but for a
// byte of those changed, added or deleted (the first of our records damaged
// there came before any whole one, and was read as an older frsctl's line,
// which never holds " #": its fields are encoded, '#' as %23, and its JSON
// ends with '}').
bool LooksChecksummed(std::string_view line) {
  const size_t tail = HandoffSpool::kSuffixBytes - 1;
  if (line.size() >= tail) {
    const std::string_view t = line.substr(line.size() - tail);
    int wrong = (t[0] != ' ') + (t[1] != '#');
    for (char c : t.substr(2)) wrong += !std::isxdigit(static_cast<unsigned char>(c));
    if (wrong <= 1) return true;
  }
  const size_t mark = line.rfind(" #");
  if (mark == std::string_view::npos) return false;
  const std::string_view digits = line.substr(mark + 2);
  return digits.size() >= 14 && digits.size() <= 18 &&
         std::all_of(digits.begin(), digits.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

Status HandoffSpool::Open(const std::string& path, std::vector<SpoolRecord>* records, std::string* note) {
  path_ = path;
  note->clear();
  records->clear();
  // Never through a link: frsctl runs as root, and would append to the file
  // one placed there leads to.
  fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (!fd_.valid() && errno == ELOOP)
    return Status::IOError(path + " is a symbolic link: not a spool frsctl made (remove it)");
  if (!fd_.valid()) return Status::FromErrno("cannot open " + path, errno);
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return Status::IOError(path + " is not a regular file: not a spool frsctl made");
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0)
    return Status::Busy(path + " is in use: another frsctl handoff runs on this store");
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::pread(fd_.get(), buf, sizeof buf, static_cast<off_t>(text.size()))) > 0)
    text.append(buf, static_cast<size_t>(n));
  if (n < 0) return Status::FromErrno("cannot read " + path, errno);
  size_t pos = 0, good_end = 0, line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // no newline: a torn tail
    ++line_no;
    std::string_view line(text.data() + pos, nl - pos);
    const bool last = nl + 1 == text.size();
    if (line.size() >= kSuffixBytes - 1 && line[line.size() - 18] == ' ' && line[line.size() - 17] == '#' &&
        IsHex16(line.substr(line.size() - 16))) {
      const std::string_view payload = line.substr(0, line.size() - 18);
      if (HashHex(payload) != line.substr(line.size() - 16)) {
        if (last) break;  // a tail whose last page did not reach the disk whole
        return Status::Corruption(path + ":" + std::to_string(line_no) +
                                  ": a damaged record (its checksum does not match) before the end of the spool: "
                                  "nothing was changed; restore the file, or move it aside once every node it lists "
                                  "is back (frsctl get on the shards it names)");
      }
      records->push_back(SpoolRecord{std::string(payload), true});
    } else if ((!records->empty() && records->back().checked) || LooksChecksummed(line)) {
      // An older frsctl's lines come before any of ours, never after, and
      // never end as ours do but for one byte: this is a record whose
      // checksum was damaged.
      if (last) break;
      return Status::Corruption(path + ":" + std::to_string(line_no) +
                                ": a damaged record (its checksum is gone) before the end of the spool: nothing was "
                                "changed; restore the file, or move it aside once every node it lists is back "
                                "(frsctl get on the shards it names)");
    } else {
      records->push_back(SpoolRecord{std::string(line), false});  // written by an older frsctl
    }
    pos = good_end = nl + 1;
  }
  if (good_end < text.size()) {
    if (::ftruncate(fd_.get(), static_cast<off_t>(good_end)) != 0)
      return Status::FromErrno("cannot cut the torn end of " + path, errno);
    *note = path + ": cut " + std::to_string(text.size() - good_end) +
            " byte(s) of a record a full disk or a kill left unfinished (nothing it described was done)";
  }
  return Status::OK();
}

Status HandoffSpool::Reserve(uint64_t bytes) {
  if (bytes == 0) return Status::OK();
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno("cannot stat " + path_, errno);
  // After the room earlier reservations set aside and appends have not used.
  const uint64_t from = std::max<uint64_t>(static_cast<uint64_t>(st.st_size), reserved_end_);
  if (::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from), static_cast<off_t>(bytes)) == 0) {
    reserved_end_ = from + bytes;
    return Status::OK();
  }
  // A file system without fallocate: appends take their blocks as they go.
  if (errno == EOPNOTSUPP || errno == ENOSYS) return Status::OK();
  return Status::FromErrno("no room for " + std::to_string(bytes) + " bytes of handoff records in " + path_, errno);
}

Status HandoffSpool::Append(const std::vector<std::string>& payloads) {
  std::string lines;
  for (const std::string& p : payloads) lines += Record(p);
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno("cannot stat " + path_, errno);
  // The crash tests (tests/cluster): FRS_TEST_HANDOFF_CRASH=torn dies as a
  // kill -9 would, halfway through a write of more than a page, inside a
  // record (20 bytes into the first one that starts past the middle: a cut
  // that fell on a record's end by chance tested nothing).
  if (const char* at = std::getenv("FRS_TEST_HANDOFF_CRASH");
      at && std::strcmp(at, "torn") == 0 && lines.size() > 4096) {
    const size_t next = lines.find('\n', lines.size() / 2) + 1;
    if (next > 0 && next + 20 < lines.size() && lines.find('\n', next) > next + 20) {
      [[maybe_unused]] const ssize_t part = ::write(fd_.get(), lines.data(), next + 20);
      _exit(137);
    }
  }
  size_t off = 0;
  while (off < lines.size()) {
    ssize_t n = ::write(fd_.get(), lines.data() + off, lines.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // No torn record stays: the next run reads what this one did.
      [[maybe_unused]] const int cut = ::ftruncate(fd_.get(), st.st_size);
      return Status::FromErrno("cannot write " + path_, err);
    }
    off += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status HandoffSpool::Clear() {
  if (::ftruncate(fd_.get(), 0) != 0) return Status::FromErrno("cannot truncate " + path_, errno);
  reserved_end_ = 0;
  return Status::OK();
}

std::string EncodeField(std::string_view field) {
  // Printable ASCII but '%' and '#' (a line's comment sign) as itself, bytes
  // from 0x80 up as they are (a line is read back by DecodeField, not as text).
  static constexpr PercentTable kSpoolField(0x21, 0x7e, "%#", PercentHigh::kKeep);
  return PercentEncoded(field, kSpoolField);
}

bool DecodeField(std::string_view text, std::string* out) {
  auto v = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out->push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return false;
    const int hi = v(text[i + 1]), lo = v(text[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

}  // namespace frs::ctl
