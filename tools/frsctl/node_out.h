// frsctl/node_out.h: one node (a NodeView) as JSON and as human phrases,
// shared by get, dump, top and explain so they all say things the same way.
//
// Thread safety: pure functions, but for the notes said once a run
// (PrintLeases, PrintReservations): one run at a time per process.
#pragma once

#include <cstdint>
#include <string>

#include "frs/admin_engine.h"
#include "json_out.h"

namespace frs::ctl {

// "fixed 60 s, max 5" / "token_bucket 1 s, max 10, burst 20" / "..., borrow 300".
std::string RuleSummary(const RuleView& r);
// "13:50:40 .. 13:51:40 UTC" style window, "" when no window is open.
std::string WindowText(const RuleView& r);
// Where the node sits: "file 0, key-node 1234, slot 3, span 2 (alternate key-node)".
std::string Position(const NodeInfo& n);

// Members of a node object (no braces): biz, biz_id, key, mode, count, rules,
// file, keynode, slot, span, alternate, expire_s, last_access_s.
void NodeMembers(const NodeView& v, JsonOut& j);
// A new run (command_line.h): the notes said once a run may be said again.
void ResetRunNotes();
// One line per lease held (get and explain): its id and expiry.
void PrintLeases(const NodeView& v, int64_t now_ms);
// One line per reservation held (get and explain).
void PrintReservations(const NodeView& v, int64_t now_ms);
// The rule object of --json output.
void RuleJson(const RuleView& r, JsonOut& j);
// Members of the raw position of a node (file, keynode, slot, span,
// alternate, biz_id, key, expire_s, last_access_s): for nodes the map no
// longer describes.
void RawNodeMembers(const NodeInfo& n, JsonOut& j);

}  // namespace frs::ctl
