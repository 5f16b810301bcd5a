#include "store/store_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "frs/store_dir.h"
#include "os/output_file.h"
#include "os/path_access.h"
#include "os/unique_fd.h"
#include "store/store_file.h"

namespace frs::store {

Status GoneStoreProblem(const std::string& dir, uint32_t files) {
  const std::string stats = store_dir::In(dir, store_dir::kDailyStats);
  Result<bool> served = os::PathExists(stats);
  if (!served.ok()) return served.status();
  if (!served.value()) return Status::OK();
  return Status::NotFound(
      "the store in " + dir + " is gone: none of its files (" + StoreFile::PathFor(dir, 0) +
      (files > 1 ? ", ..." : "") + ") is there, but " + stats +
      " shows a store that served here (its counts are lost unless you restore the files from a "
      "backup); restore them, or start it empty with `frsctl init --recreate-missing` (then `frsctl "
      "import` puts an export back into it)");
}

bool StoreMayHoldNodes(const std::string& dir) {
  // Every store file the directory holds, not frs.0.store on until the
  // first one missing or damaged: a store that lost frs.0.store (or whose
  // header is damaged) keeps its nodes in the others. What cannot be read
  // may hold nodes: the answer "none" makes a new secret beside them.
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return ec != std::errc::no_such_file_or_directory;
  for (const std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return true;
    uint32_t index = 0;
    if (!store_dir::ParseStoreFileName(it->path().filename().string(), &index)) continue;
    os::UniqueFd fd(::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // gone since the listing
      return true;
    }
    FileHeader h{};
    if (::pread(fd.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || h.magic != kMagic || h.nodes_used != 0)
      return true;
  }
  return ec.value() != 0;
}

Result<StoreCheck> CheckStoreFiles(const std::string& dir, const StoreGeometry& g) {
  StoreCheck out;
  std::string missing;
  uint64_t id = 0;
  std::string first;  // the file `id` was read from
  for (uint32_t i = 0; i < g.files; ++i) {
    const std::string path = StoreFile::PathFor(dir, i);
    // O_NONBLOCK: a FIFO in a store file's place opens at once, and is
    // refused below, where a plain open waited for a writer for good.
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
      if (errno == EACCES || errno == EPERM) return Status::IOError(os::PermissionWords(path));
      if (errno != ENOENT) return Status::FromErrno(path, errno);
      missing += (missing.empty() ? "" : ", ") + path;
      continue;
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path, errno);
    if (!S_ISREG(st.st_mode)) return Status::IOError(os::NotRegularWords(path, st.st_mode));
    FileHeader h{};
    ssize_t n = ::pread(fd.get(), &h, sizeof h, 0);
    if (n < 0) return Status::FromErrno(path, errno);
    if (static_cast<size_t>(n) < sizeof h)
      return Status::Corruption(path + ": shorter than a store file header (" + std::to_string(n) + " bytes)");
    if (Status s = StoreFile::CheckHeader(path, h, g, i, static_cast<uint64_t>(st.st_size)); !s.ok()) return s;
    if (id == 0) {
      id = h.store_id;
      first = path;
    } else if (h.store_id != id) {
      return Status::Mismatch(StoreFile::ForeignFileWords(first, id, path, h.store_id));
    }
    ++out.files_found;
  }
  if (out.files_found > 0 && !missing.empty())
    return Status::NotFound("the store in " + dir + " is incomplete: missing " + missing +
                            " (the counts it held are lost unless you restore it from a backup); restore it, or start "
                            "it empty with `frsctl init --recreate-missing` (then `frsctl import` puts an export back "
                            "into it)");
  if (out.files_found == 0)
    if (Status gone = GoneStoreProblem(dir, g.files); !gone.ok()) return gone;
  out.exists = out.files_found > 0;
  return out;
}

}  // namespace frs::store
