#include "os/store_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace frs::store_dir {
namespace {

constexpr std::string_view kStorePrefix = "frs.";
constexpr std::string_view kStoreSuffix = ".store";
constexpr std::string_view kDaySuffix = ".frs";
constexpr std::string_view kReceivedInfix = ".from-";

// YYYY-MM-DD: the shape only.
bool LooksLikeDay(std::string_view s) { return s.size() == 10 && s[4] == '-' && s[7] == '-'; }

}  // namespace

std::string In(const std::string& dir, std::string_view name) {
  std::string p = dir;
  p += '/';
  p += name;
  return p;
}

std::string StoreFileName(uint32_t index) {
  return std::string(kStorePrefix) + std::to_string(index) + std::string(kStoreSuffix);
}

bool ParseStoreFileName(std::string_view name, uint32_t* index) {
  if (!name.starts_with(kStorePrefix) || !name.ends_with(kStoreSuffix)) return false;
  const std::string_view digits =
      name.substr(kStorePrefix.size(), name.size() - kStorePrefix.size() - kStoreSuffix.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  uint32_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint32_t>(c - '0');
  *index = v;
  return true;
}

std::string FieldStatsDir(const std::string& dir, uint16_t biz, std::string_view table) {
  return In(dir, kFieldStats) + "/" + std::to_string(biz) + "/" + std::string(table);
}

std::string DayFileName(std::string_view day) { return std::string(day) + std::string(kDaySuffix); }

std::string ReceivedDayFileName(std::string_view day, std::string_view id) {
  return std::string(day) + std::string(kReceivedInfix) + std::string(id) + std::string(kDaySuffix);
}

DayFile KindOfDayFile(std::string_view name) {
  if (name.size() < 14 || !LooksLikeDay(name.substr(0, 10)) || !name.ends_with(kDaySuffix)) return DayFile::kNone;
  if (name.size() == 14) return DayFile::kOwn;
  if (name.substr(10).starts_with(kReceivedInfix) && name.size() > 10 + kReceivedInfix.size() + kDaySuffix.size())
    return DayFile::kReceived;
  return DayFile::kNone;
}

}  // namespace frs::store_dir

namespace frs::os::store_dir {
namespace {

constexpr std::string_view kTempInfix = ".tmp.";
std::atomic<uint64_t> g_temp_seq{0};

}  // namespace

std::string TempPath(const std::string& path) {
  return path + std::string(kTempInfix) + std::to_string(::getpid()) + "." +
         std::to_string(g_temp_seq.fetch_add(1, std::memory_order_relaxed));
}

bool IsTempName(std::string_view name) {
  // ".tmp" alone: the names of builds before TempPath.
  return name.find(kTempInfix) != std::string_view::npos || name.ends_with(".tmp");
}

std::string DamagedPath(const std::string& path, std::string_view stamp) {
  return path + ".damaged-" + std::string(stamp);
}

std::string LinkRefusedWords(const std::string& path) {
  return path +
         " is a symbolic link: frsd writes only files of its own in its store directory and refuses it (the "
         "directory may be a link; the files and folders in it may not): move what it names into its place, or remove "
         "it";
}

std::string LinkBelow(const std::string& dir, const std::string& path) {
  if (dir.empty() || path.size() <= dir.size() || path.compare(0, dir.size(), dir) != 0 || path[dir.size()] != '/')
    return "";
  for (size_t at = dir.size() + 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string upto = path.substr(0, at);
    struct stat st {};
    if (::lstat(upto.c_str(), &st) != 0) return "";  // not made yet: nothing below it is either
    if (S_ISLNK(st.st_mode)) return upto;
  }
  return "";
}

}  // namespace frs::os::store_dir
