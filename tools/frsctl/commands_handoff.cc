// frsctl handoff: moves every node that another shard of <cluster> now owns
// to that shard, merged with what it counted meanwhile (AdminEngine::MergeNodes).
//
// Exactly once, whatever dies when: each node goes through a spool file in
// the store directory (handoff.spool), one line per step:
//   N ID RECEIPT DEST BIZ FP_LO FP_HI KEY_LEN STATE_HEX JSON   to send (written first)
//   E ID   erased here (the node is only in the spool now)
//   V ID   not erased: the node changed after it was spooled (it stays
//          here and a later run sends it again, as a new entry)
//   A ID   the owner acknowledged it (merged, or found its receipt)
//   D ID PRIMARY RECEIPT DEST   the node of entry PRIMARY goes to DEST too
//          (a node two new holders lack): sent once PRIMARY is erased
//   C ID RECEIPT DEST ...   as N, a copy: sent, never erased here (this
//          shard stays a holder), and sent with replace="1": it takes the
//          place of DEST's node, so a copy made again by a later run (or
//          after the same change made again) leaves that node right
// Which nodes go where, and which shard of a node's two holders sends it, is
// handoff_plan.h's.
// The entries of one batch (one destination) share a RECEIPT; the receiver
// writes their merges and one receipt node in one transaction and ignores a
// receipt it already has, so re-sending a batch whose acknowledgement was
// lost counts it once (and a shard keeps one receipt per batch, not per
// node). A batch is always re-sent with exactly the entries it was first
// sent with: those of its receipt that were erased. A run first finishes what
// the spool says an earlier, interrupted run left: an entry not yet erased is
// erased now if the node is unchanged (else voided); an erased one is
// (re)sent. Lines are write(2)s to the page cache: like the store itself,
// they survive the death of any process. Each line is a record checked
// whole (handoff_spool.h): a line a full disk or a kill cut short is cut
// away before the next run appends anything, and room for a batch's marks
// is set aside before its nodes are erased. A batch a shard refuses, or a
// shard that cannot be reached, stops neither the other batches nor the
// other shards; the run then exits non-zero and a re-run sends what is left.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <pugixml.hpp>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "commands.h"
#include "frs/http_client.h"
#include "frs/percent_encode.h"
#include "frs/ring.h"
#include "frs/stop_request.h"
#include "frs/store_dir.h"
#include "frs/whole_file.h"
#include "handoff_plan.h"
#include "handoff_spool.h"
#include "handoff_stats.h"
#include "hex.h"
#include "json_in.h"
#include "json_out.h"

