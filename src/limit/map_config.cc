#include "limit/map_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <pugixml.hpp>
#include <tuple>
#include <unordered_map>

#include "limit/concurrency.h"
#include "limit/reservation.h"
#include "limit/sliding_window.h"
#include "limit/token_bucket.h"
#include "limit/xml_shape.h"
#include "os/text_file.h"
#include "stats/field_stats.h"
#include "stats/group_table.h"

namespace frs::limit {
namespace {

bool ParseUint(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& path) : text_(text), path_(path), lines_(path, text) {}

  Result<MapConfig> Run() {
    if (auto p = FindNulProblem(text_)) return Fail(static_cast<int>(lines_.LineOf(p->offset)), p->message);
    pugi::xml_document doc;
    pugi::xml_parse_result pr = doc.load_buffer(text_.data(), text_.size(), kConfigXmlFlags, pugi::encoding_utf8);
    if (!pr) return Fail(static_cast<int>(lines_.LineOf(pr.offset)), std::string("malformed XML: ") + pr.description());
    pugi::xml_node root = doc.document_element();
    if (!root) return Fail(1, "no <map> element");
    if (auto p = FindXmlShapeProblem(doc, "map")) return Fail(static_cast<int>(lines_.LineOf(p->offset)), p->message);
    if (std::string_view(root.name()) != "map") {
      return Fail(LineOf(root), "the root element is <" + std::string(root.name()) + ">, expected <map>");
    }
    if (pugi::xml_attribute a = root.first_attribute()) {
      return Fail(LineOf(root), "<map>: unknown attribute '" + std::string(a.name()) + "'");
    }
    MapConfig map;
    map.path = path_;
    std::unordered_map<uint16_t, int> id_line;
    std::unordered_map<std::string, int> name_line;
    for (pugi::xml_node n : root.children()) {
      Status s = CheckElement(n, "biz", "<map>");
      if (!s.ok()) return s;
      BizConfig biz;
      s = ParseBiz(n, &biz);
      if (!s.ok()) return s;
      if (auto it = id_line.find(biz.id); it != id_line.end()) {
        return Fail(biz.line, "duplicate biz id " + std::to_string(biz.id) + " (first used at line " +
                                  std::to_string(it->second) + ")");
      }
      if (auto it = name_line.find(biz.name); it != name_line.end()) {
        return Fail(biz.line,
                    "duplicate biz name '" + biz.name + "' (first used at line " + std::to_string(it->second) + ")");
      }
      id_line[biz.id] = biz.line;
      name_line[biz.name] = biz.line;
      map.bizzes.push_back(std::move(biz));
    }
    return map;
  }

 private:
  int LineOf(const pugi::xml_node& n) const { return static_cast<int>(lines_.LineOf(n.offset_debug())); }

  Status Fail(int line, const std::string& msg) const {
    return Status::InvalidArgument(path_ + ":" + std::to_string(line) + ": " + msg);
  }

  Status CheckElement(const pugi::xml_node& n, const char* want, const char* parent) const {
    if (n.type() == pugi::node_element && std::string_view(n.name()) == want) return Status::OK();
    if (n.type() == pugi::node_element) {
      return Fail(LineOf(n),
                  "unexpected element <" + std::string(n.name()) + "> in " + parent + " (expected <" + want + ">)");
    }
    if (n.type() == pugi::node_pcdata || n.type() == pugi::node_cdata) {
      return Fail(LineOf(n), std::string("unexpected text in ") + parent);
    }
    return Fail(LineOf(n), std::string("unexpected node in ") + parent);
  }

