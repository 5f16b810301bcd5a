// os/store_dir.h: the names of a store directory's files (frs/store_dir.h),
// under the names the modules use, and the names of the files made on the
// way (temporary, damaged), which are the modules' own.
//
// Thread safety: plain functions and constants.
#pragma once

#include <string>
#include <string_view>

#include "frs/store_dir.h"

namespace frs::os::store_dir {

using namespace frs::store_dir;  // the published names, as os::store_dir::X

// The files every writer makes on the way (os/whole_file.h): PATH.tmp.<pid>.<n>,
// unique in the machine; and how one is told, so that a directory's sweep
// removes those a killed process left and nothing else.
std::string TempPath(const std::string& path);
bool IsTempName(std::string_view name);

// Where a damaged file is moved aside: PATH.damaged-<stamp> (a unix time,
// or a pid and a sequence number where several processes may move at once).
std::string DamagedPath(const std::string& path, std::string_view stamp);

// What is said of a symbolic link found where frsd writes a file of the
// directory in place (a store file, stats.frs, denials.frs, ...): one text
// for the start, frsctl and frsd -t, with what to do.
std::string LinkRefusedWords(const std::string& path);

// The first directory or file of `path` below `dir` that is a symbolic link
// ("" when none is, or `path` is not below `dir`): frsd makes, writes and
// deletes day files only where no link leads below its store directory
// (a link at stats/, or at a biz's folder, had them made and old ones
// deleted wherever it pointed). `dir` itself may be a link.
std::string LinkBelow(const std::string& dir, const std::string& path);

}  // namespace frs::os::store_dir
