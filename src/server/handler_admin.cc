#include "server/handler.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "server/admin_auth.h"
#include "server/group_stats_xml.h"

namespace frs::server {

bool Handler::HandleMerges(int* status) {
  // Handoff: the members that share a receipt (one handoff batch) are merged
  // with one receipt node in one store transaction; each group is answered
  // on its own, and the sender keeps what was not acknowledged.
  std::vector<std::string_view> lines;
  lines.reserve(wire_.size());
  // allowed="1" only when every member was merged (or found merged before).
  static constexpr std::string_view kHead = "<batch allowed=\"1\">\n";
  body_.append(kHead);
  bool all_merged = true;
  for (size_t i = 0; i < wire_.size();) {
    size_t end = i;
    lines.clear();
    bool mixed = false;  // one receipt is one transaction: its members fold one way
    while (end < wire_.size() && wire_[end].receipt == wire_[i].receipt) {
      mixed = mixed || wire_[end].replace != wire_[i].replace;
      lines.push_back(wire_[end++].node);
    }
    auto merged = lines.size() > AdminEngine::kMaxMergeNodes
                      ? Result<bool>(Status::InvalidArgument("one receipt covers at most " +
                                                             std::to_string(AdminEngine::kMaxMergeNodes) + " nodes"))
                  : mixed ? Result<bool>(Status::InvalidArgument("the members of one receipt all say the same replace"))
                  : wire_[i].replace ? engine_->ReplaceNodes(lines, wire_[i].receipt)
                                     : engine_->MergeNodes(lines, wire_[i].receipt);
    all_merged = all_merged && merged.ok();
    for (size_t k = i; k < end; ++k) {
      body_.append("  ");
      if (!merged.ok()) {
        // A node that does not parse is the sender's fault, not ours.
        const Status& s = merged.status();
        AppendError(s.code() == Status::Code::kCorruption ? 400 : HttpStatusFor(s), s.message(), &body_);
        continue;
      }
      if (counters_) CounterAdd(merged.value() ? counters_->merged : counters_->merge_duplicates);
      body_.append(merged.value() ? "<response code=\"0\" merged=\"1\"/>\n" : "<response code=\"0\" merged=\"0\"/>\n");
    }
    i = end;
  }
  if (!all_merged) body_[kHead.find('1')] = '0';
  body_.append("</batch>\n");
  *status = 200;
  return true;
}

namespace {

// /stats takes each parameter once, as the GET forms do: of token=bad&token=T
// one would win silently (which one, the order decided).
class SeenNames {
 public:
  bool Again(std::string_view name) {
    if (std::find(names_, names_ + n_, name) != names_ + n_) return true;
    if (n_ < std::size(names_)) names_[n_++] = name;
    return false;
  }

