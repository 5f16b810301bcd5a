#include "server/envoy_json.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <exception>
#include <vector>

#include <nlohmann/json.hpp>

namespace frs::server {

namespace {

using nlohmann::json;

Status Bad(std::string_view what) { return Status::InvalidArgument(std::string(what)); }

constexpr size_t kMaxFieldsPerObject = 16;

// A protojson integer: a number, or a decimal string of one.
bool ReadUnsigned(const json& v, uint64_t max, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return *out <= max;
  }
  if (v.is_number_integer()) return false;  // negative
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size() && *out <= max;
  }
  return false;
}

// Field names as protojson accepts them: lowerCamelCase or the .proto's.
bool Is(const std::string& name, std::string_view camel, std::string_view proto) {
  return name == camel || name == proto;
}

const char* CodeName(envoy::Code c) {
  switch (c) {
    case envoy::Code::kOk: return "OK";
    case envoy::Code::kOverLimit: return "OVER_LIMIT";
    default: return "UNKNOWN";
  }
}

const char* UnitEnumName(envoy::Unit u) {
  switch (u) {
    case envoy::Unit::kSecond: return "SECOND";
    case envoy::Unit::kMinute: return "MINUTE";
    case envoy::Unit::kHour: return "HOUR";
    case envoy::Unit::kDay: return "DAY";
    case envoy::Unit::kMonth: return "MONTH";
    case envoy::Unit::kYear: return "YEAR";
    case envoy::Unit::kWeek: return "WEEK";
  }
  return "UNKNOWN";
}

// A RateLimitOverride: {"requestsPerUnit": N, "unit": "MINUTE" or 2}.
Status DecodeOverride(const json& v, const std::string& where, envoy::RlsDescriptor* out) {
  if (!v.is_object()) return Bad(where + ".limit is not an object");
  for (const auto& [name, f] : v.items()) {
    if (f.is_null()) continue;
    if (Is(name, "requestsPerUnit", "requests_per_unit")) {
      uint64_t n = 0;
      if (!ReadUnsigned(f, UINT32_MAX, &n)) return Bad(where + ".limit.requestsPerUnit is not 0..4294967295");
      out->limit_rpu = static_cast<uint32_t>(n);
    } else if (name == "unit") {
      if (f.is_number_integer()) {
        out->limit_unit = f.get<int64_t>();
      } else if (f.is_string()) {
        out->limit_unit = -1;
        for (int u = 0; u <= 7; ++u)
          if (f.get_ref<const std::string&>() == (u == 0 ? "UNKNOWN" : UnitEnumName(static_cast<envoy::Unit>(u))))
            out->limit_unit = u;
        if (out->limit_unit < 0) return Bad(where + ".limit.unit is not a unit name (SECOND..WEEK)");
      } else {
        return Bad(where + ".limit.unit is not a unit");
      }
    } else {
      return Bad(where + ".limit: unknown field '" + name.substr(0, 64) + "'");
    }
  }
  out->has_limit = true;
  return Status::OK();
}

Status DecodeEntry(const json& e, const std::string& where, envoy::Entry* out) {
  if (!e.is_object()) return Bad(where + " is not an object");
  for (const auto& [name, v] : e.items()) {
    if (name != "key" && name != "value") return Bad(where + ": unknown field '" + name.substr(0, 64) + "'");
    if (v.is_null()) continue;
    if (!v.is_string()) return Bad(where + "." + name + " is not a string");
    (name == "key" ? out->key : out->value) = v.get_ref<const std::string&>();
  }
  return Status::OK();
}

Status DecodeDescriptor(const json& d, const std::string& where, envoy::RlsDescriptor* out) {
  if (!d.is_object()) return Bad(where + " is not an object");
  for (const auto& [name, v] : d.items()) {
    if (v.is_null()) continue;
    if (name == "entries") {
      if (!v.is_array()) return Bad(where + ".entries is not an array");
      out->entries.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        Status s = DecodeEntry(v[i], where + ".entries[" + std::to_string(i) + "]", &out->entries[i]);
        if (!s.ok()) return s;
      }
    } else if (Is(name, "hitsAddend", "hits_addend")) {
      // A UInt64Value: present means set, 0 included (a look).
      if (!ReadUnsigned(v, UINT64_MAX, &out->hits)) return Bad(where + ".hitsAddend is not a count");
      out->has_hits = true;
    } else if (Is(name, "isNegativeHits", "is_negative_hits")) {
      if (!v.is_boolean()) return Bad(where + ".isNegativeHits is not true or false");
      out->negative = v.get<bool>();
    } else if (name == "limit") {
      // The descriptor's own limit, applied as on gRPC.
      if (Status s = DecodeOverride(v, where, out); !s.ok()) return s;
    } else {
      return Bad(where + ": unknown field '" + name.substr(0, 64) + "'");
    }
  }
  return Status::OK();
}

}  // namespace

