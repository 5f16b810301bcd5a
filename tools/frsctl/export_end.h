// frsctl/export_end.h: the line an export ends with, so that an import can
// tell a whole export from one cut short.
//
// A backup copied or sent in part loses its end: a cut within a line is a
// line that does not parse, which import refuses, but a cut at a line's end
// left whole lines only, and import restored the first part of the store
// without a word (found from outside). export now writes, after every node
// and receipt line,
//   {"end":{"nodes":N,"receipts":M}}
// and import checks that the lines since the file's start (or since the end
// line before: two exports joined) are that many. An export of an earlier
// frsctl has none: imported as before, with a note that whether lines are
// missing cannot be told.
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/status.h"

namespace frs::ctl {

std::string ExportEndLine(uint64_t nodes, uint64_t receipts);

// True when `line` is an end line (it starts {"end":).
bool IsExportEndLine(std::string_view line);

// The counts an end line says; InvalidArgument for one not in form.
Status ParseExportEndLine(std::string_view line, uint64_t* nodes, uint64_t* receipts);

}  // namespace frs::ctl