namespace frs::ctl {
namespace {

// The crash tests (tests/cluster) stop a handoff at one step as kill -9 would:
// FRS_TEST_HANDOFF_CRASH=spooled (entries written, nothing erased), erased
// (erased here, nothing sent) or sent (the owner merged, no acknowledgement
// recorded).
void CrashPoint(const char* step) {
  const char* at = std::getenv("FRS_TEST_HANDOFF_CRASH");
  if (at && std::strcmp(at, step) == 0) _exit(137);
}

struct Entry {
  char kind = 'N';      // N, D or C (the file comment)
  std::string primary;  // D: the entry whose node this is
  std::string id, receipt, dest, json;
  uint16_t biz = 0;
  Fingerprint fp;
  uint8_t key_len = 0;
  std::string key;  // the key bytes the node keeps (whole: the node is found by its key, else by fp)
  std::string state;
  bool erased = false, voided = false, acked = false;
};

struct DestCount {
  uint64_t sent = 0, merged = 0, duplicates = 0, would_move = 0;
};

// The records of a spool, as entries with their marks. A checksummed N
// record that does not parse is damage (refused); an older frsctl's line
// without a checksum that does not parse, its JSON included, was cut by a
// kill or a full disk before its nodes were erased, and is passed over.
Status ParseRecords(const std::vector<SpoolRecord>& records, std::vector<Entry>* out) {
  std::map<std::string, size_t> index;
  for (size_t n = 0; n < records.size(); ++n) {
    const std::string& line = records[n].payload;
    if (line.size() < 3) continue;
    std::istringstream ls(line);
    std::string kind, id;
    ls >> kind >> id;
    if (kind == "D") {
      std::string primary, receipt, dest;
      ls >> primary >> receipt >> dest;
      auto p = index.find(primary);
      Entry e;
      if (p == index.end() || !DecodeField(receipt, &e.receipt) || !DecodeField(dest, &e.dest)) {
        if (records[n].checked)
          return Status::Corruption("handoff.spool record " + std::to_string(n + 1) + " (node " + id +
                                    ") names no node it can send: nothing was changed");
        continue;
      }
      const Entry& first = (*out)[p->second];
      e.kind = 'D';
      e.primary = primary;
      e.id = id;
      e.json = first.json;
      e.biz = first.biz;
      e.fp = first.fp;
      e.key_len = first.key_len;
      e.key = first.key;
      e.state = first.state;
      index[id] = out->size();
      out->push_back(std::move(e));
      continue;
    }
    if (kind == "N" || kind == "C") {
      Entry e;
      e.kind = kind[0];
      e.erased = e.kind == 'C';  // a copy is sendable as it is
      e.id = id;
      std::string receipt, dest, fp_lo, fp_hi, key_hex, state_hex;
      unsigned biz = 0, key_len = 0;
      ls >> receipt >> dest >> biz >> fp_lo >> fp_hi >> key_len >> key_hex >> state_hex;
      std::getline(ls, e.json);
      if (!e.json.empty() && e.json[0] == ' ') e.json.erase(0, 1);
      e.biz = static_cast<uint16_t>(biz);
      e.key_len = static_cast<uint8_t>(key_len);
      e.fp.lo = std::strtoull(fp_lo.c_str(), nullptr, 16);
      e.fp.hi = std::strtoull(fp_hi.c_str(), nullptr, 16);
      const bool whole = DecodeField(receipt, &e.receipt) && DecodeField(dest, &e.dest) &&
                         (key_hex == "-" || Unhex(key_hex, &e.key)) && Unhex(state_hex, &e.state) && !e.json.empty() &&
                         ParseJson(e.json).ok();
      if (!whole) {
        if (records[n].checked)
          return Status::Corruption("handoff.spool record " + std::to_string(n + 1) + " (node " + id +
                                    ") is whole but does not parse: nothing was changed");
        continue;
      }
      index[id] = out->size();
      out->push_back(std::move(e));
      continue;
    }
    auto it = index.find(id);
    if (it == index.end()) continue;
    Entry& e = (*out)[it->second];
    if (kind == "E") e.erased = true;
    else if (kind == "V") e.voided = true;
    else if (kind == "A") e.acked = true;
  }
  return Status::OK();
}

std::string EntryLine(const Entry& e) {
  if (e.kind == 'D') return "D " + e.id + " " + e.primary + " " + EncodeField(e.receipt) + " " + EncodeField(e.dest);
  char fp[40];
  std::snprintf(fp, sizeof fp, "%016" PRIx64 " %016" PRIx64, e.fp.lo, e.fp.hi);
  return std::string(1, e.kind) + " " + e.id + " " + EncodeField(e.receipt) + " " + EncodeField(e.dest) + " " +
         std::to_string(e.biz) + " " + fp + " " + std::to_string(e.key_len) + " " +
         (e.key.empty() ? std::string("-") : Hex(e.key)) + " " + Hex(e.state) + " " + e.json;
}

// The room the marks of `e` may still need: its E or V (an N entry's), and its A.
uint64_t MarkBytes(const Entry& e, bool erase_mark) {
  return (erase_mark && e.kind == 'N' ? HandoffSpool::RecordBytes("E " + e.id) : 0) +
         HandoffSpool::RecordBytes("A " + e.id);
}

// A D entry is sendable once its node's N entry was erased, and void with it.
void FollowPrimaries(std::vector<Entry>& entries) {
  std::map<std::string, const Entry*> by_id;
  for (const Entry& e : entries) by_id[e.id] = &e;
  for (Entry& e : entries) {
    if (e.kind != 'D') continue;
    auto p = by_id.find(e.primary);
    e.erased = p != by_id.end() && p->second->erased;
    e.voided = p == by_id.end() || p->second->voided;
  }
}

// The receipt of one node for one ring change (the digests before and
// after): a node both old holders send (`prefix` "moved") is merged once
// whichever sends first. (A copy, replicas switched on, goes under its run's
// receipts: it replaces the node there, so a copy sent again, by a later
// run or after the same switch made again, leaves it right.)
std::string NodeReceipt(const std::string& prefix, const Ring& before, const Ring& after, const NodeInfo& n) {
  char tail[96];
  std::snprintf(tail, sizeof tail, "/%08x.%08x/%u.%016" PRIx64 "%016" PRIx64, before.Digest(), after.Digest(),
                static_cast<unsigned>(n.biz), n.fp.lo, n.fp.hi);
  return prefix + tail;
}

// Errors of a run that went on after them: the first is said whole, the
// rest counted.
struct Failures {
  Status first;
  size_t more = 0;
  void Add(Status s) {
    if (first.ok()) first = std::move(s);
    else ++more;
  }
  // A dry run sends nothing and spools nothing: its failures say where the
  // real run would fail, and what to fix before it.
  Status Combined(bool dry_run) const {
    if (first.ok() || more == 0) return first;
    return Status::Unavailable(first.message() + " (and " + std::to_string(more) + " more failure(s); " +
                               (dry_run ? "the real run would fail there too: fix them before it"
                                        : "run frsctl handoff again once they are fixed: what was not sent stays in "
                                          "the spool") +
                               ")");
  }
};

// The node's address in the store: its key when the node holds it whole
// (a short key is the node's identity, store/identity.h), else its fingerprint.
KeyRef RefOf(const Entry& e) {
  KeyRef k{e.biz, e.fp, {}, e.key_len};
  if (e.key_len > 0 && e.key.size() == e.key_len) k.bytes = e.key;
  return k;
}

// Erases the node only if it still holds exactly the spooled state.
Result<bool> EraseIfUnchanged(Store& store, const Entry& e, uint32_t now_s) {
  bool erased = false;
  const KeyRef key = RefOf(e);
  const uint32_t bytes = static_cast<uint32_t>(e.state.size());
  Status s = store.Update(key, bytes, now_s, [&](NodeRef& ref) {
    if (!ref.exists || ref.stored_state_bytes != bytes || std::memcmp(ref.state, e.state.data(), bytes) != 0)
      return Commit::kNone;
    erased = true;
    return Commit::kErase;
  });
  if (!s.ok()) return s;
  return erased;
}

// Sends entries (all for `dest`, grouped by receipt: each group is one
// merge batch) and records what was acknowledged. A batch the shard refuses
// is counted in `failed` and the next one is sent; a shard that cannot be
// reached ends the sending to it (the others are still sent to).
// A copy's node as it is now, read again right before it is sent: the
// copy replaces the receiver's node, and every use replicated to it since
// the copy was read would be lost there (the walk and the spooling of a
// whole run lie between them). A node gone since keeps what was read.
void RefreshCopy(Session& s, Entry& e) {
  Result<NodeInfo> now = s.store->Get(RefOf(e));
  if (!now.ok()) return;
  if (auto json = s.engine->ExportNode(now.value()); json.ok()) e.json = std::move(json.value());
}

Status SendTo(Session& s, const std::string& dest, const std::string& token, std::vector<Entry*>& entries,
              HandoffSpool& spool, DestCount* count, Failures* failed) {
  HttpClient http(dest, 10000);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry* a, const Entry* b) { return a->receipt < b->receipt; });
  for (size_t i = 0; i < entries.size();) {
    if (StopRequested()) return Status::Unavailable("interrupted; run frsctl handoff again to finish");
    size_t end = i;
    while (end < entries.size() && entries[end]->receipt == entries[i]->receipt) ++end;
    const size_t begin = i;
    i = end;
    std::string body = "<batch>\n";
    for (size_t k = begin; k < end; ++k) {
      pugi::xml_document d;
      pugi::xml_node r = d.append_child("request");
      r.append_attribute("cmd") = "merge";
      r.append_attribute("receipt") = entries[k]->receipt.c_str();
      // A copy to a new holder when replicas are switched on takes the
      // place of the node's rules there: what that holder counted since
      // the change reached this shard as replicas, so this node holds it
      // too (its own leases and reservations it keeps: ReplaceNodes).
      if (entries[k]->kind == 'C') {
        RefreshCopy(s, *entries[k]);
        r.append_attribute("replace") = "1";
      }
      r.append_attribute("node") = entries[k]->json.c_str();
      r.append_attribute("token") = token.c_str();
      std::ostringstream os;
      d.save(os, "", pugi::format_raw | pugi::format_no_declaration);
      body += os.str() + "\n";
    }
    body += "</batch>\n";
    auto resp = http.Post("/frs", body);
    if (!resp.ok()) {
      failed->Add(Status::Unavailable("shard " + dest + ": " + WithoutShardName(resp.status().message(), dest)));
      return Status::OK();  // nothing more for this shard now
    }
    CrashPoint("sent");
    if (resp->status != 200) {
      pugi::xml_document d;
      d.load_string(resp->body.c_str());
      failed->Add(Status::Unavailable("shard " + dest + " answered " + std::to_string(resp->status) + " to batch " +
                                      entries[begin]->receipt + ": " + d.child("response").attribute("msg").value()));
      continue;
    }
    pugi::xml_document d;
    if (!d.load_string(resp->body.c_str())) {
      failed->Add(Status::IOError("shard " + dest + " answered malformed XML to batch " + entries[begin]->receipt));
      continue;
    }
    std::vector<std::string> acks;
    size_t k = begin;
    bool refused = false;  // one failure per batch, however many of its members
    for (pugi::xml_node r = d.child("batch").child("response"); r && k < end; r = r.next_sibling("response"), ++k) {
      if (r.attribute("code").as_int(-1) != 0) {
        if (!refused)
          failed->Add(Status::Unavailable("shard " + dest + " refused a node of batch " + entries[begin]->receipt +
                                          ": " + std::string(r.attribute("msg").value())));
        refused = true;
        continue;
      }
      entries[k]->acked = true;
      acks.push_back("A " + entries[k]->id);
      ++count->sent;
      if (r.attribute("merged").as_int() == 1) ++count->merged;
      else ++count->duplicates;
    }
    if (Status s = spool.Append(acks); !s.ok()) return s;
    if (k != end) failed->Add(Status::IOError("shard " + dest + " answered fewer members than it was sent"));
  }
  return Status::OK();
}

