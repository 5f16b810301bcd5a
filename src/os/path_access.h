// os/path_access.h: whether a path exists, telling "not there" from "not
// yours to see".
//
// std::filesystem::exists() is false both for a missing file and for one in
// a directory this user may not search, so a store that frsctl could not
// open for want of permission was reported as "no such store file, run
// frsctl init". PathExists says which it is, and a refusal names the path,
// the directory or file that refuses, its owner, group and mode, and who
// asked.
//
// Thread safety: plain functions.
#pragma once

#include <sys/types.h>

#include <string>

#include "frs/status.h"

namespace frs::os {

// True or false when the path is, or is not, there; an error (kIOError,
// with the words above) when this process may not look.
Result<bool> PathExists(const std::string& path);

// "PATH: permission denied: DIR is owned by USER:GROUP mode 0750, and this
// process runs as USER:GROUP (...)", for a path the system refused (EACCES
// or EPERM): names the nearest directory this process may not search, else
// the file itself.
std::string PermissionWords(const std::string& path);

// The name of a user or group, else its number.
std::string UserName(uid_t uid);
std::string GroupName(gid_t gid);

// A process run as root on a store directory another user owns (frsd's
// service user) would make the files it makes there (store files,
// statistics days, side tables) root's, which frsd, run as that user, could
// not open: an error naming that user and how to run as it; OK for a
// process not root, a directory of root's, or one not there.
Status RootOnAnotherUsersStore(const std::string& dir);

}  // namespace frs::os