  Status ParseBiz(const pugi::xml_node& n, BizConfig* biz) {
    biz->line = LineOf(n);
    bool have_id = false, have_name = false;
    int64_t reservations = -1;  // not given: the default, as far as the node has room
    for (pugi::xml_attribute a : n.attributes()) {
      std::string_view name = a.name(), value = a.value();
      if (name == "id") {
        uint64_t v;
        if (!ParseUint(value, 65535, &v) || v == 0) {
          return Fail(biz->line, "biz id '" + std::string(value) + "' is out of range (1..65535)");
        }
        biz->id = static_cast<uint16_t>(v);
        have_id = true;
      } else if (name == "name") {
        if (!ValidBizName(value)) {
          return Fail(biz->line, "biz name '" + std::string(value) +
                                     "' is invalid (1..64 of letters, digits, '_', '.', '-', not only digits)");
        }
        biz->name = std::string(value);
        have_name = true;
      } else if (name == "mode") {
        if (!ParseMode(value, &biz->mode)) {
          return Fail(biz->line, "unknown mode '" + std::string(value) + "' (enforce, shadow or off)");
        }
      } else if (name == "keys") {
        if (value != "keep" && value != "fit") {
          return Fail(biz->line,
                      "keys '" + std::string(value) +
                          "' is neither 'keep' (keep every key's text) nor 'fit' (keep what fits, the default)");
        }
        biz->keep_keys = value == "keep";
      } else if (name == "fields") {
        Status s = ParseFields(value, biz);
        if (!s.ok()) return s;
      } else if (name == "unit") {
        if (!ValidUnit(value)) {
          return Fail(biz->line, "unit '" + std::string(value) +
                                     "' is invalid (1..32 of a-z, 0-9 and '-', starting with a letter, e.g. "
                                     "'content-bytes' or 'points')");
        }
        biz->unit = value == "requests" ? std::string() : std::string(value);
      } else if (name == "separator") {
        if (value.size() != 1 || !std::ispunct(static_cast<unsigned char>(value[0])))
          return Fail(biz->line,
                      "separator '" + std::string(value) + "' must be one punctuation character, e.g. '|' or ':'");
        biz->separator = value[0];
      } else if (name == "reservations") {
        uint64_t v;
        if (!ParseUint(value, Reservations::kMaxPerKey, &v))
          return Fail(biz->line, "reservations '" + std::string(value) + "' is out of range (0.." +
                                     std::to_string(Reservations::kMaxPerKey) + " held at once per key; 0: none)");
        reservations = static_cast<int64_t>(v);
      } else {
        return Fail(biz->line, "<biz>: unknown attribute '" + std::string(name) + "'");
      }
    }
    if (!have_id) return Fail(biz->line, "<biz>: missing attribute 'id'");
    if (!have_name) return Fail(biz->line, "<biz id=\"" + std::to_string(biz->id) + "\">: missing attribute 'name'");
    const std::string who = "biz '" + biz->name + "'";
    for (pugi::xml_node r : n.children()) {
      if (r.type() == pugi::node_element && std::string_view(r.name()) == "stats") {
        Status s = ParseStats(r, biz);
        if (!s.ok()) return s;
        continue;
      }
      Status s = CheckElement(r, "rule", ("<biz name=\"" + biz->name + "\">").c_str());
      if (!s.ok()) return s;
      if (biz->nrules == kMaxRulesPerBiz) {
        return Fail(LineOf(r), who + " has more than " + std::to_string(kMaxRulesPerBiz) +
                                   " rules (a node holds at most " + std::to_string(kMaxRulesPerBiz) + ")");
      }
      RuleSpec& spec = biz->rules[biz->nrules];
      s = ParseRule(r, &spec);
      if (!s.ok()) return s;
      if (spec.name[0] == '\0') {
        // BIZ_N, the biz part cut so the whole fits.
        const std::string n = "_" + std::to_string(biz->nrules + 1);
        const std::string def = biz->name.substr(0, kRuleNameBytes - 1 - n.size()) + n;
        def.copy(spec.name, def.size());
        spec.name[def.size()] = '\0';
      }
      for (uint32_t k = 0; k < biz->nrules; ++k)
        if (spec.algo == Algo::kConcurrency && biz->rules[k].algo == Algo::kConcurrency)
          return Fail(spec.line, who + " has two concurrency rules (a biz holds one: its leases' ids name no rule)");
      for (uint32_t k = 0; k < biz->nrules; ++k)
        if (std::string_view(biz->rules[k].name) == spec.name)
          return Fail(spec.line, who + ": two rules are named '" + std::string(spec.name) + "'");
      // A node tells its rules' blocks apart by their tags (algorithm and
      // interval), not by name (docs/rules.md, "How a rule finds its
      // state"): two alike would trade their counts when the map is
      // reordered, and one would lose its count to the other when a reload
      // gave one of them the other's interval. Two alike in every respect a
      // window has are one limit, and refused; a calendar day in the local
      // zone and one in UTC are two limits, and so are two token buckets of
      // one interval but other rates: those are told apart by their order,
      // which a reload may not change (CheckRuleOrder).
      for (uint32_t k = 0; k < biz->nrules; ++k)
        if (spec.algo != Algo::kConcurrency && spec.algo != Algo::kTokenBucket &&
            TagIdentity(biz->rules[k].tag) == TagIdentity(spec.tag) && biz->rules[k].utc == spec.utc &&
            biz->rules[k].epoch == spec.epoch && biz->rules[k].zone == spec.zone)
          return Fail(spec.line, who + ": rules '" + std::string(biz->rules[k].name) + "' and '" +
                                     std::string(spec.name) + "' are both " + AlgoName(spec.algo) + " over " +
                                     std::to_string(spec.interval) +
                                     " s; a key's node tells its rules apart by algorithm and interval, so two "
                                     "alike could trade or lose their counts at a reload: keep the stricter one, "
                                     "or give one another interval");
      spec.offset = biz->state_bytes;
      biz->state_bytes += spec.bytes;
      if (spec.algo == Algo::kConcurrency) biz->lease_rule = static_cast<int32_t>(biz->nrules);
      ++biz->nrules;
    }
    if (biz->nrules == 0) return Fail(biz->line, who + " has no <rule>");
    if (biz->state_bytes > kMaxStateBytes) {
      return Fail(biz->line, who + ": its rules need " + std::to_string(biz->state_bytes) +
                                 " state bytes, more than a node holds (" + std::to_string(kMaxStateBytes) + ")");
    }
    return FinishReservations(biz, reservations);
  }

  // The reservations a key of this biz may hold at once (limit/reservation.h):
  // given, or kDefaultPerKey as far as the node has room beside the rules'
  // blocks. A biz of concurrency rules alone takes none (n counts nothing).
  Status FinishReservations(BizConfig* biz, int64_t given) const {
    bool rate = false;
    for (uint32_t i = 0; i < biz->nrules; ++i) rate |= biz->rules[i].algo != Algo::kConcurrency;
    const uint32_t room = Reservations::Cap(kMaxStateBytes - biz->state_bytes);
    const std::string who = "biz '" + biz->name + "'";
    if (given < 0) {
      biz->res_cap = rate ? std::min(Reservations::kDefaultPerKey, room) : 0;
    } else {
      if (given > 0 && !rate)
        return Fail(biz->line, who + ": reservations need a rate rule (a concurrency rule counts no n)");
      if (given > room)
        return Fail(biz->line, who + ": reservations '" + std::to_string(given) + "' need " +
                                   std::to_string(Reservations::Bytes(static_cast<uint32_t>(given))) +
                                   " bytes beside its rules' " + std::to_string(biz->state_bytes) + "; a node holds " +
                                   std::to_string(kMaxStateBytes) + ": at most " + std::to_string(room) + " here");
      biz->res_cap = static_cast<uint32_t>(given);
      biz->res_explicit = true;
    }
    biz->res_bytes = Reservations::Bytes(biz->res_cap);
    return Status::OK();
  }