// The shard must run the same <cluster>, or it could refuse or misplace what it gets.
Status CheckPeer(const std::string& dest, const Ring& ring) {
  HttpClient http(dest, 5000);
  auto resp = http.Post("/frs", "<request cmd=\"stats\"/>");
  if (!resp.ok())
    return Status::Unavailable("shard " + dest +
                               " cannot be reached: " + WithoutShardName(resp.status().message(), dest));
  pugi::xml_document d;
  if (resp->status != 200 || !d.load_string(resp->body.c_str()))
    return Status::Unavailable("shard " + dest + " answered stats with " + std::to_string(resp->status));
  pugi::xml_node c = d.child("response").child("cluster");
  const std::string want = ring.DigestText();
  if (!c)
    return Status::InvalidArgument("shard " + dest + " has no <cluster>: give it the new srv.xml and SIGHUP it first");
  if (std::string(c.attribute("digest").value()) != want)
    return Status::InvalidArgument("shard " + dest + " runs another <cluster> (digest " +
                                   c.attribute("digest").value() + ", this srv.xml's is " + want +
                                   "): give it the new srv.xml and SIGHUP it first");
  return Status::OK();
}

// The admin token, tried on this shard's own frsd before anything moves
// (/replicate checks it first, replicas or not): a wrong one would have
// every merge refused (403) after this shard's nodes were spooled and
// erased, and the replicas' draining check skip every shard. When this
// shard's frsd cannot be reached, the token is not checked here (the run
// goes on; the other shards judge it). A 403 is also what a shard without
// <admin token> answers: the other shards would refuse the merges too.
// A text answer's first line, without its line end: a message quotes it.
std::string_view TrimmedLine(std::string_view body) { return body.substr(0, body.find_first_of("\r\n")); }

