#include "os/whole_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "os/store_dir.h"
#include "os/unique_fd.h"

namespace frs {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status SyncPath(const std::string& path, int flags) {
  os::UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return Status::FromErrno("cannot sync " + path, errno);
  return Status::OK();
}

}  // namespace

Result<Placed> WriteFileWhole(const std::string& path, const WholeFileOptions& o,
                              const std::function<Status(const std::string& tmp)>& make) {
  const std::string tmp = os::store_dir::TempPath(path);
  auto fail = [&](Status s) -> Result<Placed> {
    ::unlink(tmp.c_str());
    return s;
  };
  if (Status s = make(tmp); !s.ok()) return fail(std::move(s));
  if (o.sync_file)
    if (Status s = SyncPath(tmp, O_RDONLY); !s.ok()) return fail(std::move(s));
  Placed placed = Placed::kOurs;
  if (o.exclusive) {
    const int linked = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (linked != 0 && err != EEXIST) return Status::FromErrno("cannot link " + tmp + " to " + path, err);
    if (linked != 0) placed = Placed::kExisting;
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(Status::FromErrno("cannot rename " + tmp + " to " + path, errno));
  }
  if (o.sync_dir && placed == Placed::kOurs)
    if (Status s = SyncPath(DirOf(path), O_RDONLY | O_DIRECTORY); !s.ok()) return s;
  return placed;
}

Result<Placed> WriteFileWhole(const std::string& path, std::string_view bytes, const WholeFileOptions& o) {
  return WriteFileWhole(path, o, [&](const std::string& tmp) -> Status {
    os::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, o.mode));
    if (!fd.valid()) return Status::FromErrno("cannot write " + tmp, errno);
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Status::FromErrno("cannot write " + tmp, errno);
      if (w == 0) return Status::IOError("cannot write " + tmp + ": no progress");
      done += static_cast<size_t>(w);
    }
    if (::close(fd.release()) != 0) return Status::FromErrno("cannot write " + tmp, errno);
    return Status::OK();
  });
}

namespace os {

Status RemoveFileSynced(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("cannot remove " + path, errno);
  return SyncPath(DirOf(path), O_RDONLY | O_DIRECTORY);
}

}  // namespace os
}  // namespace frs