 private:
  std::string_view names_[8];  // /stats knows 8 names; a 9th is refused as unknown
  size_t n_ = 0;
};

}  // namespace

void Handler::MergeStatsBy(std::string_view body, const std::string& receipt, int* status) {
  auto in = ParseGroupStats(body);
  if (!in.ok()) {
    ErrorBody(400, "POST /stats: " + in.status().message(), status);
    return;
  }
  Status s = engine_->MergeStatsBy(in.value(), receipt);
  if (!s.ok()) {
    ErrorBody(HttpStatusFor(s), "POST /stats: " + s.message(), status);
    return;
  }
  body_.clear();
  body_.append("<response code=\"0\" msg=\"merged\" groups=\"");
  body_.append(std::to_string(in.value().rows.size()));
  body_.append("\"/>\n");
  *status = 200;
}

void Handler::HandleStatsBy(const HttpHead& head, const char* base, std::string_view query, int* status) {
  GroupStatsQuery q;
  std::string token, receipt;
  bool have_biz = false, have_by = false;
  std::string buf;
  std::string_view name, raw;
  SeenNames seen;
  while (NextQueryParam(&query, &name, &raw)) {
    std::string_view value;
    if (!PercentDecode(raw, &buf, &value)) {
      ErrorBody(400, "/stats: parameter '" + std::string(name) + "' has a bad %-escape", status);
      return;
    }
    if (seen.Again(name)) {
      ErrorBody(400, "/stats: parameter '" + std::string(name.substr(0, 32)) + "' appears twice", status);
      return;
    }
    auto count = [&](uint64_t max, uint64_t* out) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
      return !value.empty() && ec == std::errc() && p == value.data() + value.size() && *out <= max;
    };
    uint64_t n = 0;
    if (name == "biz") {
      q.biz = std::string(value);
      have_biz = !value.empty();
    } else if (name == "by") {
      q.by = std::string(value);
      have_by = !value.empty();
    } else if (name == "day") {
      uint32_t day;
      if (!ParseDayText(value, &day)) {
        ErrorBody(400, "/stats: day '" + std::string(value.substr(0, 32)) + "' is not a YYYY-MM-DD date", status);
        return;
      }
      q.day = day;
    } else if (name == "value") {
      if (value.empty()) return ErrorBody(400, "/stats: value is empty: leave it out for every group", status);
      q.value = std::string(value);
    } else if (name == "top") {
      if (!count(1000000, &n)) {
        ErrorBody(400, "/stats: top '" + std::string(value.substr(0, 32)) + "' is not a count (0..1000000)", status);
        return;
      }
      q.top = static_cast<uint32_t>(n);
    } else if (name == "sketches") {
      // 0 or 1, as every other parameter is checked (yes, 2 read as 0).
      if (value != "0" && value != "1") {
        ErrorBody(400, "/stats: sketches '" + std::string(value.substr(0, 32)) + "' is not 0 or 1", status);
        return;
      }
      q.sketches = value == "1";
    } else if (name == "token") {
      token = std::string(value);
    } else if (name == "receipt" && head.method == HttpMethod::kPost) {
      receipt = std::string(value);
    } else {
      ErrorBody(400,
                "/stats: unknown parameter '" + std::string(name.substr(0, 32)) +
                    "' (biz, by, day, value, top, sketches, token; receipt with POST)",
                status);
      return;
    }
  }
  // The admin token, when srv.xml sets one: ?token=T or Authorization:
  // Bearer T. Without one, a read answers loopback peers only: the groups
  // are key-field values (user ids, say), for operators, not for whoever
  // reaches the port. A merge (POST) changes counts: like every admin
  // command, it is refused when srv.xml sets none.
  std::string_view auth(base + head.auth_off, head.auth_len);
  if (token.empty()) token = std::string(BearerToken(auth));
  const AdminAuth allowed = head.method == HttpMethod::kPost ? CheckAdminToken(opts_.admin_token, token)
                                                             : CheckAdminRead(opts_.admin_token, token, peer_);
  if (allowed == AdminAuth::kDisabled && head.method != HttpMethod::kPost) {
    ErrorBody(403,
              "/stats answers other hosts only with the admin token, and srv.xml sets none: set <admin token> "
              "and send token=T or Authorization: Bearer T, or ask from this host",
              status);
    return;
  }
  if (allowed != AdminAuth::kOk) {
    ErrorBody(403, "/stats needs the admin token (token=T or Authorization: Bearer T), and it is missing or wrong",
              status);
    return;
  }
  if (head.method == HttpMethod::kPost)
    return MergeStatsBy(std::string_view(base + head.body_off, head.body_len), receipt, status);
  if (!have_biz || !have_by) {
    ErrorBody(400, "/stats needs biz=B and by=F[,F...]", status);
    return;
  }
  auto st = engine_->StatsBy(q);
  if (!st.ok()) {
    ErrorBody(HttpStatusFor(st.status()), st.status().message(), status);
    return;
  }
  // Sized before it is built: the worker holds the whole body until it is sent.
  if (const size_t bytes = GroupStatsXmlBound(st.value()); bytes > opts_.max_stats_bytes) {
    ErrorBody(413,
              "/stats: the answer would take up to " + std::to_string(bytes) + " bytes (" +
                  std::to_string(st->rows.size()) + " groups" + (q.sketches ? " with sketches" : "") + "), above the " +
                  std::to_string(opts_.max_stats_bytes) + " an answer may: ask for fewer groups with top=N or value=V",
              status);
    return;
  }
  body_.clear();
  AppendGroupStats(st.value(), &body_);
  *status = 200;
}

}  // namespace frs::server
