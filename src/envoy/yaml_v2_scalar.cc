#include "envoy/yaml_v2_scalar.h"

#include <locale.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <span>

namespace frs::envoy {
namespace {

constexpr std::string_view kNulls[] = {"", "~", "null", "Null", "NULL"};
constexpr std::string_view kTrues[] = {"y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"};
constexpr std::string_view kFalses[] = {"n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"};
constexpr std::string_view kNaNs[] = {".nan", ".NaN", ".NAN"};
constexpr std::string_view kInfinities[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf",
                                            "+.INF", "-.inf", "-.Inf", "-.INF"};

bool In(std::string_view s, std::span<const std::string_view> words) {
  for (std::string_view w : words)
    if (s == w) return true;
  return false;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Go's strconv.ParseInt (is_signed) or ParseUint with base 0: a sign (Int
// only), then 0b, 0o or 0x and their digits, a leading 0 and octal digits,
// or decimal digits; within int64 / uint64. Its decimal text in *json.
bool GoInteger(std::string_view s, bool is_signed, std::string* json) {
  bool negative = false;
  if (is_signed && !s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  unsigned base = 10;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 8;
    s.remove_prefix(base == 8 && p != 'o' ? 1 : 2);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  for (const char c : s) {
    const char l = static_cast<char>(c | 0x20);
    const unsigned d = IsDigit(c)             ? static_cast<unsigned>(c - '0')
                       : l >= 'a' && l <= 'f' ? static_cast<unsigned>(l - 'a' + 10)
                                              : 99u;
    if (d >= base || v > (UINT64_MAX - d) / base) return false;
    v = v * base + d;
  }
  if (is_signed && v > (negative ? uint64_t{1} << 63 : uint64_t{INT64_MAX})) return false;
  *json = (negative && v != 0 ? "-" : "") + std::to_string(v);
  return true;
}

// yaml.v2's yamlStyleFloat: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool YamlStyleFloat(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const size_t whole = i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == whole) {
    if (i >= s.size() || s[i] != '.') return false;
    const size_t frac = ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == frac) return false;
  } else if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t exp = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == exp) return false;
  }
  return i == s.size();
}

// Go's underscoreOK (strconv): each '_' between two digits (or after a
// base prefix), as ParseFloat takes them in a decimal: ".5_5" is 0.55.
bool GoUnderscoresOk(std::string_view s) {
  char saw = '^';
  size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    if (p == 'b' || p == 'o' || p == 'x') {
      i = 2;
      saw = '0';
      hex = p == 'x';
    }
  }
  for (; i < s.size(); ++i) {
    const char l = static_cast<char>(s[i] | 0x20);
    if (IsDigit(s[i]) || (hex && l >= 'a' && l <= 'f')) {
      saw = '0';
      continue;
    }
    if (s[i] == '_') {
      if (saw != '0') return false;
      saw = '_';
      continue;
    }
    if (saw == '_') return false;
    saw = '!';
  }
  return saw != '_';
}

std::string WithoutUnderscores(std::string_view s) {
  std::string plain;
  for (const char ch : s)
    if (ch != '_') plain.push_back(ch);
  return plain;
}

// Go's ParseFloat of a yamlStyleFloat text, as a kNumber float: false past
// the largest double (Go's ErrRange; an underflow is 0 there, without error).
bool GoFloat(std::string_view s, YamlV2Scalar* out) {
  const std::string text(s);
  // Read in the C locale whatever the process's: the text's '.' is the
  // decimal point (strtod takes the locale's, and a program that links this
  // and sets a comma locale read 0.5 as 0: found by a review). Once made,
  // never freed: one for the process.
  static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", locale_t{});
  const double v =
      c_locale != locale_t{} ? ::strtod_l(text.c_str(), nullptr, c_locale) : std::strtod(text.c_str(), nullptr);
  if (std::isinf(v)) return false;
  // The shortest text that reads back as the same double: JSON's number.
  char buf[40];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  *out = {YamlV2Scalar::Kind::kNumber, std::string(buf, end), true, v};
  return true;
}

// One of YAML 1.1's not-finite floats, or false.
bool NotFinite(std::string_view s, YamlV2Scalar* out) {
  const bool nan = In(s, kNaNs);
  if (!nan && !In(s, kInfinities)) return false;
  *out = {YamlV2Scalar::Kind::kNotFinite, "", true,
          nan ? std::numeric_limits<double>::quiet_NaN()
              : (s[0] == '-' ? -1 : 1) * std::numeric_limits<double>::infinity()};
  return true;
}

}  // namespace

YamlV2Scalar ResolvePlainScalar(std::string_view s) {
  using Kind = YamlV2Scalar::Kind;
  if (In(s, kNulls)) return {Kind::kNull, "null"};
  if (s.empty()) return {};
  const char c = s[0];
  // resolve.go: only a scalar whose first byte hints at one is resolved;
  // the words above are its map, which a 'M' hint only looks up.
  YamlV2Scalar r;
  if (c == '+' || c == '-' || IsDigit(c)) {
    if (NotFinite(s, &r)) return r;
    const std::string plain = WithoutUnderscores(s);
    std::string json;
    if (GoInteger(plain, true, &json) || GoInteger(plain, false, &json)) return {Kind::kNumber, json};
    if (YamlStyleFloat(plain) && GoFloat(plain, &r)) return r;
    return {};
  }
  if (c == '.') {
    if (NotFinite(s, &r)) return r;
    // ParseFloat of the text as written: a '_' only between digits.
    const std::string plain = WithoutUnderscores(s);
    if (GoUnderscoresOk(s) && YamlStyleFloat(plain) && GoFloat(plain, &r)) return r;
    return {};
  }
  if (In(s, kTrues)) return {Kind::kBool, "true"};
  if (In(s, kFalses)) return {Kind::kBool, "false"};
  return {};
}

std::string PlainKeyText(std::string_view s) {
  const YamlV2Scalar r = ResolvePlainScalar(s);
  switch (r.kind) {
    case YamlV2Scalar::Kind::kNull: return "<nil>";
    case YamlV2Scalar::Kind::kBool: return r.json;
    case YamlV2Scalar::Kind::kNotFinite: return std::isnan(r.value) ? "NaN" : r.value < 0 ? "-Inf" : "+Inf";
    case YamlV2Scalar::Kind::kNumber: {
      // An integer's decimal text is its %v; a float's is Go's
      // FormatFloat(f, 'g', -1, 64): the shortest digits, in exponent form
      // when the exponent is below -4 or 6 and more (two digits at least,
      // as C's), else plain.
      // By the type upstream's reader gave it, not by its text: 0xE00000
      // is an integer, 0123456789 (no octal) a float.
      if (!r.is_float) return r.json;
      const double v = r.value;
      char buf[40];
      char* end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
      const std::string_view sci(buf, static_cast<size_t>(end - buf));
      int exp = 0;
      const size_t e = sci.find('e');
      std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp);
      if (exp < -4 || exp >= 6) return std::string(sci);
      end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed).ptr;
      return std::string(buf, end);
    }
    default: return std::string(s);
  }
}

}  // namespace frs::envoy
