// frsctl handoff: moves every node that another shard of <cluster> now owns
// to that shard, merged with what it counted meanwhile (Engine::MergeNodes).
//
// Exactly once, whatever dies when: each node goes through a spool file in
// the store directory (handoff.spool), one line per step:
//   N ID RECEIPT DEST BIZ FP_LO FP_HI KEY_LEN STATE_HEX JSON   to send (written first)
//   E ID   erased here (the node is only in the spool now)
//   V ID   not erased: the node changed after it was spooled (it stays
//          here and a later run sends it again, as a new entry)
//   A ID   the owner acknowledged it (merged, or found its receipt)
// The entries of one batch (one destination) share a RECEIPT; the receiver
// writes their merges and one receipt node in one transaction and ignores a
// receipt it already has, so re-sending a batch whose acknowledgement was
// lost counts it once (and a shard keeps one receipt per batch, not per
// node). A batch is always re-sent with exactly the entries it was first
// sent with: those of its receipt that were erased. A run first finishes what
// the spool says an earlier, interrupted run left: an entry not yet erased is
// erased now if the node is unchanged (else voided); an erased one is
// (re)sent. Lines are write(2)s to the page cache: like the store itself,
// they survive the death of any process.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <pugixml.hpp>

#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "client/http_client.h"
#include "commands.h"
#include "frs/ring.h"
#include "json_out.h"
#include "os/stop_request.h"
#include "os/unique_fd.h"

