// envoy/yaml_v2_scalar.h: a plain YAML scalar typed as envoyproxy/ratelimit's
// reader types it. That reader is gopkg.in/yaml.v2 (YAML 1.1), decoding a
// descriptor's `metadata` into interface{} values that become the answer's
// dynamic metadata (a protobuf Struct): its resolver, not YAML 1.2's, says
// which plain scalar is a null, a boolean, a number or a string, so `010`
// is the number 8 there, `0x10` 16, `1_000` 1000 and `+5` 5 (found from
// outside: all four reached Envoy as strings). A date stays a string (the
// decoder gives timestamps to interface{} as their text).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace frs::envoy {

struct YamlV2Scalar {
  enum class Kind {
    kNull,
    kBool,
    kNumber,
    kString,
    kNotFinite,  // .nan, .inf, -.inf: a float JSON cannot carry
  };
  Kind kind = Kind::kString;
  // kNull, kBool, kNumber: the value as JSON text ("null", "true", "8",
  // "0.5"); kString: empty (the scalar's own text is the string).
  std::string json;
  bool is_float = false;  // kNumber: a float64 upstream (else an int or a uint64)
  double value = 0;       // a float's value (kNotFinite: NaN or an infinity)
};

// How yaml.v2 resolves the plain (unquoted) scalar `s`.
YamlV2Scalar ResolvePlainScalar(std::string_view s);

// A nested map's key as envoyproxy/ratelimit names it (fmt's %v of the
// resolved value): a number's decimal text, "true", "false", "<nil>", else
// the key's own text.
std::string PlainKeyText(std::string_view s);

}  // namespace frs::envoy