struct EnvoyJson::Doc {
  json value;
  std::vector<std::vector<std::string>> open;  // the field names of each object open while parsing
};

EnvoyJson::EnvoyJson() : doc_(std::make_unique<Doc>()) {}
EnvoyJson::~EnvoyJson() = default;

Status EnvoyJson::Decode(std::string_view body, envoy::RlsRequest* req) {
  req->Clear();
  try {
    // protojson refuses a field given twice (either of its names): the
    // parser keeps the last one silently, so that a filter in front that
    // reads the first `domain` would judge another request than this one.
    // Names compared without '_' and case: hits_addend is hitsAddend.
    std::vector<std::vector<std::string>>& open = doc_->open;
    open.clear();
    std::string duplicate;
    bool too_many = false;
    const auto seen = [&](int, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) open.emplace_back();
      else if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
      else if (event == json::parse_event_t::key && !open.empty() && duplicate.empty() && !too_many) {
        // A message of rls.proto has at most 4 fields: more in one object is
        // refused here, and the search below stays short (8,000 names in a
        // 64 KB body cost 0.1 s of a worker's loop compared each to each).
        if (open.back().size() >= kMaxFieldsPerObject) {
          too_many = true;
          return true;
        }
        std::string name;
        for (char c : parsed.get_ref<const std::string&>())
          if (c != '_') name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        if (std::find(open.back().begin(), open.back().end(), name) != open.back().end())
          duplicate = parsed.get<std::string>().substr(0, 64);
        else open.back().push_back(std::move(name));
      }
      return true;
    };
    // The non-throwing parse: malformed input is a value, not an exception.
    doc_->value = json::parse(body.begin(), body.end(), seen, /*allow_exceptions=*/false);
    if (doc_->value.is_discarded()) return Bad("the body is not JSON");
    if (too_many)
      return Bad("an object has more than " + std::to_string(kMaxFieldsPerObject) + " fields (rls.proto's have 4)");
    if (!duplicate.empty()) return Bad("field '" + duplicate + "' is given twice");
    const json& j = doc_->value;
    if (!j.is_object()) return Bad("the body is not a JSON object (a RateLimitRequest)");
    for (const auto& [name, v] : j.items()) {
      if (v.is_null()) continue;
      if (name == "domain") {
        if (!v.is_string()) return Bad("domain is not a string");
        req->domain = v.get_ref<const std::string&>();
      } else if (name == "descriptors") {
        if (!v.is_array()) return Bad("descriptors is not an array");
        req->descriptors.resize(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          Status s = DecodeDescriptor(v[i], "descriptors[" + std::to_string(i) + "]", &req->descriptors[i]);
          if (!s.ok()) return s;
        }
      } else if (Is(name, "hitsAddend", "hits_addend")) {
        uint64_t n = 0;
        if (!ReadUnsigned(v, UINT32_MAX, &n)) return Bad("hitsAddend is not a count (0..4294967295)");
        // 0 (not set) is 1, as on gRPC.
        req->hits = n == 0 ? 1 : n;
      } else {
        return Bad("unknown field '" + name.substr(0, 64) + "' (domain, descriptors, hitsAddend)");
      }
    }
  } catch (const std::exception& e) {
    // items() and get_ref() cannot throw on the checked types above; this
    // only keeps a library surprise (or bad_alloc) from leaving the worker's
    // request path.
    req->Clear();
    return Bad(std::string("the body could not be read: ") + e.what());
  }
  if (req->domain.empty()) return Bad("rate limit domain must not be empty");
  return Status::OK();
}

bool EnvoyJson::Encode(const envoy::RlsAnswer& a, std::string* out) {
  try {
    // Fields in the .proto's order, as protojson writes them.
    nlohmann::ordered_json o;
    o["overallCode"] = CodeName(a.overall);
    if (!a.statuses.empty()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const envoy::RlsStatus& st : a.statuses) {
        nlohmann::ordered_json s;
        s["code"] = CodeName(st.code);
        if (st.has_limit && st.limit) {
          nlohmann::ordered_json l = nlohmann::ordered_json::object();
          const envoy::Limit& lim = st.limit_value();
          if (lim.requests_per_unit != 0) l["requestsPerUnit"] = lim.requests_per_unit;
          l["unit"] = lim.concurrent() ? "UNKNOWN" : UnitEnumName(lim.unit);
          if (!st.limit->name.empty()) l["name"] = st.limit->name;
          s["currentLimit"] = std::move(l);
        }
        if (st.remaining != 0) s["limitRemaining"] = st.remaining;
        if (st.has_limit) s["durationUntilReset"] = std::to_string(st.until_reset_s) + "s";
        list.push_back(std::move(s));
      }
      o["statuses"] = std::move(list);
    }
    // Names from the YAML may hold bytes that are not UTF-8: replaced, not thrown.
    out->append(o.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    out->push_back('\n');
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace frs::server