// `then`: what follows the refusal (nothing changed for this shard's own;
// a receiving shard's nodes stay here, the others' go).
Status CheckToken(const std::string& shard, const std::string& token, const char* then = "nothing was changed") {
  HttpClient http(shard, 5000);
  http.SetBearer(token);
  auto resp = http.Get("/replicate?state=1");
  if (resp.ok() && resp->status == 403)
    return Status::InvalidArgument(
        "shard " + shard + " refused the admin token (403 " + std::string(TrimmedLine(resp->body.substr(0, 120))) +
        "): pass the <admin token> the shards run (--token-file, --token, or this srv.xml's); " + then);
  return Status::OK();
}

// With replicas, a shard whose link to a node's other holder was down when
// its <cluster> changed still queues changes for that holder, made under the
// old list (docs/cluster.md, "Ring changes with replicas"): until they are
// delivered that holder's copy is short of them, and a handoff could move
// or keep the short copy. So none starts while a shard of either list
// says it still delivers some. A shard that cannot be reached is not asked
// (CheckPeer says so for the new list; a stopped shard's queue went with it).
Status CheckNothingDraining(const Ring& before, const Ring& after, const std::string& token) {
  std::set<std::string> names;
  for (const Ring* r : {&before, &after})
    for (const auto& sh : r->shards()) names.insert(sh.name);
  const std::string old_digest = before.DigestText();
  std::string busy;
  std::vector<std::string> on_old;  // every one, so that one run names them all
  size_t shards = 0;
  for (const std::string& name : names) {
    HttpClient http(name, 5000);
    http.SetBearer(token);
    auto resp = http.Get("/replicate?state=1");
    if (!resp.ok() || resp->status != 200) continue;
    // Still on the old list, its queues are not yet of the earlier list:
    // they become so, and are counted here, once it is given the new one.
    if (before.Digest() != after.Digest() && resp->body.starts_with("digest " + std::string(old_digest) + "\n")) {
      on_old.push_back(name);
      continue;
    }
    const size_t at = resp->body.find("draining ");
    const unsigned long long n = at == std::string::npos ? 0 : std::strtoull(resp->body.c_str() + at + 9, nullptr, 10);
    if (n == 0) continue;
    if (shards++ == 0) busy = name + " still delivers " + std::to_string(n) + " change(s)";
    else busy += ", " + name + " " + std::to_string(n);
  }
  if (!on_old.empty()) {
    std::string list;
    for (const std::string& n : on_old) list += (list.empty() ? "" : ", ") + n;
    return Status::Unavailable(
        (on_old.size() == 1 ? "shard " + list + " still runs" : "shards " + list + " still run") +
        " the shard list before the change: give " + (on_old.size() == 1 ? "it" : "each") +
        " the new srv.xml and SIGHUP " + (on_old.size() == 1 ? "it" : "them") +
        " first (with replicas every shard must run the new list before a handoff; nothing "
        "was changed)");
  }
  if (shards == 0) return Status::OK();
  return Status::Unavailable(busy +
                             " queued under the shard list before the change, for their other holders (a link that "
                             "was down at the change): those holders' copies lack them, and a handoff now could move "
                             "or keep a short copy. Nothing was changed: bring the links back, wait until "
                             "frs_replica_draining is 0 on every shard, and run frsctl handoff again");
}

