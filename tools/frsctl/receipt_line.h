// frsctl/receipt_line.h: handoff receipts in export files.
//
// A shard keeps one receipt node per handoff batch it merged (biz id 0,
// Engine::MergeNodes), for kReceiptSeconds: a re-run of an interrupted
// handoff finds it and merges the batch no second time. export used to
// leave receipts out, so a destination moved by export/import between an
// interrupted handoff and its re-run merged the batch again (300 units
// became 396). export now writes each live receipt as one line of its own,
//   {"receipt":{"fp_lo":"HEX16","fp_hi":"HEX16","key_len":N,"key":"HEX"},"at":UNIX,"expire":UNIX}
// and import puts it back as it was, so the re-run finds it.
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/status.h"
#include "frs/store.h"

namespace frs::ctl {

// The export line of receipt node `n` (biz kReceiptBiz).
std::string ReceiptLine(const NodeInfo& n);

// True when `line` is a receipt line (it starts {"receipt":).
bool IsReceiptLine(std::string_view line);

// Checks a receipt line; with `store`, writes the receipt into it (an
// expired one is skipped: it would protect nothing). `now_s`: unix seconds.
Status ImportReceipt(std::string_view line, Store* store, uint32_t now_s);

}  // namespace frs::ctl