  Status ParseFields(std::string_view value, BizConfig* biz) {
    biz->fields.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = value.find(',', start);
      const std::string_view f = value.substr(start, comma == std::string_view::npos ? value.npos : comma - start);
      const bool ok = !f.empty() && f.size() <= 32 && std::all_of(f.begin(), f.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (!ok)
        return Fail(biz->line, "fields '" + std::string(value) +
                                   "': a field name is 1..32 of A-Z a-z 0-9 _, names separated by ','");
      if (std::find(biz->fields.begin(), biz->fields.end(), f) != biz->fields.end())
        return Fail(biz->line, "fields '" + std::string(value) + "' names '" + std::string(f) + "' twice");
      biz->fields.emplace_back(f);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (biz->fields.size() > kMaxKeyFields)
      return Fail(biz->line,
                  "fields '" + std::string(value) + "' has more than " + std::to_string(kMaxKeyFields) + " fields");
    return Status::OK();
  }

  // A list of field names of `biz` ("app,iface") as indexes.
  Status FieldList(int line, const char* attr, std::string_view value, const BizConfig& biz,
                   std::vector<uint8_t>* out) {
    out->clear();
    size_t start = 0;
    while (true) {
      const size_t comma = value.find(',', start);
      const std::string_view f = value.substr(start, comma == std::string_view::npos ? value.npos : comma - start);
      auto it = std::find(biz.fields.begin(), biz.fields.end(), f);
      if (it == biz.fields.end())
        return Fail(line, std::string("<stats ") + attr + "=\"" + std::string(value) + "\">: '" + std::string(f) +
                              "' is not one of the biz's fields (" +
                              (biz.fields.empty() ? std::string("it names none: add fields=\"...\" to <biz>")
                                                  : JoinFields(biz.fields)) +
                              ")");
      const uint8_t idx = static_cast<uint8_t>(it - biz.fields.begin());
      if (std::find(out->begin(), out->end(), idx) != out->end())
        return Fail(line, std::string("<stats ") + attr + "=\"" + std::string(value) + "\"> names '" + std::string(f) +
                              "' twice");
      out->push_back(idx);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return Status::OK();
  }
  static std::string JoinFields(const std::vector<std::string>& fields) {
    std::string s;
    for (const std::string& f : fields) s += (s.empty() ? "" : ",") + f;
    return s;
  }

  Status ParseStats(const pugi::xml_node& n, BizConfig* biz) {
    StatsSpec spec;
    spec.line = LineOf(n);
    bool have_by = false, have_days = false, have_groups = false;
    std::string_view by_value, distinct_value;
    uint64_t v;
    for (pugi::xml_attribute a : n.attributes()) {
      std::string_view name = a.name(), value = a.value();
      if (name == "by") {
        by_value = value;
        have_by = true;
      } else if (name == "distinct") {
        distinct_value = value;
      } else if (name == "days") {
        if (!ParseUint(value, kMaxStatsDays, &v) || v == 0)
          return Fail(spec.line, "<stats days=\"" + std::string(value) + "\"> is out of range (1..366)");
        spec.days = static_cast<uint32_t>(v);
        have_days = true;
      } else if (name == "groups") {
        if (!ParseUint(value, kMaxStatsGroups, &v) || v == 0)
          return Fail(spec.line, "<stats groups=\"" + std::string(value) + "\"> is out of range (1..1000000)");
        spec.groups = static_cast<uint32_t>(v);
        have_groups = true;
      } else {
        return Fail(spec.line, "<stats>: unknown attribute '" + std::string(name) + "'");
      }
    }
    if (!have_by) return Fail(spec.line, "<stats>: missing attribute 'by'");
    if (n.first_child()) return Fail(spec.line, "<stats> takes no content");
    Status s = FieldList(spec.line, "by", by_value, *biz, &spec.by);
    if (!s.ok()) return s;
    if (!distinct_value.empty()) {
      s = FieldList(spec.line, "distinct", distinct_value, *biz, &spec.distinct);
      if (!s.ok()) return s;
    }
    spec.by_text = std::string(by_value);
    for (StatsSpec& other : biz->stats) {
      // The same fields in another order are the same groups: one table.
      std::vector<uint8_t> a = other.by, b = spec.by;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b) continue;
      for (uint8_t d : spec.distinct)
        if (std::find(other.distinct.begin(), other.distinct.end(), d) == other.distinct.end())
          other.distinct.push_back(d);
      if (have_days) other.days = std::max(other.days, spec.days);
      if (have_groups) other.groups = std::max(other.groups, spec.groups);
      return CheckDistinct(other, *biz);
    }
    if (biz->stats.size() == kMaxStatsPerBiz)
      return Fail(spec.line, "biz '" + biz->name + "' has more than " + std::to_string(kMaxStatsPerBiz) + " <stats>");
    biz->stats.push_back(std::move(spec));
    return CheckDistinct(biz->stats.back(), *biz);
  }

  Status CheckDistinct(const StatsSpec& spec, const BizConfig& biz) const {
    for (uint8_t d : spec.distinct)
      if (std::find(spec.by.begin(), spec.by.end(), d) != spec.by.end())
        return Fail(spec.line, "<stats by=\"" + spec.by_text + "\">: distinct '" + biz.fields[d] +
                                   "' is one of the by fields (each group has one value of it)");
    if (spec.distinct.size() > stats::kMaxDistinctFields)
      return Fail(spec.line, "<stats by=\"" + spec.by_text + "\"> counts more than " +
                                 std::to_string(stats::kMaxDistinctFields) + " distinct fields");
    return Status::OK();
  }

  // zone="UTC" and "epoch" need no file; another name is an IANA zone
  // (TimeZone::Load reads each once per process: rules naming one zone
  // share it).
  Status ParseZone(std::string_view value, RuleSpec* spec) {
    if (value.empty())
      return Fail(spec->line, "rule zone is empty (an IANA name such as America/New_York, or UTC, or epoch)");
    if (value == "UTC" || value == "epoch") {
      spec->utc = true;
      spec->epoch = value == "epoch";
      return Status::OK();
    }
    auto zone = TimeZone::Load(value);
    if (!zone.ok())
      return Fail(spec->line, "rule zone: " + zone.status().message() +
                                  " (an IANA name such as America/New_York, or UTC, or epoch)");
    spec->zone = std::move(zone).value();
    return Status::OK();
  }

  Status ParseRule(const pugi::xml_node& n, RuleSpec* spec) {
    spec->line = LineOf(n);
    if (n.first_child()) return Fail(spec->line, "<rule> takes no content");
    bool have_interval = false, have_max = false, have_burst = false, have_borrow = false, have_lease = false;
    std::string_view not_concurrency;  // the first attribute given that a concurrency rule does not take
    uint64_t v;
    for (pugi::xml_attribute a : n.attributes()) {
      std::string_view name = a.name(), value = a.value();
      if (not_concurrency.empty() && (name == "borrow" || name == "burst" || name == "overrun" || name == "zone"))
        not_concurrency = name;
      if (name == "algo") {
        if (!ParseAlgo(value, &spec->algo)) {
          return Fail(spec->line, "unknown algo '" + std::string(value) +
                                      "' (fixed, calendar, sliding, token_bucket or concurrency)");
        }
      } else if (name == "interval") {
        if (!ParseUint(value, kMaxInterval, &v) || v == 0) {
          return Fail(spec->line, "rule interval " + BadNumber(value) + " (1..31536000 s)");
        }
        spec->interval = static_cast<uint32_t>(v);
        have_interval = true;
      } else if (name == "max" || name == "burst") {
        if (!ParseUint(value, kMaxUses, &v) || v == 0) {
          // A concurrency rule's max has its own range, whichever attribute comes first.
          if (name == "max" && std::string_view(n.attribute("algo").value()) == "concurrency")
            return Fail(spec->line, ConcurrencyMaxOutOfRange(value));
          return Fail(spec->line, "rule " + std::string(name) + " " + BadNumber(value) + " (1..2147483647)");
        }
        (name == "max" ? spec->max : spec->burst) = static_cast<int64_t>(v);
        (name == "max" ? have_max : have_burst) = true;
      } else if (name == "name") {
        if (value.empty() || value.size() >= kRuleNameBytes || !ValidBizName(std::string(value) + "_"))
          return Fail(spec->line, "rule name '" + std::string(value) + "' must be 1.." +
                                      std::to_string(kRuleNameBytes - 1) + " of A-Z a-z 0-9 _ . -");
        value.copy(spec->name, value.size());
        spec->name[value.size()] = '\0';
        spec->named = true;
      } else if (name == "borrow") {
        if (!ParseUint(value, kMaxUses, &v)) {
          return Fail(spec->line, "rule borrow '" + std::string(value) + "' is out of range (0..2147483647)");
        }
        spec->borrow = static_cast<int64_t>(v);
        have_borrow = true;
      } else if (name == "lease") {
        if (!ParseUint(value, Concurrency::kMaxLeaseS, &v) || v == 0)
          return Fail(spec->line, "rule lease '" + std::string(value) + "' is out of range (1.." +
                                      std::to_string(Concurrency::kMaxLeaseS) + " s)");
        spec->interval = static_cast<uint32_t>(v);
        have_lease = true;
      } else if (name == "overrun") {
        if (value == "charge") spec->overrun = Overrun::kCharge;
        else if (value == "limit") spec->overrun = Overrun::kLimit;
        else if (value == "estimate") spec->overrun = Overrun::kEstimate;
        else
          return Fail(spec->line, "rule overrun '" + std::string(value) +
                                      "' is not charge (a settle above its estimate charges all, the default), "
                                      "limit (as far as the limit allows) or estimate (no more than the estimate)");
      } else if (name == "zone") {
        if (Status s = ParseZone(value, spec); !s.ok()) return s;
      } else {
        return Fail(spec->line, "<rule>: unknown attribute '" + std::string(name) + "'");
      }
    }
    if (spec->algo == Algo::kConcurrency)
      return FinishConcurrency(spec, have_interval, have_lease, have_max, not_concurrency);
    if (have_lease)
      return Fail(spec->line, std::string("lease is only for concurrency, not algo '") + AlgoName(spec->algo) + "'");
    if (!have_interval) return Fail(spec->line, "<rule>: missing attribute 'interval'");
    if (!have_max) return Fail(spec->line, "<rule>: missing attribute 'max'");
    bool windows = spec->algo == Algo::kFixed || spec->algo == Algo::kCalendar;
    if (have_borrow && !windows) {
      return Fail(spec->line, std::string("borrow needs windows: algo '") + AlgoName(spec->algo) +
                                  "' has none (use fixed or calendar)");
    }
    if ((spec->utc || spec->zone) && spec->algo != Algo::kCalendar)
      return Fail(spec->line, std::string("zone is only for calendar, not algo '") + AlgoName(spec->algo) + "'");
    if (have_burst && spec->algo != Algo::kTokenBucket) {
      return Fail(spec->line, std::string("burst is only for token_bucket, not algo '") + AlgoName(spec->algo) + "'");
    }
    if (!have_burst) spec->burst = spec->max;
    if (spec->algo == Algo::kTokenBucket) {
      // The bucket keeps how far its refill is ahead of now, at most
      // kMaxAheadMs (~34 years); a bucket whose refill of burst takes longer
      // would be clipped there and never run dry.
      const __int128 refill_ms = __int128{spec->burst} * spec->interval * 1000 / spec->max;
      if (refill_ms > TokenBucket::kMaxAheadMs)
        return Fail(spec->line,
                    "token_bucket: refilling burst=" + std::to_string(spec->burst) +
                        " at max=" + std::to_string(spec->max) + " per interval=" + std::to_string(spec->interval) +
                        " s takes " + std::to_string(static_cast<int64_t>(refill_ms / 86400000 / 365)) +
                        " years, more than the " + std::to_string(TokenBucket::kMaxAheadMs / 86400000 / 365) +
                        " a bucket can hold: lower burst or interval, or raise max");
    }
    spec->bytes = BlockBytes(spec->algo, spec->max, spec->interval);
    spec->tag = BlockTag(spec->algo, spec->max, spec->interval);
    return Status::OK();
  }

  // What is wrong with a number attribute ParseUint refused: "'3.5' is not
  // a whole number", "'' is empty", "'0' is out of range".
  static std::string BadNumber(std::string_view value) {
    const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
    return "'" + std::string(value) + "' " +
           (value.empty() ? "is empty"
            : digits      ? "is out of range"
                          : "is not a whole number");
  }

  static std::string ConcurrencyMaxOutOfRange(std::string_view value) {
    return "concurrency max " + BadNumber(value) + " (1.." + std::to_string(Concurrency::kMaxLeases) +
           ": a node holds at most that many leases of one key)";
  }

  // algo="concurrency" max="N" lease="S": N leases held at once, each for
  // S seconds unless released or renewed. Its block holds at most
  // Concurrency::kMaxLeases (a node's state bounds it).
  // `other`: the first attribute given that only rate rules take (even
  // with its default value: it says the map means something else).
  Status FinishConcurrency(RuleSpec* spec, bool have_interval, bool have_lease, bool have_max,
                           std::string_view other) const {
    if (have_interval) return Fail(spec->line, "concurrency takes lease=\"S\" (how long a lease holds), not interval");
    if (!have_lease) return Fail(spec->line, "<rule algo=\"concurrency\">: missing attribute 'lease'");
    if (!have_max) return Fail(spec->line, "<rule>: missing attribute 'max'");
    if (!other.empty())
      return Fail(spec->line, "concurrency takes max and lease only (no borrow, zone, burst or overrun): '" +
                                  std::string(other) + "' given");
    if (spec->max > Concurrency::kMaxLeases)
      return Fail(spec->line, ConcurrencyMaxOutOfRange(std::to_string(spec->max)));
    spec->burst = spec->max;
    spec->bytes = BlockBytes(spec->algo, spec->max, spec->interval);
    spec->tag = BlockTag(spec->algo, spec->max, spec->interval);
    return Status::OK();
  }

  std::string_view text_;
  const std::string& path_;
  os::LineIndex lines_;
};

}  // namespace

bool BizConfig::CompactNodes() const {
  if (nrules != 1 || keep_keys) return false;
  const RuleSpec& r = rules[0];
  switch (r.algo) {
    case Algo::kFixed:
    case Algo::kCalendar: return r.borrow == 0;
    case Algo::kTokenBucket: return r.max < 65536 && r.interval < (1u << 20);
    case Algo::kSliding:
    case Algo::kConcurrency: return false;
  }
  return false;
}

uint32_t BizConfig::NodeSlotsNeeded() const {
  // Reservations asked for by name count: a geometry that cannot hold
  // them is refused (frsd -t). The default ones take room only in nodes
  // that hold one, and a store that has none answers such an acquire 503.
  const uint32_t res = res_explicit ? res_bytes : 0;
  return CompactNodes() && res == 0 ? 1 : NodeSlots(state_bytes + res, keep_keys ? kMaxKeyBytes : 0);
}

uint64_t StatsDescriptors(const MapConfig& map) {
  uint64_t tables = 0;
  for (const BizConfig& b : map.bizzes) tables += b.stats.size();
  return tables * stats::kOpenDaysPerTable;
}

bool BizConfig::SameLayout(const BizConfig& o) const {
  if (nrules != o.nrules) return false;
  for (uint32_t i = 0; i < nrules; ++i) {
    if (rules[i].tag != o.rules[i].tag) return false;
  }
  return true;
}

bool ValidBizName(std::string_view name) {
  if (name.empty() || name.size() > kMaxBizNameBytes) return false;
  bool digits_only = true;
  for (char c : name) {
    bool digit = c >= '0' && c <= '9';
    bool ok = digit || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
    digits_only = digits_only && digit;
  }
  return !digits_only;
}

bool ValidUnit(std::string_view unit) {
  if (unit.empty() || unit.size() > kMaxUnitBytes || unit[0] < 'a' || unit[0] > 'z') return false;
  for (char c : unit)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Result<MapConfig> ParseMap(std::string_view text, const std::string& path) { return Parser(text, path).Run(); }

Result<MapConfig> LoadMapFile(const std::string& path) {
  Result<std::string> text = os::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseMap(text.value(), path);
}

namespace {
std::string ZoneOf(const RuleSpec& r) { return r.zone ? r.zone->name() : std::string(); }
// Two rules that count the same limit: every attribute a window or a
// bucket has, the name aside.
bool SameLimit(const RuleSpec& a, const RuleSpec& b) {
  return a.algo == b.algo && a.interval == b.interval && a.max == b.max && a.burst == b.burst && a.borrow == b.borrow &&
         a.utc == b.utc && a.epoch == b.epoch && a.overrun == b.overrun && ZoneOf(a) == ZoneOf(b);
}
// Rules named by their place (none given) that a reload moved, their
// names reading the same in the new order; only positions unnamed in both
// maps are judged (a named rule is told by its name, and one beside them
// hid their swap). Two calendar rules of one interval differ in their zone
// (the parser refuses two alike), which is their identity: one now where
// another's zone was, moved, edited or not. Token buckets have none but
// their limits: among the positions whose limit changed, the limit of one
// now standing at another, round a cycle, is a move (an edit that makes one
// equal to another is not; a moved rule also edited is not told from it).
bool UnnamedMoved(const std::vector<const RuleSpec*>& was, const std::vector<const RuleSpec*>& now) {
  const size_t n = std::min(was.size(), now.size());
  const auto unnamed = [&](size_t k) { return !now[k]->named && !was[k]->named; };
  const auto zone = [](const RuleSpec* r) { return std::make_tuple(r->utc, r->epoch, ZoneOf(*r)); };
  if (n == 0) return false;
  if (now.front()->algo == Algo::kCalendar) {
    for (size_t k = 0; k < n; ++k)
      for (size_t j = 0; j < n; ++j)
        if (j != k && unnamed(k) && unnamed(j) && zone(now[k]) == zone(was[j]) && zone(now[k]) != zone(was[k]))
          return true;
    return false;
  }
  // edge[k]: the positions j whose old limit now stands at k (k, j changed).
  std::vector<std::vector<size_t>> edge(n);
  const auto changed = [&](size_t k) { return unnamed(k) && !SameLimit(*now[k], *was[k]); };
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      if (j != k && changed(k) && changed(j) && SameLimit(*now[k], *was[j])) edge[k].push_back(j);
  // A cycle among at most kMaxRulesPerBiz positions: a walk from each.
  std::vector<int> state(n, 0);  // 0 unseen, 1 on the walk, 2 done
  const auto cycle = [&](auto&& self, size_t k) -> bool {
    state[k] = 1;
    for (size_t j : edge[k])
      if (state[j] == 1 || (state[j] == 0 && self(self, j))) return true;
    state[k] = 2;
    return false;
  };
  for (size_t k = 0; k < n; ++k)
    if (state[k] == 0 && cycle(cycle, k)) return true;
  return false;
}
// "'a', 'b' and 'c'".
std::string NamesText(const std::vector<const RuleSpec*>& rules) {
  std::string out;
  for (size_t i = 0; i < rules.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == rules.size() ? " and " : ", ") + "'" + rules[i]->name + "'";
  return out;
}
}  // namespace

Status CheckRuleOrder(const MapConfig& running, const MapConfig& next) {
  // The running bizzes by id (1..65535): one search each, not the whole
  // list per biz of the next map (quadratic in a map of 65,535 bizzes).
  std::vector<const BizConfig*> by_id(65536, nullptr);
  for (const BizConfig& b : running.bizzes) by_id[b.id] = &b;
  for (const BizConfig& nb : next.bizzes) {
    const BizConfig* ob = by_id[nb.id];
    if (ob == nullptr) continue;
    // The rules holding one (algorithm, interval), in their order.
    auto holders = [](const BizConfig& b, uint32_t identity) {
      std::vector<const RuleSpec*> rules;
      for (uint32_t i = 0; i < b.nrules; ++i)
        if (b.rules[i].algo != Algo::kConcurrency && TagIdentity(b.rules[i].tag) == identity)
          rules.push_back(&b.rules[i]);
      return rules;
    };
    for (const BizConfig* b : {ob, &nb})
      for (uint32_t i = 0; i < b->nrules; ++i) {
        const RuleSpec& r = b->rules[i];
        if (r.algo == Algo::kConcurrency) continue;
        const uint32_t identity = TagIdentity(r.tag);
        const auto was = holders(*ob, identity), now = holders(nb, identity);
        if (was.size() < 2 && now.size() < 2) continue;
        // The same names in the same places; or a rule named by its place
        // given a name in it, its limit unchanged (the way to stop
        // depending on places, which a reload refused).
        bool same_names = was.size() == now.size();
        for (size_t k = 0; same_names && k < was.size(); ++k)
          same_names = was[k]->named == now[k]->named ? std::string_view(was[k]->name) == now[k]->name
                                                      : !was[k]->named && SameLimit(*was[k], *now[k]);
        // Names that follow their place (the default BIZ_N) read the same
        // after a swap (UnnamedMoved).
        const bool moved = same_names && UnnamedMoved(was, now);
        if (same_names && !moved) continue;
        const auto& named = now.size() > 1 ? now : was;
        return Status::InvalidArgument(
            next.path + ": biz '" + nb.name + "': rules " + NamesText(named) +
            (named.size() == 2 ? " are both " : " are all ") + AlgoName(r.algo) + " over " +
            std::to_string(r.interval) + " s " + (now.size() > 1 ? "in this map" : "in the map running") +
            (moved ? " and are in another order than in the map running" : "") +
            ": a key's node tells such rules apart by their order, so this reload, which changes who holds that "
            "algorithm and interval or in what order, would trade or lose their counts; keep their order and "
            "intervals (a restart on such a map is not checked: docs/rules.md)");
      }
  }
  return Status::OK();
}

namespace {

bool SameRule(const RuleSpec& a, const RuleSpec& b) {
  return SameLimit(a, b) && std::strncmp(a.name, b.name, kRuleNameBytes) == 0;
}

bool SameStats(const StatsSpec& a, const StatsSpec& b) {
  return a.by == b.by && a.distinct == b.distinct && a.days == b.days && a.groups == b.groups;
}

bool SameBiz(const BizConfig& a, const BizConfig& b) {
  if (a.name != b.name || a.mode != b.mode || a.nrules != b.nrules || a.res_cap != b.res_cap ||
      a.keep_keys != b.keep_keys || a.unit != b.unit || a.fields != b.fields || a.separator != b.separator ||
      a.stats.size() != b.stats.size())
    return false;
  for (uint32_t i = 0; i < a.nrules; ++i)
    if (!SameRule(a.rules[i], b.rules[i])) return false;
  for (size_t i = 0; i < a.stats.size(); ++i)
    if (!SameStats(a.stats[i], b.stats[i])) return false;
  return true;
}

// Envoy's descriptors are bizzes of the composed map, named envoy.* (a name
// map.xml may not take): said apart, as <grpc config>'s, not map.xml's.
bool FromEnvoy(const BizConfig& b) { return b.name.starts_with("envoy."); }
// The bizzes Envoy's `limit` override counts under (envoy._override.UNIT)
// come and go with the first and last domain, and are no descriptor: left
// out of the words (a file moved out and back said 23 descriptors of 16).
bool EnvoyInternal(const BizConfig& b) { return b.name.starts_with("envoy._override."); }

}  // namespace

MapChange MapChangeWords(const MapConfig& running, const MapConfig& next, bool with_envoy) {
  std::vector<const BizConfig*> by_id(65536, nullptr);
  for (const BizConfig& b : running.bizzes) by_id[b.id] = &b;
  std::vector<bool> kept(65536, false);
  // [0] map.xml's bizzes, [1] Envoy's descriptors.
  std::vector<std::string> added[2], removed[2], changed[2];
  for (const BizConfig& nb : next.bizzes) {
    kept[nb.id] = true;
    if (with_envoy && EnvoyInternal(nb)) continue;
    const BizConfig* ob = by_id[nb.id];
    const int e = with_envoy && FromEnvoy(nb) ? 1 : 0;
    if (ob == nullptr) added[e].push_back(nb.name);
    else if (!SameBiz(*ob, nb)) changed[e].push_back(nb.name == ob->name ? nb.name : ob->name + " -> " + nb.name);
  }
  for (const BizConfig& b : running.bizzes)
    if (!kept[b.id] && !(with_envoy && EnvoyInternal(b))) removed[with_envoy && FromEnvoy(b) ? 1 : 0].push_back(b.name);
  const auto list = [](const char* what, const std::vector<std::string>& names) {
    if (names.empty()) return std::string();
    std::string s = std::to_string(names.size()) + " " + what + " (";
    for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > 8) s += ", and " + std::to_string(names.size() - 8) + " more";
    return s + ")";
  };
  MapChange out;
  for (int e = 0; e < 2; ++e) {
    std::string words;
    for (const std::string& part : {list("added", added[e]), list("removed", removed[e]), list("changed", changed[e])})
      if (!part.empty()) words += (words.empty() ? "" : ", ") + part;
    if (!words.empty()) (e == 0 ? out.bizzes : out.envoy) = (e == 0 ? "biz(es) " : "descriptor(s) ") + words;
  }
  return out;
}

std::vector<std::string> StatsTablesLeft(const MapConfig& running, const MapConfig& next) {
  std::vector<std::string> out;
  std::vector<const BizConfig*> by_id(65536, nullptr);
  for (const BizConfig& b : next.bizzes) by_id[b.id] = &b;
  for (const BizConfig& ob : running.bizzes) {
    const BizConfig* nb = by_id[ob.id];
    if (nb == nullptr || ob.stats.empty()) continue;  // a biz removed: its files go with its id's directory
    std::vector<std::string> now;
    for (const StatsSpec& t : nb->stats) now.push_back(t.DirName(nb->fields));
    for (const StatsSpec& t : ob.stats) {
      const std::string dir = t.DirName(ob.fields);
      if (std::find(now.begin(), now.end(), dir) != now.end()) continue;
      out.push_back(next.path + ": biz '" + nb->name + "': the statistics table " + dir +
                    " is no longer kept (a table of other fields starts from zero in a directory of its own); its "
                    "day files stay in stats/" +
                    std::to_string(ob.id) + "/" + dir +
                    "/, read by no query now: remove them when they are no longer wanted");
    }
  }
  return out;
}

namespace {

// The rate rules of `nb` that start from zero at a reload from `ob`, as
// MigrateState finds them ("rule 'x' starts", "rules 'x', 'y' start", or
// ""). Its two passes, over the running map's rules for the blocks a node
// holds: each rule takes an unused block of its own (algo, interval) first;
// a rule left without one then takes an unused block its name had (the rule
// history carries a name's counts across a changed interval; fixed and
// calendar windows take each other's). A log line's judgement, not the
// node's: the history's older identities of a name, and a block ConvertBlock
// refuses in a node, are not seen here.
std::string RateRulesStartedAnew(const BizConfig& ob, const BizConfig& nb) {
  bool used[kMaxRulesPerBiz] = {}, matched[kMaxRulesPerBiz] = {};
  for (uint32_t i = 0; i < nb.nrules; ++i)
    for (uint32_t j = 0; j < ob.nrules && !matched[i]; ++j)
      if (!used[j] && TagIdentity(ob.rules[j].tag) == TagIdentity(nb.rules[i].tag)) used[j] = matched[i] = true;
  for (uint32_t i = 0; i < nb.nrules; ++i)
    for (uint32_t j = 0; j < ob.nrules && !matched[i]; ++j) {
      const RuleSpec &was = ob.rules[j], &spec = nb.rules[i];
      const bool same_algo = was.algo == spec.algo || (IsWindowAlgo(was.algo) && IsWindowAlgo(spec.algo));
      if (!used[j] && same_algo && std::string_view(was.name) == std::string_view(spec.name))
        used[j] = matched[i] = true;
    }
  std::string out;
  uint32_t n = 0;
  for (uint32_t i = 0; i < nb.nrules; ++i) {
    if (matched[i] || nb.rules[i].algo == Algo::kConcurrency) continue;
    out += (out.empty() ? "'" : ", '") + std::string(nb.rules[i].name) + "'";
    ++n;
  }
  if (n == 0) return out;
  return (n == 1 ? "rule " : "rules ") + out + (n == 1 ? " starts" : " start");
}

// A sliding rule whose lowered max rebuilds its block (another size, or
// another interval with it: ConvertBlock runs on any other tag) keeps each
// key's newest `max` uses only: raised again within the window, it grants
// the dropped ones again. Within one block every use stays.
void SlidingUsesDropped(const BizConfig& ob, const BizConfig& nb, const std::string& who,
                        std::vector<std::string>* out) {
  for (uint32_t i = 0; i < nb.nrules; ++i) {
    const RuleSpec& spec = nb.rules[i];
    if (spec.algo != Algo::kSliding || !SlidingWindow::Exact(spec.max)) continue;
    for (uint32_t j = 0; j < ob.nrules; ++j) {
      const RuleSpec& was = ob.rules[j];
      if (was.algo != Algo::kSliding || std::string_view(was.name) != std::string_view(spec.name)) continue;
      if (spec.max < was.max && spec.tag != was.tag)
        out->push_back(who + ": sliding rule '" + std::string(spec.name) + "' max " + std::to_string(was.max) + " -> " +
                       std::to_string(spec.max) + ": each key keeps its " + std::to_string(spec.max) +
                       " newest uses (its block is rebuilt); raised again within the window, max counts only those and "
                       "grants the dropped ones again (up to " +
                       std::to_string(was.max - spec.max) + " more per key)");
      break;
    }
  }
}

// A token bucket's block keeps the low 16 bits of the max it was written
// under, and rules.history its earlier maxes: a change between two maxes
// with the same low bits (a multiple of 65,536 apart: 65,536 and 131,072,
// 100,000 and 165,536) cannot be told from no change, and each key's
// tokens in use are read under the new max (found from outside: 165,536
// made 100,000 with 150,000 in use read 90,600 in use).
void TokenBucketMaxAlike(const BizConfig& ob, const BizConfig& nb, const std::string& who,
                         std::vector<std::string>* out) {
  for (uint32_t i = 0; i < nb.nrules; ++i) {
    const RuleSpec& spec = nb.rules[i];
    if (spec.algo != Algo::kTokenBucket) continue;
    for (uint32_t j = 0; j < ob.nrules; ++j) {
      const RuleSpec& was = ob.rules[j];
      if (was.algo != Algo::kTokenBucket || std::string_view(was.name) != std::string_view(spec.name)) continue;
      // Raised, the block read under the new max keeps the instant it is
      // full again, which is what a raise keeps: nothing to say.
      if (spec.max < was.max && (spec.max & 0xffff) == (was.max & 0xffff) &&
          TagIdentity(spec.tag) == TagIdentity(was.tag))
        out->push_back(who + ": token_bucket rule '" + std::string(spec.name) + "' max " + std::to_string(was.max) +
                       " -> " + std::to_string(spec.max) +
                       " with its interval kept: the two are a multiple of 65,536 apart, and a key's block keeps "
                       "only the low 16 bits of its max, so each key's tokens in use are read as if written under " +
                       std::to_string(spec.max) +
                       " (this lowered max grants tokens still in use again); change the interval with it "
                       "(rules.history then converts each key), or reset the biz");
      break;
    }
  }
}

}  // namespace

namespace {
// The names of the bizzes a reload removed, as said: 8 at most, then how
// many more, and their count.
struct RemovedNames {
  std::string names;
  size_t n = 0;
  void Add(const std::string& name) {
    if (n++ < 8) names += (names.empty() ? "" : ", ") + name;
  }
  std::string Said() const { return n > 8 ? names + ", and " + std::to_string(n - 8) + " more" : names; }
};
}  // namespace

std::vector<std::string> HeldAReloadEnds(const MapConfig& running, const MapConfig& next, bool with_envoy) {
  std::vector<std::string> out;
  // By id: an Envoy configuration may bring thousands of bizzes.
  std::vector<const BizConfig*> by_id(65536, nullptr);
  for (const BizConfig& b : running.bizzes) by_id[b.id] = &b;
  std::vector<bool> kept(65536, false);
  for (const BizConfig& nb : next.bizzes) kept[nb.id] = true;
  // One line for every biz removed that may hold leases or reservations (a
  // rate rule keeps reservations by default): an Envoy configuration may
  // drop thousands at once.
  // map.xml's bizzes, and Envoy's descriptors apart, in their own terms.
  RemovedNames removed, removed_envoy;
  std::unordered_map<std::string_view, bool> next_names;
  for (const BizConfig& nb : next.bizzes) next_names.emplace(nb.name, true);
  for (const BizConfig& ob : running.bizzes) {
    // An Envoy descriptor's keys hold no reservation Envoy made (it takes
    // none), and its plain rate limits are most of what a directory change
    // removes: only one with a concurrency rule is named. A biz whose name
    // stays under another id is said by its own line below. The limit
    // override's internal bizzes are no biz of anyone's (found from outside:
    // 12 bizzes said removed with <grpc config>'s 5 descriptors).
    if (kept[ob.id] || (ob.lease_rule < 0 && (ob.res_cap == 0 || (with_envoy && FromEnvoy(ob)))) ||
        next_names.contains(ob.name) || EnvoyInternal(ob))
      continue;
    // No 404 to an Envoy client: Envoy sends no release.
    (with_envoy && FromEnvoy(ob) ? removed_envoy : removed).Add(ob.name);
  }
  // A biz of map.xml whose id changed, its name kept: its keys' nodes are
  // under the id (the store's key), so every key starts from zero, which a
  // reload logged as one biz added and one removed of the same name only.
  std::unordered_map<std::string_view, const BizConfig*> by_name;
  for (const BizConfig& ob : running.bizzes)
    if (!(with_envoy && FromEnvoy(ob))) by_name.emplace(ob.name, &ob);
  for (const BizConfig& nb : next.bizzes) {
    const auto it = by_name.find(nb.name);
    if (it == by_name.end() || it->second->id == nb.id || (with_envoy && FromEnvoy(nb))) continue;
    const std::string was = std::to_string(it->second->id);
    // The id it takes may be another running biz's (two names swapped):
    // then its keys meet that biz's counts, not zero.
    const BizConfig* other = by_id[nb.id];
    // One never running: what the store keeps under it, nothing unless a
    // biz had that id before (its counts come back then).
    const std::string takes =
        other == nullptr ? "its keys now read what the store keeps under id " + std::to_string(nb.id) +
                               ": nothing, every key starting from zero, unless a biz had that id before (its counts "
                               "then come back)"
                         : "its keys now read what biz '" + other->name + "' counted under id " +
                               std::to_string(nb.id) + ", not their own";
    out.push_back(next.path + ": biz '" + nb.name + "' has id " + std::to_string(nb.id) + ", not " + was + ": " +
                  takes +
                  " (a key's counts, leases and reservations are kept under its biz's id, and its own stay "
                  "under " +
                  was + (kept[it->second->id] ? ", another biz's now" : ", which the map no longer has") +
                  "); give it back id " + was + " to keep them");
  }
  if (removed.n > 0)
    out.push_back(next.path + ": " + std::to_string(removed.n) + " biz(es) removed (" + removed.Said() +
                  "): the leases and reservations their keys hold are no longer released, renewed or settled (404), " +
                  "and end with their nodes, which are stale now (reclaimed as new keys need room); a biz put back " +
                  "under the same id before then finds them held");
  if (removed_envoy.n > 0)
    out.push_back("<grpc config>: " + std::to_string(removed_envoy.n) + " `unit: concurrent` descriptor(s) removed (" +
                  removed_envoy.Said() +
                  "): the places their keys hold end with their nodes, which are stale now (reclaimed as new keys "
                  "need room); a descriptor put back under the same biz before then finds them held");
  for (const BizConfig& nb : next.bizzes) {
    const BizConfig* ob = by_id[nb.id];
    if (ob == nullptr) continue;
    // An Envoy descriptor's biz is said as the YAML's, without the HTTP
    // answers its clients never see (an Envoy user was told of map.xml,
    // releases and settles: found from outside).
    const bool envoy = with_envoy && FromEnvoy(nb);
    const std::string who =
        envoy ? "<grpc config>: the descriptor of biz '" + nb.name + "'" : next.path + ": biz '" + nb.name + "'";
    const auto http = [envoy](const char* answer) { return envoy ? std::string() : std::string(answer); };
    if (ob->lease_rule >= 0 && nb.lease_rule >= 0) {
      const int64_t was = ob->rules[ob->lease_rule].max, now = nb.rules[nb.lease_rule].max;
      const uint32_t places_was = Concurrency::Places(Concurrency::Bytes(was));
      const uint32_t places_now = Concurrency::Places(Concurrency::Bytes(now));
      if (places_now < places_was && now < was)
        out.push_back(who + (envoy ? ": requests_per_unit " : ": concurrency max ") + std::to_string(was) + " -> " +
                      std::to_string(now) + ": a key's node now has " + std::to_string(places_now) +
                      " places for leases, not " + std::to_string(places_was) + "; a key holding more keeps the " +
                      std::to_string(places_now) + " that end last, and the others end when the key is next touched" +
                      http(" (their release answers 410)") +
                      ". A lowered max that keeps its places keeps every lease held");
    } else if (ob->lease_rule >= 0) {
      out.push_back(who + (envoy ? ": no longer `unit: concurrent`" : ": its concurrency rule is removed") +
                    ": the leases its keys hold end when each key is next written, counted as expired" +
                    http(" (their release answers 400)") + "; a rule put back before then finds them held");
    }
    // Envoy takes no reservations, and its descriptors change by the
    // thousand: only map.xml's bizzes are said.
    if (ob->res_cap > 0 && nb.res_cap > 0 && !envoy)
      if (const std::string started = RateRulesStartedAnew(*ob, nb); !started.empty())
        out.push_back(who + ": " + started +
                      " from zero: any reservation its keys hold now was never counted there, and settles at its "
                      "estimate (returned=\"0\" overrun=\"0\"; each rule that counted it keeps it, as after its "
                      "window; docs/rules.md)");
    if (nb.res_cap < ob->res_cap && !envoy)
      out.push_back(
          who + ": reservations per key " + std::to_string(ob->res_cap) + " -> " + std::to_string(nb.res_cap) +
          (nb.res_explicit ? "" : " (the default: as many as fit beside its rules)") +
          (nb.res_cap == 0 ? "; the reservations its keys hold end when each key is next touched, charged their "
                             "estimate as at their expiry (their settle answers 400: the biz keeps none)"
                           : "; a key holding more keeps the " + std::to_string(nb.res_cap) +
                                 " that end last, and the others end when the key is next touched, charged their "
                                 "estimate as at their expiry (their settle answers 410)"));
    if (!envoy) SlidingUsesDropped(*ob, nb, who, &out);
    if (!envoy) TokenBucketMaxAlike(*ob, nb, who, &out);
  }
  return out;
}

}  // namespace frs::limit
