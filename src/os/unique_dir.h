// os/unique_dir.h: an owned directory stream (opendir(3)), closed on every
// path out of the walk that opened it, as UniqueFd closes a descriptor: an
// early return added to a walk must not leak the stream's descriptor.
//
// Thread safety: a value used by one thread at a time.
#pragma once

#include <dirent.h>

#include <memory>

namespace frs::os {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using UniqueDir = std::unique_ptr<DIR, DirCloser>;

// The stream of `path`, or null with errno set (opendir's).
inline UniqueDir OpenDir(const char* path) { return UniqueDir(::opendir(path)); }

}  // namespace frs::os
