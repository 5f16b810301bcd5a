// os/only_zeros.h: whether a file holds no byte but zeros.
//
// What a file's making leaves when it is cut short between its creation and
// its header (a kill, SIGXFSZ at its ftruncate under `ulimit -f`, a power
// loss before the header reached the disk): 0 bytes, or its size in zeros.
// Such a file holds nothing to keep; the modules that make files decide
// what to do with one (store/store_check.h, limit/side_files.cc).
//
// Thread safety: a plain function over an fd; safe anywhere.
#pragma once

#include "frs/status.h"

namespace frs::os {

// True when every byte of the regular file open at `fd` reads as zero
// (none, too). Holes are skipped without reading (SEEK_DATA), so a sparse
// file of any size answers at once; written blocks are read in 64 KiB
// steps until the first byte that is not zero. An error value when a read
// fails, or `fd` is not a regular file.
Result<bool> HoldsOnlyZeros(int fd);

}  // namespace frs::os
