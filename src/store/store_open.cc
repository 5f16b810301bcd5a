// Store::Open: checks the geometry, opens or creates every file, and makes
// sure they all belong to one store.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>

#include "store/store_impl.h"

namespace frs {

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& opts) {
  const StoreGeometry& g = opts.geometry;
  if (g.files < 1 || g.files > 256) return Status::InvalidArgument("store files must be 1..256");
  if (g.keynodes < 1 || g.keynodes > (1u << 26)) return Status::InvalidArgument("store keynodes must be 1..67108864");
  if (g.chain < 1 || g.chain > 64) return Status::InvalidArgument("store chain must be 1..64");
  if (opts.dir.empty()) return Status::InvalidArgument("store dir is empty");

  std::error_code ec;
  if (!std::filesystem::exists(opts.dir, ec)) {
    if (!opts.create_if_missing) return Status::NotFound(opts.dir + ": no store here (directory missing)");
    if (::mkdir(opts.dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(opts.dir, errno);
  }
  if (!opts.create_if_missing) {
    // Refuse a half store up front rather than creating its missing files.
    for (uint32_t i = 0; i < g.files; ++i) {
      std::string p = store::StoreFile::PathFor(opts.dir, i);
      if (!std::filesystem::exists(p, ec)) return Status::NotFound(p + ": no such store file");
    }
  }
  // A new store gets a random id; files of one store must agree on it.
  std::random_device rd;
  uint64_t new_id = (uint64_t{rd()} << 32) ^ rd();
  std::vector<std::unique_ptr<store::StoreFile>> files;
  uint64_t id = 0;
  for (uint32_t i = 0; i < g.files; ++i) {
    auto f = store::StoreFile::Open(opts.dir, i, g, opts.create_if_missing, id ? id : new_id);
    if (!f.ok()) return f.status();
    if (i == 0) {
      id = f.value()->store_id();
    } else if (f.value()->store_id() != id) {
      return Status::Mismatch(f.value()->path() + ": belongs to another store than " +
                              store::StoreFile::PathFor(opts.dir, 0) + " (store ids differ)");
    }
    files.push_back(std::move(f.value()));
  }
  return std::unique_ptr<Store>(std::make_unique<store::StoreImpl>(opts, std::move(files)));
}

}  // namespace frs
