// os/mapped_table.h: a mapped table in a store directory (stats.frs,
// denials.frs, the statistics day files): its header, checked one way, and
// the one opener of the fixed-size ones.
//
// Each such table starts with magic[8], a format version (uint32), the
// header's size (uint32), the table's geometry, and a checksum over all of
// these (uint64, stored right after them). CheckTableHeader is the only check
// of that header: the engine's openers, frsctl verify and frsd's start all
// call it, so each names the same fault in the same words, and what verify
// reports is exactly what the start refuses or moves aside
// (limit/side_files.h holds what frsd does with each file).
//
// The faults, in the order they are checked (the first found is the one
// named), as "PATH: FAULT":
//   shorter than its header             Corruption
//   bad magic                           Corruption (not such a table, or
//                                       the other byte order)
//   format version V, this build reads W   Mismatch
//   header checksum                     Corruption
//   table layout differs from this build's   Mismatch (a geometry this
//                                       build does not make)
//   truncated (N bytes of M)            Corruption
//   extended (N bytes of M): ...        Corruption (with the truncate -s
//                                       that gives the file its size back)
//
// Thread safety: plain functions; a MappedTable's bytes are shared memory and
// need the caller's own synchronization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "frs/status.h"
#include "os/mapped_file.h"
#include "os/zero_pages.h"

namespace frs::os {

// The header checksum a table's format uses: stats.frs (format 2) was made
// with FNV-1a before the others existed; each is part of its file's format.
enum class HeaderSum { kFnv1a, kXxh3 };

struct TableFormat {
  std::string_view magic;  // 8 bytes
  uint32_t version = 0;
  uint32_t header_bytes = 0;
  uint32_t checksum_at = 0;  // the checksum covers [0, checksum_at) and is stored there
  HeaderSum sum = HeaderSum::kXxh3;
};

// The checksum of header `h` as `f` computes it.
uint64_t HeaderChecksum(const void* h, const TableFormat& f);

// Writes magic, version and header_bytes at the start of `h` and the
// checksum at f.checksum_at; the caller has written the geometry.
void SealHeader(void* h, const TableFormat& f);

// Checks header `have` of the file at `path`, `file_size` bytes long. `want`:
// this build's header for the table (made by SealHeader), whose bytes from
// header_bytes (offset 12) up to the checksum must be `have`'s; nullptr for a
// table whose geometry its header chooses (then its owner checks it).
// `table_bytes`: the size the file must have, exactly (0: any).
Status CheckTableHeader(const std::string& path, const void* have, uint64_t file_size, const TableFormat& f,
                        const void* want, uint64_t table_bytes);

// The same, read from `fd` (pread and fstat): for a table not mapped yet.
Status CheckTableHeaderOf(int fd, const std::string& path, const TableFormat& f, const void* want,
                          uint64_t table_bytes);

// A fixed-size table mapped shared (stats.frs, denials.frs), or kept in
// memory: `base` is its first byte either way.
struct MappedTable {
  std::unique_ptr<MappedFile> file;  // null: in memory
  ZeroPages memory;                  // the in-memory table's bytes
  uint8_t* base = nullptr;
};

// Opens the table at `path`, `table_bytes` long, whose header this build
// makes as `want` (f.header_bytes, sealed). Missing: created (its blocks
// allocated, so that a full disk is an error here and not a SIGBUS later in
// a worker), with `want` as its header and zeros after. Present: checked by
// CheckTableHeader, and a file made sparse (an older build, a sparse copy)
// backed now. `read_only`: mapped read-only, never written, and a missing
// file is kept in memory (nothing is created); `path` "": in memory. A
// read-only open checks exactly what a writing one checks.
Result<MappedTable> OpenMappedTable(const std::string& path, const TableFormat& f, const void* want,
                                    uint64_t table_bytes, bool read_only);

}  // namespace frs::os
