// stats/group_stats_xml.cc: statistics by key field as XML, both ways
// (frs/group_stats.h): GET /stats writes it, POST /stats and frsctl read it.
#include "frs/group_stats.h"

#include <algorithm>
#include <charconv>
#include <pugixml.hpp>

#include "base/xml_escape.h"

namespace frs {
namespace {

void Attr(std::string_view name, std::string_view value, std::string* out) {
  out->push_back(' ');
  out->append(name);
  out->append("=\"");
  AppendXmlEscaped(value, out);
  out->push_back('"');
}
void Attr(std::string_view name, uint64_t value, std::string* out) { Attr(name, std::to_string(value), out); }

bool ParseU64(const char* s, uint64_t* out) {
  std::string_view v(s);
  if (v.empty()) return false;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  return ec == std::errc() && p == v.data() + v.size();
}

}  // namespace

void AppendGroupStats(const GroupStats& st, std::string* out) {
  out->append("<stats");
  Attr("biz", st.biz, out);
  Attr("by", st.by, out);
  Attr("day", DayText(st.day), out);
  Attr("groups", st.groups, out);
  Attr("field_errors", st.field_errors, out);
  if (st.lost != 0) Attr("lost", st.lost, out);
  if (!st.distinct_fields.empty()) {
    std::string names;
    for (const std::string& f : st.distinct_fields) names += (names.empty() ? "" : ",") + f;
    Attr("distinct", names, out);
  }
  out->append(">\n");
  for (const GroupStat& g : st.rows) {
    out->append("  <group");
    Attr("value", g.value, out);
    // XML cannot carry every byte (control bytes, bytes that are not UTF-8,
    // and a parser folds tabs and line ends): such a value also goes as hex,
    // which a reader takes first, so a merge never folds two groups into one.
    if (std::any_of(g.value.begin(), g.value.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return u < 0x20 || u >= 0x7f;
        })) {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string hex;
      for (unsigned char c : g.value) {
        hex.push_back(kHex[c >> 4]);
        hex.push_back(kHex[c & 15]);
      }
      Attr("value_hex", hex, out);
    }
    Attr("requests", g.requests, out);
    Attr("allowed", g.allowed, out);
    Attr("denied", g.denied, out);
    Attr("units", g.units, out);
    for (size_t d = 0; d < st.distinct_fields.size() && d < g.distinct.size(); ++d)
      Attr("distinct_" + st.distinct_fields[d], g.distinct[d], out);
    for (size_t d = 0; d < st.distinct_fields.size() && d < g.sketches.size(); ++d)
      Attr("sketch_" + st.distinct_fields[d], g.sketches[d], out);
    out->append("/>\n");
  }
  out->append("</stats>\n");
}

size_t GroupStatsXmlBound(const GroupStats& st) {
  // An escaped byte takes at most 6 ("&quot;"); a number at most 20 digits.
  constexpr size_t kEscaped = 6, kNumber = 20;
  size_t names = 0;
  for (const std::string& f : st.distinct_fields) names += f.size() + 1;
  size_t bytes = 128 + kEscaped * (st.biz.size() + st.by.size() + names) + 4 * kNumber;
  for (const GroupStat& g : st.rows) {
    // "<group", value and value_hex, four counts, the attribute punctuation.
    bytes += 96 + (kEscaped + 2) * g.value.size() + 4 * kNumber;
    bytes += st.distinct_fields.size() * (names + 16 + kNumber);
    // A sketch's text is hex (Sketch::Encode): nothing in it is escaped.
    for (const std::string& sk : g.sketches) bytes += names + 16 + sk.size();
  }
  return bytes;
}

Result<GroupStats> ParseGroupStats(std::string_view xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8))
    return Status::InvalidArgument("the statistics are not well-formed XML");
  pugi::xml_node root = doc.child("stats");
  if (!root) return Status::InvalidArgument("the statistics have no <stats> element");
  GroupStats st;
  st.biz = root.attribute("biz").value();
  st.by = root.attribute("by").value();
  if (st.biz.empty() || st.by.empty()) return Status::InvalidArgument("<stats> needs biz and by");
  if (!ParseDayText(root.attribute("day").value(), &st.day))
    return Status::InvalidArgument("<stats day=\"" + std::string(root.attribute("day").value()) +
                                   "\"> is not a YYYY-MM-DD date");
  uint64_t v = 0;
  if (root.attribute("field_errors") && !ParseU64(root.attribute("field_errors").value(), &st.field_errors))
    return Status::InvalidArgument("<stats field_errors> is not a count");
  if (root.attribute("groups") && ParseU64(root.attribute("groups").value(), &v)) st.groups = static_cast<uint32_t>(v);
  std::string_view distinct = root.attribute("distinct").value();
  for (size_t start = 0; !distinct.empty();) {
    const size_t comma = distinct.find(',', start);
    st.distinct_fields.emplace_back(
        distinct.substr(start, comma == std::string_view::npos ? distinct.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  for (pugi::xml_node g : root.children("group")) {
    GroupStat row;
    // An empty value is a group (keys whose by field is empty); a missing one is not.
    if (!g.attribute("value")) return Status::InvalidArgument("a <group> has no value attribute");
    row.value = g.attribute("value").value();
    if (pugi::xml_attribute hex = g.attribute("value_hex")) {
      const std::string_view h = hex.value();
      auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
      if (h.size() % 2 != 0) return Status::InvalidArgument("a <group value_hex> has an odd number of digits");
      row.value.clear();
      for (size_t i = 0; i < h.size(); i += 2) {
        const int hi = nibble(h[i]), lo = nibble(h[i + 1]);
        if (hi < 0 || lo < 0) return Status::InvalidArgument("a <group value_hex> is not lower-case hex");
        row.value.push_back(static_cast<char>(hi * 16 + lo));
      }
    }
    struct {
      const char* name;
      uint64_t* to;
    } counts[] = {{"requests", &row.requests},
                  {"allowed", &row.allowed},
                  {"denied", &row.denied},
                  {"units", &row.units}};
    for (auto& c : counts)
      if (!ParseU64(g.attribute(c.name).value(), c.to))
        return Status::InvalidArgument("<group value=\"" + row.value + "\">: " + c.name + " is not a count");
    for (const std::string& f : st.distinct_fields) {
      uint64_t n = 0;
      ParseU64(g.attribute(("distinct_" + f).c_str()).value(), &n);
      row.distinct.push_back(n);
      row.sketches.emplace_back(g.attribute(("sketch_" + f).c_str()).value());
    }
    st.rows.push_back(std::move(row));
  }
  return st;
}

}  // namespace frs
