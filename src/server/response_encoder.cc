#include "server/response_encoder.h"

#include <atomic>

#include <chrono>
#include <cstdio>

#include "base/decimal.h"
#include "limit/lease_id.h"
#include "server/buf_writer.h"

namespace frs::server {

namespace {

void AppendInt(int64_t v, std::string* out) {
  char buf[kMaxDecimalChars];
  out->append(buf, static_cast<size_t>(WriteDecimal(buf, v) - buf));
}

void Attr(const char* name, int64_t v, std::string* out) {
  out->push_back(' ');
  out->append(name);
  out->append("=\"");
  AppendInt(v, out);
  out->push_back('"');
}

}  // namespace

void AppendMisrouted(std::string_view route, std::string_view owner, std::string* out) {
  out->append("<response code=\"421\" msg=\"route &quot;");
  AppendXmlEscaped(route.substr(0, 64), out);
  out->append("&quot; belongs to shard ");
  AppendXmlEscaped(owner, out);
  out->append("; send it there (this shard changes nothing)\" owner=\"");
  AppendXmlEscaped(owner, out);
  out->append("\"/>\n");
}

void AppendError(int code, std::string_view msg, std::string* out) {
  out->append("<response code=\"");
  AppendInt(code, out);
  out->append("\" msg=\"");
  AppendXmlEscaped(msg, out);
  out->append("\"/>\n");
}

// ` NAME="ID"`: a lease's or a reservation's id, 24 hex digits.
template <size_t N>
void WriteId(BufWriter& w, const char (&attr)[N], uint32_t serial, uint64_t mac) {
  char id[limit::kLeaseIdChars];
  limit::FormatLeaseId(serial, mac, id);
  w.Lit(attr);
  w.Str(std::string_view(id, sizeof id));
  w.Char('"');
}

// What only leases and reservations answer, the same in a <response> and in
// a compact batch's <m>: an id the client needs to release, renew or
// settle (a compact answer without it took a place nobody could give back).
void WriteLeaseAndReservationFields(Cmd cmd, const Decision& d, BufWriter& w) {
  if (d.lease_serial != 0) {
    // A lease granted (acquire, update) or renewed: its id and expiry.
    WriteId(w, " lease=\"", d.lease_serial, d.lease_mac);
    w.Field(" expires=\"", d.lease_expires);
  }
  if (cmd == Cmd::kRelease) w.Field(" released=\"", d.released ? 1 : 0);
  if (d.res_serial != 0) {
    // A reservation taken: its id (the lease id's form) and expiry.
    WriteId(w, " reservation=\"", d.res_serial, d.res_mac);
    // expires="T" as the contract words it; in a biz with a concurrency
    // rule too, whose lease's expires it is, as reservation_expires, a
    // lease granted or not (a shadow acquire past max takes none): the
    // client reads one name per biz.
    bool leases = d.lease_serial != 0;
    for (uint32_t i = 0; i < d.nrules && !leases; ++i) leases = d.rules[i].algo == Algo::kConcurrency;
    if (leases) w.Field(" reservation_expires=\"", d.res_expires);
    else w.Field(" expires=\"", d.res_expires);
  } else if (d.reservations_full) {
    w.Lit(" reservations_full=\"1\"");
  }
  if (cmd == Cmd::kSettle) {
    w.Field(" settled=\"", d.settled ? 1 : 0);
    w.Field(" returned=\"", d.res_returned);
    w.Field(" overrun=\"", d.res_overrun);
  }
}

// Most decisions have none of them (queries and acquires of rate rules): the
// test is made here, before any call.
inline void WriteLeaseAndReservation(Cmd cmd, const Decision& d, BufWriter& w) {
  if ((d.lease_serial | d.res_serial) != 0 || d.reservations_full || cmd == Cmd::kRelease || cmd == Cmd::kSettle)
    WriteLeaseAndReservationFields(cmd, d, w);
}

size_t WriteDecision(Cmd cmd, const Decision& d, char* buf) {
  // Hot path (every acquire): literals of known length, integers by
  // WriteDecimal (base/decimal.h). Worst case: 6 top-level and 7
  // per-rule integers of at most 20 digits plus fixed text, well under
  // kMaxDecisionBytes.
  static_assert(kMaxRulesPerBiz <= 8, "resize kMaxDecisionBytes");
  BufWriter w(buf);
  w.Lit("<response code=\"0\"");
  if (cmd == Cmd::kDelete) {
    w.Field(" found=\"", d.found ? 1 : 0);
    w.Lit("/>\n");
    return w.size();
  }
  if (cmd == Cmd::kReset) {
    w.Field(" erased=\"", static_cast<int64_t>(d.erased));
    w.Lit("/>\n");
    return w.size();
  }
  w.Field(" allowed=\"", d.allowed ? 1 : 0);
  w.Field(" count=\"", d.count);
  w.Field(" limit=\"", d.limit);
  w.Field(" remaining=\"", d.remaining);
  DigitsMemo reset;
  w.Lit(" reset=\"");
  reset.Int(w, d.reset);
  w.Char('"');
  w.Field(" retry_after=\"", d.retry_after);
  if (d.shadow) {
    w.Lit(" shadow=\"1\"");
    if (d.would_deny) w.Lit(" would_deny=\"1\"");
  }
  if (cmd == Cmd::kGet || cmd == Cmd::kSet) w.Field(" found=\"", d.found ? 1 : 0);
  WriteLeaseAndReservation(cmd, d, w);
  if (d.nrules == 0) {
    w.Lit("/>\n");
    return w.size();
  }
  w.Lit(">\n");
  for (uint32_t i = 0; i < d.nrules && i < kMaxRulesPerBiz; ++i) {
    const RuleResult& r = d.rules[i];
    w.Lit("  <rule algo=\"");
    w.Str(AlgoName(r.algo));
    w.Char('"');
    w.Field(" interval=\"", r.interval);
    w.Field(" count=\"", r.count);
    w.Field(" limit=\"", r.limit);
    w.Field(" remaining=\"", r.remaining);
    w.Lit(" reset=\"");
    reset.Int(w, r.reset);
    w.Char('"');
    w.Field(" allowed=\"", r.allowed ? 1 : 0);
    if (r.debt != 0) w.Field(" debt=\"", r.debt);
    if (r.name[0]) {
      // Names are checked to [A-Za-z0-9_.-] by map.xml's parser: no escaping.
      w.Lit(" name=\"");
      w.Str(r.name);
      w.Char('"');
    }
    w.Lit("/>\n");
  }
  w.Lit("</response>\n");
  return w.size();
}

void AppendDecision(Cmd cmd, const Decision& d, std::string* out) {
  char buf[kMaxDecisionBytes];
  out->append(buf, WriteDecision(cmd, d, buf));
}

void AppendBatchCompact(bool allowed, std::span<const WireRequest> reqs, std::span<const Decision> decisions,
                        std::string* out) {
  out->append(allowed ? "<batch allowed=\"1\" answer=\"compact\">\n" : "<batch allowed=\"0\" answer=\"compact\">\n");
  // The members are written into a stack buffer, appended whenever it
  // might not hold one more (an element has three integers of at most 20
  // digits). Members often share their reset time (one window): its
  // digits are kept and copied rather than formatted again.
  constexpr size_t kChunk = 4096, kMaxElement = 320;  // with a lease's and a reservation's ids
  char buf[kChunk];
  DigitsMemo reset;
  BufWriter w(buf);
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& d = decisions[i];
    if (!d.ok()) {
      w.AppendTo(out);
      w = BufWriter(buf);
      out->append("<m code=\"");
      AppendInt(HttpStatusFor(d.status), out);
      out->append("\" msg=\"");
      AppendXmlEscaped(d.status.message(), out);
      out->append("\"/>\n");
      continue;
    }
    if (w.size() > kChunk - kMaxElement) {
      w.AppendTo(out);
      w = BufWriter(buf);
    }
    w.Lit(d.allowed ? "<m a=\"1\" r=\"" : "<m a=\"0\" r=\"");
    w.Int(d.remaining);
    w.Lit("\" t=\"");
    reset.Int(w, d.reset);
    if (!d.allowed) {
      w.Lit("\" w=\"");
      w.Int(d.retry_after);
    }
    w.Char('"');
    WriteLeaseAndReservation(reqs[i].cmd, d, w);
    w.Lit("/>\n");
  }
  w.AppendTo(out);
  out->append("</batch>\n");
}

