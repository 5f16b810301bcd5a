// os/output_file.h: opening a file an operator names (a log, the decision
// log, a configuration file) without ever waiting on it.
//
// Why: open(2) of a FIFO for writing waits until a reader comes (a log
// shipper that is down never comes), and one for reading waits for a
// writer; a directory, a socket or a block device is no log either. So every
// path an operator names is opened O_NONBLOCK (a FIFO without a reader then
// fails at once with ENXIO instead of waiting), checked with fstat(2), and
// refused with its name and what it is unless it is a regular file (or, for
// output, a character device: /dev/null, /dev/full and a terminal open and
// take writes without a reader). O_NONBLOCK is then cleared: it means
// nothing to a regular file, and a character device is written as usual.
//
// What O_NONBLOCK cannot help: open(2) on a hung NFS mount waits in the
// kernel whatever the flags. That is why the decision log opens its file on
// its writer thread, never on a request thread (server/decision_log.h).
//
// Thread safety: plain functions.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::os {

// "a FIFO", "a directory", "a socket", "a block device", "a character
// device", "a symbolic link", "a regular file".
const char* FileKindName(mode_t mode);

// OK when OpenForAppend would open `path`: a file it takes that we may
// write, or none yet in a directory we may write (opening creates it); else
// InvalidArgument "the WHAT PATH is a FIFO, not a regular file", or "cannot
// open the WHAT PATH: reason" as the open would say. Looks only (stat(2),
// access(2)): creates nothing, for `frsd -t`.
Status CheckOutputPath(const std::string& path, std::string_view what);

// open(2) O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC, mode 0640, of a regular file
// or a character device; anything else is refused with its name and kind.
// Errors: "cannot open the WHAT PATH: reason" or "the WHAT PATH is a FIFO,
// not a regular file".
Result<UniqueFd> OpenForAppend(const std::string& path, std::string_view what);

// The words for a path that is not a regular file: "PATH is a FIFO, not a
// regular file".
std::string NotRegularWords(const std::string& path, mode_t mode);

}  // namespace frs::os
