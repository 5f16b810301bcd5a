#include "os/path_access.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace frs::os {

std::string UserName(uid_t uid) {
  const passwd* p = ::getpwuid(uid);
  return p ? p->pw_name : std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  const group* g = ::getgrgid(gid);
  return g ? g->gr_name : std::to_string(gid);
}

namespace {

std::string Describe(const std::string& path, const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return path + " is owned by " + UserName(st.st_uid) + ":" + GroupName(st.st_gid) + " mode " + mode;
}

}  // namespace

std::string PermissionWords(const std::string& path) {
  // The first ancestor this process cannot search, else the path itself.
  std::string refusing;
  struct stat st {};
  bool found = false;
  std::filesystem::path p(path);
  std::filesystem::path acc = p.root_path();
  for (const auto& part : p.relative_path().parent_path()) {
    acc /= part;
    if (::access(acc.c_str(), X_OK) != 0 && ::stat(acc.c_str(), &st) == 0) {
      refusing = Describe(acc.string(), st);
      found = true;
      break;
    }
  }
  if (!found && ::stat(path.c_str(), &st) == 0) {
    refusing = Describe(path, st);
    found = true;
  }
  std::string words = path + ": permission denied";
  if (!refusing.empty()) words += ": " + refusing;
  words += ", and this process runs as " + UserName(::geteuid()) + ":" + GroupName(::getegid());
  // Its owner already: the mode is what refuses (running as the owner
  // would change nothing).
  if (found && st.st_uid == ::geteuid())
    return words + (S_ISDIR(st.st_mode) ? " (its owner: give it u+rwx)" : " (its owner: give it u+rw)");
  return words + " (run it as that owner, or change its owner or mode)";
}

Result<bool> PathExists(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  if (errno == EACCES || errno == EPERM) return Status::IOError(PermissionWords(path));
  return Status::FromErrno(path, errno);
}

Status RootOnAnotherUsersStore(const std::string& dir) {
  struct stat st {};
  if (dir.empty() || ::geteuid() != 0 || ::stat(dir.c_str(), &st) != 0 || st.st_uid == 0) return Status::OK();
  const std::string user = UserName(st.st_uid);
  return Status::IOError("this process runs as root, and the store directory " + dir + " is " + user +
                         "'s: the files it would make there (store files, statistics days, stats.frs, denials.frs, "
                         "rules.history) would be root's, which frsd, run as " +
                         user + ", could not open; run this program as " + user +
                         " (runuser -u USER -- PROGRAM), or switch to that user before opening the store");
}

}  // namespace frs::os