// --from naming the list this shard runs now (an easy slip: the srv.xml just
// edited) while the store's nodes were last handed off under another
// (cluster.digest): such a run planned nothing to move, or moved copies as
// if no holder had changed, summing counts twice, and then marked the
// handoff done. A store that says nothing (no cluster.digest) is not judged.
Status CheckFromIsBefore(const std::string& from, const Ring& before, const Ring& after, const std::string& dir) {
  if (before.Digest() != after.Digest()) return Status::OK();
  std::ifstream in(store_dir::In(dir, store_dir::kRingDigest));
  std::string text;
  if (!std::getline(in, text)) return Status::OK();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const std::string now = after.DigestText();
  if (text.size() != 8 || text == now) return Status::OK();
  return Status::InvalidArgument("--from " + from + " names the shard list this shard runs now (digest " + now +
                                 "), and this store's nodes were last handed off under another (" + text +
                                 "): pass the srv.xml from before the change (nothing was changed)");
}

// The store directory's note of the list its nodes are placed for: the list
// (cluster.list), then its digest (cluster.digest). A start under another
// list takes the noted one for the list before the change (frsd's
// replica_catchup.cc); a stop between the two writes leaves a list whose
// digest is not the noted one, which frsd ignores.
Status NoteHandedOff(const Ring& after, const std::string& dir) {
  if (auto w = WriteFileWhole(store_dir::In(dir, store_dir::kRingList), after.ListText(), {}); !w.ok())
    return w.status();
  auto w = WriteFileWhole(store_dir::In(dir, store_dir::kRingDigest), after.DigestText() + "\n", {});
  return w.ok() ? Status::OK() : w.status();
}

// Tells this shard's frsd that the handoff of the change to `after` is
// finished here: it answers snapshots again once every shard of the list
// says so (handler_replica.cc), and the store directory `dir` notes the list
// (cluster.digest). An error when it cannot be told: the run's nodes moved,
// but its shard waits for a run that tells it. A shard that keeps no
// replicas now (`replicas_after` false: switched off) answers no snapshot
// and waits for nothing: only the directory notes the list.
Status ReportHandedOff(const std::string& self, const Ring& after, bool replicas_after, const std::string& token,
                       const std::string& dir) {
  if (!replicas_after) return NoteHandedOff(after, dir);
  HttpClient http(self, 5000);
  http.SetBearer(token);
  auto resp = http.Post("/replicate?handed_off=" + after.DigestText(), "", "text/plain");
  if (resp.ok() && resp->status == 200) {
    // The store's nodes are placed for this list now: a restart of frsd
    // keeps no handoff pending (replica_catchup.cc, CarryRingChange).
    return NoteHandedOff(after, dir);
  }
  std::string why =
      resp.ok() ? std::to_string(resp->status) + " " + resp->body.substr(0, 200) : resp.status().message();
  std::replace(why.begin(), why.end(), '\n', ' ');
  while (!why.empty() && why.back() == ' ') why.pop_back();
  return Status::Unavailable("the nodes were handed off, but " + self + " was not told so (" + why +
                             "): it answers no snapshot until a handoff run tells it (run frsctl handoff again once it "
                             "is up, with the right token)");
}

}  // namespace

Result<std::string> TokenFromFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::InvalidArgument("--token-file " + path + ": " + std::strerror(errno));
  std::string line;
  std::getline(f, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (f.bad()) return Status::InvalidArgument("--token-file " + path + ": cannot read it");
  if (line.empty()) return Status::InvalidArgument("--token-file " + path + " holds no token on its first line");
  return line;
}