void AppendBatch(bool allowed, std::span<const WireRequest> reqs, std::span<const Decision> decisions,
                 std::string* out) {
  out->append("<batch allowed=\"").append(allowed ? "1" : "0").append("\">\n");
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (!decisions[i].ok()) AppendError(HttpStatusFor(decisions[i].status), decisions[i].status.message(), out);
    else AppendDecision(reqs[i].cmd, decisions[i], out);
  }
  out->append("</batch>\n");
}

void AppendStats(const StoreStats& st, const std::vector<BizStats>& bizzes, const ClusterView* cluster,
                 std::string* out, const ReplicaLinksView* links) {
  out->append("<response code=\"0\">\n  <store");
  Attr("files", st.geometry.files, out);
  Attr("keynodes", st.geometry.keynodes, out);
  Attr("chain", st.geometry.chain, out);
  Attr("slots", static_cast<int64_t>(st.slots), out);
  Attr("nodes_used", static_cast<int64_t>(st.total.nodes_used), out);
  Attr("slots_used", static_cast<int64_t>(st.total.slots_used), out);
  char occ[32];
  double pct = st.slots ? 100.0 * static_cast<double>(st.total.slots_used) / static_cast<double>(st.slots) : 0.0;
  int n = std::snprintf(occ, sizeof occ, "%.2f", pct);
  out->append(" occupancy_pct=\"").append(occ, static_cast<size_t>(n)).push_back('"');
  Attr("evictions_stale", static_cast<int64_t>(st.total.evictions_stale), out);
  Attr("evictions_live", static_cast<int64_t>(st.total.evictions_live), out);
  Attr("cuckoo_moves", static_cast<int64_t>(st.total.cuckoo_moves), out);
  Attr("lock_recoveries", static_cast<int64_t>(st.total.lock_recoveries), out);
  out->append("/>\n");
  if (cluster && cluster->ring) {
    out->append("  <cluster self=\"");
    AppendXmlEscaped(cluster->self, out);
    out->push_back('"');
    Attr("enforce", cluster->enforce ? 1 : 0, out);
    Attr("shards", static_cast<int64_t>(cluster->ring->shards().size()), out);
    if (cluster->replicas) {
      Attr("replicas", 1, out);
      const bool catching = cluster->catching_up != nullptr &&
                            std::atomic_ref<uint64_t>(const_cast<uint64_t&>(*cluster->catching_up)).load() != 0;
      Attr("catching_up", catching ? 1 : 0, out);
      if (links != nullptr) Attr("lag_ms", static_cast<int64_t>(links->lag_ms), out);
    }
    out->append(" digest=\"").append(cluster->ring->DigestText()).append("\">\n");
    for (size_t i = 0; i < cluster->ring->shards().size(); ++i) {
      const RingShard& s = cluster->ring->shards()[i];
      out->append("    <shard");
      Attr("weight", s.weight, out);
      if (links != nullptr && i < links->peers.size() && static_cast<long>(i) != cluster->self_index) {
        Attr("pending", static_cast<int64_t>(links->peers[i].pending), out);
        out->append(links->peers[i].up ? " link=\"up\"" : " link=\"down\"");
      }
      out->push_back('>');
      AppendXmlEscaped(s.name, out);
      out->append("</shard>\n");
    }
    out->append("  </cluster>\n");
  }
  for (const BizStats& b : bizzes) {
    out->append("  <biz");
    Attr("id", b.id, out);
    out->append(" name=\"");
    AppendXmlEscaped(b.name, out);
    out->push_back('"');
    if (b.days.empty()) {
      out->append("/>\n");
      continue;
    }
    out->append(">\n");
    // Newest first: the first <day> is today's once the biz saw traffic today.
    for (const BizStatsDay& day : b.days) {
      std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{day.day}}};
      char date[16];
      int dn = std::snprintf(date, sizeof date, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                             static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
      out->append("    <day date=\"").append(date, static_cast<size_t>(dn)).push_back('"');
      Attr("requests", static_cast<int64_t>(day.requests), out);
      Attr("allowed", static_cast<int64_t>(day.allowed), out);
      Attr("denied", static_cast<int64_t>(day.denied), out);
      Attr("new_keys", static_cast<int64_t>(day.new_keys), out);
      out->append("/>\n");
    }
    out->append("  </biz>\n");
  }
  out->append("</response>\n");
}

}  // namespace frs::server
