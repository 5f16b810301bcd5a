// frsctl export [FILE]: every node with its whole rule state as JSON lines
// (AdminEngine::ExportNode), then an end line with their counts
// (export_end.h), to standard output or to FILE. FILE is written under
// a temporary name and renamed when complete, so a failed export never
// leaves a truncated backup under the name asked for.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>

#include "commands.h"
#include "export_end.h"
#include "format.h"
#include "frs/whole_file.h"
#include "json_out.h"
#include "receipt_line.h"

namespace frs::ctl {
namespace {

// Writes the export to `out`, named `name` in errors (standard output, or
// FILE's temporary file).
Status WriteExport(Session& s, FILE* out, const std::string& name, uint64_t* nodes, uint64_t* nameless,
                   uint64_t* receipts, std::set<uint16_t>* unknown_ids) {
  Status failed;
  Status st = s.store->ForEach(Store::Filter{.busy_percent = kWalkBusyPercent}, [&](const NodeInfo& n) {
    if (!failed.ok()) return;
    if (n.biz == kReceiptBiz) {
      // Handoff's bookkeeping, not a count, but kept: a re-run of an
      // interrupted handoff into the imported store must find it.
      const std::string line = ReceiptLine(n);
      std::fwrite(line.data(), 1, line.size(), out);
      std::fputc('\n', out);
      ++*receipts;
      return;
    }
    Result<std::string> line = s.engine->ExportNode(n);
    if (!line.ok()) {
      failed = line.status();
      return;
    }
    if (!s.engine->ResolveBiz(std::to_string(n.biz)).ok()) {
      ++*nameless;
      unknown_ids->insert(n.biz);
    }
    std::fwrite(line->data(), 1, line->size(), out);
    std::fputc('\n', out);
    ++*nodes;
  });
  if (st.ok()) st = failed;
  if (!st.ok()) return st;
  // The counts, last: an import tells a whole export from one cut short.
  const std::string end = ExportEndLine(*nodes, *receipts);
  std::fwrite(end.data(), 1, end.size(), out);
  std::fputc('\n', out);
  if (std::fflush(out) != 0 || std::ferror(out)) return Status::FromErrno(name, errno);
  return Status::OK();
}

}  // namespace

Result<int> RunExport(Session& s, const ExportArgs& a) {
  uint64_t nodes = 0, nameless = 0, receipts = 0;
  std::set<uint16_t> unknown_ids;
  if (a.file.empty()) {
    if (Status st = WriteExport(s, stdout, "standard output", &nodes, &nameless, &receipts, &unknown_ids); !st.ok())
      return st;
  } else {
    // A directory there would be refused at the rename, in the words of a
    // temporary file the operator never named.
    if (std::error_code ec; std::filesystem::is_directory(a.file, ec))
      return Status::InvalidArgument(a.file + " is a directory: name the export file in it");
    // A backup: synced before it takes its name.
    auto written = WriteFileWhole(a.file, WholeFileOptions{.sync_file = true}, [&](const std::string& tmp) {
      // Errors name the file asked for: the temporary one beside it is
      // removed, and means nothing to the operator.
      FILE* out = std::fopen(tmp.c_str(), "wxe");
      if (out == nullptr) return Status::FromErrno(a.file, errno);
      Status st = WriteExport(s, out, a.file, &nodes, &nameless, &receipts, &unknown_ids);
      if (std::fclose(out) != 0 && st.ok()) st = Status::FromErrno(a.file, errno);
      return st;
    });
    if (!written.ok()) return written.status();
  }
  std::string ids;
  for (uint16_t id : unknown_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  if (s.json && !a.file.empty()) {
    JsonOut j;
    j.BeginObject().Key("file").String(a.file).Key("exported").Uint(nodes).Key("receipts").Uint(receipts);
    j.Key("without_biz_name").Uint(nameless);
    j.Key("unknown_biz_ids").BeginArray();
    for (uint16_t id : unknown_ids) j.Uint(id);
    j.EndArray().EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    // The data may be on standard output: the summary goes to standard error.
    std::fprintf(stderr, "exported %s node%s%s%s%s\n", Grouped(nodes).c_str(), nodes == 1 ? "" : "s",
                 receipts ? (" and " + Grouped(receipts) + " handoff receipt(s)").c_str() : "",
                 a.file.empty() ? "" : (" to " + a.file).c_str(),
                 nameless ? (" (" + Grouped(nameless) + " of them of biz ids not in map.xml: " + ids +
                             "; an import takes them with --rename-biz ID=NAME, and refuses the file without it: "
                             "to leave them out, run frsctl reset ID on this store, then export again)")
                                .c_str()
                          : "");
  }
  return kExitOk;
}

}  // namespace frs::ctl