namespace frs::ctl {
namespace {

std::string Hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

bool Unhex(std::string_view hex, std::string* out) {
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  if (hex.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = v(hex[i]), lo = v(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// The crash tests (tests/cluster) stop a handoff at one step as kill -9 would:
// FRS_TEST_HANDOFF_CRASH=spooled (entries written, nothing erased), erased
// (erased here, nothing sent) or sent (the owner merged, no acknowledgement
// recorded).
void CrashPoint(const char* step) {
  const char* at = std::getenv("FRS_TEST_HANDOFF_CRASH");
  if (at && std::strcmp(at, step) == 0) _exit(137);
}

struct Entry {
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

class Spool {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (!fd_.valid()) return Status::FromErrno("cannot open " + path, errno);
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0)
      return Status::Busy(path + " is in use: another frsctl handoff runs on this store");
    return Status::OK();
  }
  // Every entry the file holds, in order.
  Status Load(std::vector<Entry>* out) {
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = ::pread(fd_.get(), buf, sizeof buf, static_cast<off_t>(text.size()))) > 0) text.append(buf, static_cast<size_t>(n));
    std::map<std::string, size_t> index;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() < 3) continue;
      std::istringstream ls(line);
      std::string kind, id;
      ls >> kind >> id;
      if (kind == "N") {
        Entry e;
        e.id = id;
        ls >> e.receipt;
        std::string fp_lo, fp_hi, key_hex, state_hex;
        unsigned biz = 0, key_len = 0;
        ls >> e.dest >> biz >> fp_lo >> fp_hi >> key_len >> key_hex >> state_hex;
        if (key_hex != "-" && !Unhex(key_hex, &e.key)) continue;
        std::getline(ls, e.json);
        if (!e.json.empty() && e.json[0] == ' ') e.json.erase(0, 1);
        e.biz = static_cast<uint16_t>(biz);
        e.key_len = static_cast<uint8_t>(key_len);
        e.fp.lo = std::strtoull(fp_lo.c_str(), nullptr, 16);
        e.fp.hi = std::strtoull(fp_hi.c_str(), nullptr, 16);
        if (!ls.fail() || !e.json.empty()) {
          if (!Unhex(state_hex, &e.state) || e.json.empty()) continue;  // a line cut by a kill: never erased
          index[id] = out->size();
          out->push_back(std::move(e));
        }
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
  Status Append(const std::string& lines) {
    size_t off = 0;
    while (off < lines.size()) {
      ssize_t n = ::write(fd_.get(), lines.data() + off, lines.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno("cannot write " + path_, errno);
      off += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  // Everything in it is settled: start the next run from an empty file.
  Status Clear() {
    if (::ftruncate(fd_.get(), 0) != 0) return Status::FromErrno("cannot truncate " + path_, errno);
    return Status::OK();
  }

 private:
  std::string path_;
  os::UniqueFd fd_;
};

std::string EntryLine(const Entry& e) {
  char fp[40];
  std::snprintf(fp, sizeof fp, "%016" PRIx64 " %016" PRIx64, e.fp.lo, e.fp.hi);
  return "N " + e.id + " " + e.receipt + " " + e.dest + " " + std::to_string(e.biz) + " " + fp + " " + std::to_string(e.key_len) +
         " " + (e.key.empty() ? std::string("-") : Hex(e.key)) + " " + Hex(e.state) + " " + e.json + "\n";
}

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
// merge batch) and records what was acknowledged.
Status SendTo(const std::string& dest, const std::string& token, std::vector<Entry*>& entries, Spool& spool,
              DestCount* count) {
  client::HttpClient http(dest, 10000);
  std::stable_sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->receipt < b->receipt; });
  for (size_t i = 0; i < entries.size();) {
    if (os::StopRequested()) return Status::Unavailable("interrupted; run frsctl handoff again to finish");
    size_t end = i;
    while (end < entries.size() && entries[end]->receipt == entries[i]->receipt) ++end;
    std::string body = "<batch>\n";
    for (size_t k = i; k < end; ++k) {
      pugi::xml_document d;
      pugi::xml_node r = d.append_child("request");
      r.append_attribute("cmd") = "merge";
      r.append_attribute("receipt") = entries[k]->receipt.c_str();
      r.append_attribute("node") = entries[k]->json.c_str();
      r.append_attribute("token") = token.c_str();
      std::ostringstream os;
      d.save(os, "", pugi::format_raw | pugi::format_no_declaration);
      body += os.str() + "\n";
    }
    body += "</batch>\n";
    auto resp = http.Post("/frs", body);
    if (!resp.ok()) return Status::Unavailable("shard " + dest + ": " + resp.status().message());
    CrashPoint("sent");
    if (resp->status != 200) {
      pugi::xml_document d;
      d.load_string(resp->body.c_str());
      return Status::Unavailable("shard " + dest + " answered " + std::to_string(resp->status) + ": " +
                                 d.child("response").attribute("msg").value());
    }
    pugi::xml_document d;
    if (!d.load_string(resp->body.c_str())) return Status::IOError("shard " + dest + " answered malformed XML");
    std::string acks;
    size_t k = i;
    Status failed;
    for (pugi::xml_node r = d.child("batch").child("response"); r && k < end; r = r.next_sibling("response"), ++k) {
      if (r.attribute("code").as_int(-1) != 0) {
        if (failed.ok())
          failed = Status::Unavailable("shard " + dest + " refused a node: " + std::string(r.attribute("msg").value()));
        continue;
      }
      entries[k]->acked = true;
      acks += "A " + entries[k]->id + "\n";
      ++count->sent;
      if (r.attribute("merged").as_int() == 1) ++count->merged;
      else ++count->duplicates;
    }
    if (Status s = spool.Append(acks); !s.ok()) return s;
    if (!failed.ok()) return failed;
    if (k != end) return Status::IOError("shard " + dest + " answered fewer members than it was sent");
    i = end;
  }
  return Status::OK();
}

// The shard must run the same <cluster>, or it could refuse or misplace what it gets.
Status CheckPeer(const std::string& dest, const Ring& ring) {
  client::HttpClient http(dest, 5000);
  auto resp = http.Post("/frs", "<request cmd=\"stats\"/>");
  if (!resp.ok()) return Status::Unavailable("shard " + dest + " cannot be reached: " + resp.status().message());
  pugi::xml_document d;
  if (resp->status != 200 || !d.load_string(resp->body.c_str()))
    return Status::Unavailable("shard " + dest + " answered stats with " + std::to_string(resp->status));
  pugi::xml_node c = d.child("response").child("cluster");
  char want[16];
  std::snprintf(want, sizeof want, "%08x", ring.Digest());
  if (!c) return Status::InvalidArgument("shard " + dest + " has no <cluster>: give it the new srv.xml and SIGHUP it first");
  if (std::string(c.attribute("digest").value()) != want)
    return Status::InvalidArgument("shard " + dest + " runs another <cluster> (digest " + c.attribute("digest").value() +
                                   ", this srv.xml's is " + want + "): give it the new srv.xml and SIGHUP it first");
  return Status::OK();
}

}  // namespace

Result<int> RunHandoff(Session& s, const HandoffArgs& a) {
  if (s.cfg.cluster_shards.empty())
    return Status::InvalidArgument(s.cfg.path + " has no <cluster>: a lone server owns every route");
  auto ring_r = Ring::Make(s.cfg.cluster_shards);
  if (!ring_r.ok()) return Status::InvalidArgument(s.cfg.path + ": " + ring_r.status().message());
  const Ring& ring = ring_r.value();
  const long self = ring.Find(s.cfg.cluster_self);
  const std::string token = a.token.empty() ? s.cfg.admin_token : a.token;
  if (!a.dry_run && token.empty())
    return Status::InvalidArgument("the other shards need the admin token: pass --token or set <admin token> in " + s.cfg.path);
  const uint32_t batch = std::clamp<uint32_t>(a.batch, 1, Engine::kMaxMergeNodes);
  const uint32_t now_s = static_cast<uint32_t>(s.NowMs() / 1000);
  std::map<std::string, DestCount> counts;
  uint64_t unknown_route = 0;

  Spool spool;
  std::vector<Entry> entries;
  if (!a.dry_run) {
    if (Status st = spool.Open(s.cfg.store_dir + "/handoff.spool"); !st.ok()) return st;
    if (Status st = spool.Load(&entries); !st.ok()) return st;
    for (size_t i = 0; i < ring.shards().size(); ++i)
      if (static_cast<long>(i) != self)
        if (Status st = CheckPeer(ring.shards()[i].name, ring); !st.ok()) return st;
    // An interrupted run's entries: settle what was not erased yet.
    std::string marks;
    for (Entry& e : entries) {
      if (e.acked || e.voided || e.erased) continue;
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
      marks += (e.erased ? "E " : "V ") + e.id + "\n";
    }
    if (Status st = spool.Append(marks); !st.ok()) return st;
  }

  // This run's nodes: every one whose route another shard owns.
  std::vector<NodeInfo> moving;
  Store::Filter filter;
  filter.busy_percent = kWalkBusyPercent;
  Status walk = s.store->ForEach(filter, [&](const NodeInfo& n) {
    if (n.biz == kReceiptBiz) return;
    if (!n.route_known) {
      ++unknown_route;
      return;
    }
    const size_t owner = ring.OwnerOfHash(n.route_pos);
    if (static_cast<long>(owner) == self) return;
    ++counts[ring.shards()[owner].name].would_move;
    if (!a.dry_run) moving.push_back(n);
  });
  if (!walk.ok()) return walk;

  if (!a.dry_run) {
    std::random_device rd;
    char run[20];
    std::snprintf(run, sizeof run, "%08x%08x", rd(), rd());
    uint64_t seq = 0, batches = 0;
    // Batches of one destination each: one receipt per batch.
    std::stable_sort(moving.begin(), moving.end(), [&](const NodeInfo& x, const NodeInfo& y) {
      return ring.OwnerOfHash(x.route_pos) < ring.OwnerOfHash(y.route_pos);
    });
    for (size_t i = 0; i < moving.size();) {
      if (os::StopRequested()) return Status::Unavailable("interrupted; run frsctl handoff again to finish");
      const size_t owner = ring.OwnerOfHash(moving[i].route_pos);
      size_t end = i;
      while (end < moving.size() && end - i < batch && ring.OwnerOfHash(moving[end].route_pos) == owner) ++end;
      const std::string receipt = s.cfg.cluster_self + "/" + run + "/" + std::to_string(++batches);
      std::string lines;
      const size_t first = entries.size();
      for (size_t k = i; k < end; ++k) {
        const NodeInfo& n = moving[k];
        auto json = s.engine->ExportNode(n);
        if (!json.ok()) return json.status();
        Entry e;
        e.id = std::string(run) + "." + std::to_string(++seq);
        e.receipt = receipt;
        e.dest = ring.shards()[ring.OwnerOfHash(n.route_pos)].name;
        e.json = json.value();
        e.biz = n.biz;
        e.fp = n.fp;
        e.key_len = n.key_len;
        e.key = n.key;
        e.state.assign(n.state.begin(), n.state.end());
        lines += EntryLine(e);
        entries.push_back(std::move(e));
      }
      if (Status st = spool.Append(lines); !st.ok()) return st;
      CrashPoint("spooled");
      std::string marks;
      for (size_t k = first; k < entries.size(); ++k) {
        auto erased = EraseIfUnchanged(*s.store, entries[k], now_s);
        if (!erased.ok()) return erased.status();
        entries[k].erased = erased.value();
        entries[k].voided = !erased.value();
        marks += (entries[k].erased ? "E " : "V ") + entries[k].id + "\n";
      }
      if (Status st = spool.Append(marks); !st.ok()) return st;
      i = end;
    }
    CrashPoint("erased");
    // Send everything erased and not acknowledged, per destination.
    std::map<std::string, std::vector<Entry*>> by_dest;
    for (Entry& e : entries)
      if (e.erased && !e.acked) by_dest[e.dest].push_back(&e);
    for (auto& [dest, list] : by_dest) {
      if (ring.Find(dest) < 0)
        return Status::InvalidArgument("the spool holds nodes for " + dest +
                                       ", which is not in <cluster> any more: put it back until they are sent");
      if (Status st = SendTo(dest, token, list, spool, &counts[dest]); !st.ok()) return st;
    }
    bool settled = true;
    for (const Entry& e : entries) settled = settled && (e.acked || e.voided);
    if (settled) {
      if (Status st = spool.Clear(); !st.ok()) return st;
    }
  }

  if (s.json) {
    for (const auto& [dest, c] : counts) {
      JsonOut j;
      j.Begin().Key("shard").Str(dest);
      if (a.dry_run) j.Key("would_move").Uint(c.would_move);
      else j.Key("sent").Uint(c.sent).Key("merged").Uint(c.merged).Key("already_there").Uint(c.duplicates);
      j.End();
      std::printf("%s\n", j.str().c_str());
    }
    JsonOut t;
    t.Begin().Key("unknown_route").Uint(unknown_route).Key("dry_run").Bool(a.dry_run).End();
    std::printf("%s\n", t.str().c_str());
  } else {
    if (counts.empty()) std::printf("nothing to hand off: this shard owns every node it holds\n");
    for (const auto& [dest, c] : counts) {
      if (a.dry_run)
        std::printf("%s: %llu node(s) would move\n", dest.c_str(), static_cast<unsigned long long>(c.would_move));
      else
        std::printf("%s: %llu node(s) sent, %llu merged, %llu already there\n", dest.c_str(),
                    static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.merged),
                    static_cast<unsigned long long>(c.duplicates));
    }
    if (unknown_route)
      std::printf("%llu node(s) stay: imported without their route from an export whose key text was cut\n",
                  static_cast<unsigned long long>(unknown_route));
  }
  return kExitOk;
}

}  // namespace frs::ctl
