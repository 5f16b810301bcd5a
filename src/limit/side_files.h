// limit/side_files.h: the files the engine keeps in a store directory beside
// the store's own (frs.N.store, which the store checks): stats.frs (daily
// counters per biz), denials.frs (recent denials), rules.history (what each
// named rule was) and the day files of statistics by key field
// (stats/<biz id>/<table>/<YYYY-MM-DD>.frs, and the .from-<receipt>.frs files
// a handoff brought). frsd.lock, frsd.listen, frsd.grpc.listen and frsd.log
// are the server's, made anew at each start. envoy.ids (the biz ids of
// Envoy's descriptors, server/envoy_map.h) is the server's too, and read at
// start by a parser that skips a damaged line: it is not checked here.
//
// Each file is checked by the function its reader uses (a mapped table's
// header by os/mapped_table.h's one check, which names each fault in the same
// words everywhere), so that frsctl verify and frsd's start agree on every
// file: CheckSideFiles reports, and PrepareSideFiles is frsd's start acting on
// the same reports. The table below is the one policy on a damaged file: the
// openers only say what is wrong (a day file's writer carries out its row).
// The names are os/store_dir.h's.
//
// What frsd does with a damaged file:
//   stats.frs      refuses to start, naming the file and the fix: it holds
//                  today's counters, which an operator may want to restore
//                  (a damaged header, or a body no run writes however it
//                  stopped: DailyStats's open checks both); but one whose
//                  every byte is zero (a creation cut short) holds none,
//                  and is moved aside as denials.frs is;
//   denials.frs    moves it aside (PATH.damaged-<unix time>) and starts a
//                  new one, with a log line: it holds only the last minutes;
//   rules.history  the same: without it a reload that changes an interval
//                  starts that rule's counts fresh, as before the file;
//   day files      not read at start: the first count of the day moves a
//                  damaged one aside (PATH.damaged-<pid>-<n>) and starts the day
//                  anew.
//
// Thread safety: plain functions over files; no state.
#pragma once

#include <string>
#include <vector>

#include "frs/status.h"
#include "frs/store_admin.h"

namespace frs::limit {

// The report and its verdicts are the public ones (frs/store_admin.h), under
// the names the engine's and the server's code use.
using AtStart = SideFileAtStart;
using frs::SideFileReport;

// The files frsd's start reads (stats.frs, denials.frs, rules.history),
// present or not, each with its check's verdict. Changes nothing.
std::vector<SideFileReport> CheckStartFiles(const std::string& dir);

// Every side file of `dir` in a fixed order (the three named files, present
// or not, then each day file found under stats/), each with its check's
// verdict. Changes nothing.
std::vector<SideFileReport> CheckSideFiles(const std::string& dir);

// A sentence when the store's lease.key may be read by its group or others
// (whoever reads it can forge every lease and reservation id: frsd makes it
// 0600, a restore may not keep that), else "". frsd -t and the start's log
// say it; <cluster lease_key> at such a mode is refused instead.
std::string LeaseKeyModeWarning(const std::string& dir);
// A sentence when `dir` has no lease.key but served (StoreNeverServed is
// false; one that never did has given out no id), else "": said by frsd -t
// and frsd's start before its engine opens.
std::string LeaseKeyMissingWarning(const std::string& dir);
// frs/store_admin.h's: no stats.frs and no store file that holds, or may
// hold, a node (store::StoreMayHoldNodes).
bool StoreNeverServed(const std::string& dir);

// frsd's start, before the engine opens: a damaged stats.frs is an error
// naming it and the fix; a damaged denials.frs or rules.history is moved
// aside, and a sentence for the log is returned for each. Day files are left
// to their first write (see above).
Result<std::vector<std::string>> PrepareSideFiles(const std::string& dir);

}  // namespace frs::limit