Result<int> RunHandoff(Session& s, const HandoffArgs& a) {
  if (s.cfg.cluster_shards.empty())
    return Status::InvalidArgument(s.cfg.path + " has no <cluster>: a lone server owns every route");
  auto ring_r = Ring::Make(s.cfg.cluster_shards);
  if (!ring_r.ok()) return Status::InvalidArgument(s.cfg.path + ": " + ring_r.status().message());
  const Ring& ring = ring_r.value();
  const long self = ring.Find(s.cfg.cluster_self);
  const std::string token = a.token.empty() ? s.cfg.admin_token : a.token;
  if (!a.dry_run && token.empty())
    return Status::InvalidArgument(
        "the other shards need the admin token: pass --token-file (or --token) or set <admin token> in " + s.cfg.path);
  // The shard list before the change: with replicas, it says which of a
  // node's two old holders sends it and which new holders lack it.
  std::optional<Ring> before;
  bool replicas_before = false;
  if (!a.from.empty()) {
    auto old_cfg = ReadServiceConfig(a.from);
    if (!old_cfg.ok()) return Status::InvalidArgument("--from " + a.from + ": " + old_cfg.status().message());
    if (old_cfg->cluster_shards.empty())
      return Status::InvalidArgument("--from " + a.from + " has no <cluster>: name the srv.xml this shard ran before");
    if (old_cfg->cluster_self != s.cfg.cluster_self && !a.any_self)
      return Status::InvalidArgument("--from " + a.from + " is another shard's srv.xml (self " + old_cfg->cluster_self +
                                     "; this shard is " + s.cfg.cluster_self +
                                     "); --any-self takes its shard list all the same (a list another shard ran by "
                                     "mistake, put back: docs/cluster.md)");
    auto old_ring = Ring::Make(old_cfg->cluster_shards);
    if (!old_ring.ok()) return Status::InvalidArgument("--from " + a.from + ": " + old_ring.status().message());
    if (Status st = CheckFromIsBefore(a.from, old_ring.value(), ring, s.cfg.store_dir); !st.ok()) return st;
    before.emplace(std::move(old_ring.value()));
    replicas_before = old_cfg->cluster_replicas != 0;
  } else if (s.cfg.cluster_replicas != 0) {
    return Status::InvalidArgument(
        "with <cluster replicas=\"1\"> handoff needs the shard list before the change: pass --from OLD_SRV.xml "
        "(the srv.xml this shard ran before), which says which of a node's two holders sends it");
  }
  const bool with_replicas = replicas_before || s.cfg.cluster_replicas != 0;
  // A dry run asks too: it says what the real run would do, refusals included.
  if (!token.empty())
    if (Status st = CheckToken(s.cfg.cluster_self, token); !st.ok()) return st;
  if (before && with_replicas)
    if (Status st = CheckNothingDraining(*before, ring, token); !st.ok()) return st;
  const HandoffPlanner planner(before ? &*before : nullptr, replicas_before, ring, s.cfg.cluster_replicas != 0,
                               s.cfg.cluster_self);
  const uint32_t batch = std::clamp<uint32_t>(a.batch, 1, AdminEngine::kMaxMergeNodes);
  const uint32_t now_s = static_cast<uint32_t>(s.NowMs() / 1000);
  std::map<std::string, DestCount> counts;
  uint64_t unknown_route = 0;
  uint64_t erased_copies = 0;  // nodes another old holder hands over: erased here (or would be, dry run)
  uint64_t stats_files = 0;    // statistics day files handed over (a leaving shard)
  std::vector<std::pair<std::string, std::string>> stats_skipped;  // day files the receiver does not keep, and why

  HandoffSpool spool;
  std::vector<Entry> entries;
  Failures failed;
  std::set<std::string> unready;  // shards left out of this run
  // A shard that cannot be reached, or runs another <cluster>, is left out
  // of this run (its nodes stay here, or in the spool); the others are
  // handed theirs. A dry run asks them too, and fails as the run would.
  // A shard that would refuse the merges (the token, or none set there)
  // is left out the same way, before its nodes are spooled and erased.
  for (size_t i = 0; i < ring.shards().size(); ++i)
    if (static_cast<long>(i) != self) {
      const std::string& name = ring.shards()[i].name;
      Status st = CheckPeer(name, ring);
      if (st.ok() && !token.empty()) st = CheckToken(name, token, "its nodes stay here");
      if (!st.ok()) {
        failed.Add(st);
        unready.insert(name);
      }
    }
  if (!a.dry_run) {
    std::vector<SpoolRecord> records;
    std::string cut;
    if (Status st = spool.Open(store_dir::In(s.cfg.store_dir, store_dir::kHandoffSpool), &records, &cut); !st.ok())
      return st;
    if (!cut.empty()) std::fprintf(stderr, "frsctl: %s\n", cut.c_str());
    if (Status st = ParseRecords(records, &entries); !st.ok()) return st;
    // An interrupted run's entries: room for every mark they may still
    // need, before any of them is erased.
    uint64_t room = 0;
    for (const Entry& e : entries)
      if (!e.acked && !e.voided) room += MarkBytes(e, !e.erased);
    if (Status st = spool.Reserve(room); !st.ok())
      return Status::IOError(st.message() + ": free space on that disk first (nothing was changed)");
    // Then settle what was not erased yet, each mark right after its erase.
    for (Entry& e : entries) {
      if (e.kind != 'N' || e.acked || e.voided || e.erased || unready.count(e.dest) != 0) continue;
      Result<NodeInfo> cur = s.store->Get(RefOf(e));
      if (!cur.ok() && !cur.status().IsNotFound()) return cur.status();
      if (!cur.ok()) {
        e.erased = true;  // erased before the interruption (or evicted since): the spool holds it
      } else {
        auto erased = EraseIfUnchanged(*s.store, e, now_s);
        if (!erased.ok()) return erased.status();
        e.erased = erased.value();
        e.voided = !e.erased;
      }
      if (Status st = spool.Append({(e.erased ? "E " : "V ") + e.id}); !st.ok()) return st;
    }
    FollowPrimaries(entries);
  }

  // This run's nodes: every one whose plan is not to stay as it is.
  struct Move {
    NodeInfo node;
    NodePlan plan;
  };
  std::vector<Move> moving;
  std::vector<NodeInfo> dropping;  // erased here only: another old holder sends them
  Store::Filter filter;
  filter.busy_percent = kWalkBusyPercent;
  Status walk = s.store->ForEach(filter, [&](const NodeInfo& n) {
    if (n.biz == kReceiptBiz) return;
    if (!n.route_known) {
      ++unknown_route;
      return;
    }
    NodePlan plan = planner.PlanFor(n.route_pos);
    if (plan.Keeps()) return;
    if (plan.dests.empty()) {
      if (a.dry_run) ++erased_copies;
      else dropping.push_back(n);
      return;
    }
    bool ready = true;
    for (const std::string& d : plan.dests) {
      ++counts[d].would_move;
      ready = ready && unready.count(d) == 0;
    }
    if (!a.dry_run && ready) moving.push_back({n, std::move(plan)});
  });
  if (!walk.ok()) return walk;

  if (!a.dry_run) {
    std::random_device rd;
    char run[20];
    std::snprintf(run, sizeof run, "%08x%08x", rd(), rd());
    uint64_t seq = 0, batches = 0;
    // Batches of nodes with the same destinations and the same plan: one
    // receipt per destination and batch (a node's that both old holders
    // send is its own).
    auto group_of = [](const Move& m) {
      std::string g(!m.plan.erase ? "C" : m.plan.shared ? "S" : "E");
      for (const std::string& d : m.plan.dests) g += " " + d;
      return g;
    };
    std::stable_sort(moving.begin(), moving.end(),
                     [&](const Move& x, const Move& y) { return group_of(x) < group_of(y); });
    for (size_t i = 0; i < moving.size();) {
      if (StopRequested()) return Status::Unavailable("interrupted; run frsctl handoff again to finish");
      const std::string group = group_of(moving[i]);
      const size_t begin = i;
      size_t end = i;
      while (end < moving.size() && end - i < batch && group_of(moving[end]) == group) ++end;
      const std::vector<std::string> dests = moving[i].plan.dests;
      const bool copy = !moving[i].plan.erase && before;
      const bool shared = moving[i].plan.shared && before;
      std::vector<std::string> receipts;
      if (!shared)
        for (size_t d = 0; d < dests.size(); ++d)
          receipts.push_back(s.cfg.cluster_self + "/" + run + "/" + std::to_string(++batches));
      std::vector<std::string> lines;
      std::vector<Entry> spooled;
      uint64_t room = 0;
      for (size_t k = i; k < end; ++k) {
        const NodeInfo& n = moving[k].node;
        auto json = s.engine->ExportNode(n);
        if (!json.ok()) return json.status();
        std::string primary;
        for (size_t d = 0; d < dests.size(); ++d) {
          Entry e;
          e.kind = copy ? 'C' : d == 0 ? 'N' : 'D';
          e.id = std::string(run) + "." + std::to_string(++seq);
          if (e.kind == 'N') primary = e.id;
          if (e.kind == 'D') e.primary = primary;
          e.erased = copy;
          e.receipt = shared ? NodeReceipt("moved", *before, ring, n) : receipts[d];
          e.dest = dests[d];
          e.json = json.value();
          e.biz = n.biz;
          e.fp = n.fp;
          e.key_len = n.key_len;
          e.key = n.key;
          e.state.assign(n.state.begin(), n.state.end());
          lines.push_back(EntryLine(e));
          room += HandoffSpool::RecordBytes(lines.back()) + MarkBytes(e, true);
          spooled.push_back(std::move(e));
        }
      }
      i = end;
      // The batch's records, its erase marks and its acknowledgements must
      // all fit before one node is erased. A disk too full for that ends
      // the spooling (these nodes stay here); what is erased is still sent.
      Status st = spool.Reserve(room);
      if (st.ok()) st = spool.Append(lines);
      if (!st.ok()) {
        failed.Add(
            Status::IOError(st.message() + ": " + std::to_string(moving.size() - begin) +
                            " node(s) stay on this shard; free space on that disk and run frsctl handoff again"));
        break;
      }
      CrashPoint("spooled");
      // Each node's mark right after its erase: a kill between the two
      // leaves one node whose next run finds it gone and sends it (or, had
      // the key been counted here again meanwhile, finds it changed).
      for (Entry& e : spooled) {
        if (e.kind != 'N') {
          entries.push_back(std::move(e));
          continue;
        }
        auto erased = EraseIfUnchanged(*s.store, e, now_s);
        if (!erased.ok()) return erased.status();
        e.erased = erased.value();
        e.voided = !erased.value();
        if (Status ms = spool.Append({(e.erased ? "E " : "V ") + e.id}); !ms.ok()) return ms;
        entries.push_back(std::move(e));
      }
    }
    FollowPrimaries(entries);
    // A node another old holder sends: this shard's copy goes (unless it
    // changed since the walk; a later run erases it then).
    for (const NodeInfo& n : dropping) {
      Entry e;
      e.biz = n.biz;
      e.fp = n.fp;
      e.key_len = n.key_len;
      e.key = n.key;
      e.state.assign(n.state.begin(), n.state.end());
      auto erased = EraseIfUnchanged(*s.store, e, now_s);
      if (!erased.ok()) return erased.status();
      if (erased.value()) ++erased_copies;
    }
    CrashPoint("erased");
    // Send everything erased and not acknowledged, per destination.
    std::map<std::string, std::vector<Entry*>> by_dest;
    for (Entry& e : entries)
      if (e.erased && !e.acked) by_dest[e.dest].push_back(&e);
    for (auto& [dest, list] : by_dest) {
      if (unready.count(dest) != 0) continue;  // said once already
      if (ring.Find(dest) < 0) {
        failed.Add(Status::InvalidArgument("the spool holds nodes for " + dest +
                                           ", which is not in <cluster> any more: put it back until they are sent"));
        continue;
      }
      if (Status st = SendTo(s, dest, token, list, spool, &counts[dest], &failed); !st.ok()) return st;
    }
    bool settled = true;
    for (const Entry& e : entries) settled = settled && (e.acked || e.voided);
    if (settled) {
      if (Status st = spool.Clear(); !st.ok()) return st;
    }
    // A shard leaving the ring (it owns nothing now) also hands over what
    // it counted by key field; one that stays keeps its own (the cluster's
    // figures sum every shard's).
    if (self < 0 && !ring.shards().empty()) {
      std::vector<Status> stats_failed;
      auto sent = HandOffStats(s, ring, token, &stats_failed, &stats_skipped);
      if (!sent.ok()) return sent.status();
      stats_files = sent.value();
      for (Status& st : stats_failed) failed.Add(std::move(st));
    }
  }

  if (s.json) {
    for (const auto& [dest, c] : counts) {
      JsonOut j;
      j.BeginObject().Key("shard").String(dest);
      if (a.dry_run) j.Key("would_move").Uint(c.would_move);
      else j.Key("sent").Uint(c.sent).Key("merged").Uint(c.merged).Key("already_there").Uint(c.duplicates);
      j.EndObject();
      std::printf("%s\n", j.str().c_str());
    }
    for (const auto& [path, why] : stats_skipped) {
      JsonOut j;
      j.BeginObject().Key("skipped").String(path).Key("reason").String(why).EndObject();
      std::printf("%s\n", j.str().c_str());
    }
    JsonOut t;
    t.BeginObject()
        .Key("unknown_route")
        .Uint(unknown_route)
        .Key("stats_files")
        .Uint(stats_files)
        .Key("stats_skipped")
        .Uint(stats_skipped.size())
        .Key(a.dry_run ? "would_erase" : "erased")
        .Uint(erased_copies)
        .Key("dry_run")
        .Bool(a.dry_run)
        .EndObject();
    std::printf("%s\n", t.str().c_str());
  } else {
    if (counts.empty() && erased_copies == 0)
      std::printf("nothing to hand off: this shard %s every node it holds\n",
                  s.cfg.cluster_replicas != 0 ? "owns or follows" : "owns");
    for (const auto& [dest, c] : counts) {
      if (a.dry_run)
        std::printf("%s: %llu node(s) would move\n", dest.c_str(), static_cast<unsigned long long>(c.would_move));
      else
        std::printf("%s: %llu node(s) sent, %llu merged, %llu already there\n", dest.c_str(),
                    static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.merged),
                    static_cast<unsigned long long>(c.duplicates));
    }
    if (erased_copies)
      std::printf("%llu node(s) %s here: no holder of them now; another old holder of each keeps it or hands it over\n",
                  static_cast<unsigned long long>(erased_copies), a.dry_run ? "would be erased" : "erased");
    if (stats_files)
      std::printf("%llu statistics day file(s) handed over\n", static_cast<unsigned long long>(stats_files));
    for (const auto& [path, why] : stats_skipped) std::printf("skipped %s: %s\n", path.c_str(), why.c_str());
    if (unknown_route)
      std::printf("%llu node(s) stay: imported without their route from an export whose key text was cut\n",
                  static_cast<unsigned long long>(unknown_route));
  }
  if (Status st = failed.Combined(a.dry_run); !st.ok()) return st;
  if (before && with_replicas && !a.dry_run)
    if (Status told = ReportHandedOff(s.cfg.cluster_self, ring, s.cfg.cluster_replicas != 0, token, s.cfg.store_dir);
        !told.ok())
      return told;
  return kExitOk;
}

}  // namespace frs::ctl
