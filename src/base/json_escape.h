// base/json_escape.h: text put into a JSON string, escaped once for every
// writer of JSON (the decision log, export, frsctl's output, Envoy's
// metadata). Written for the request path (the decision log's lines): it
// writes through a plain pointer, no allocation per string.
//
// What a JSON reader gets back: the text itself when it is UTF-8 without
// control characters. '"' and '\' go as \" and \\; a control character
// (below 0x20, and DEL) and every byte that is not part of a well-formed
// UTF-8 sequence (base/utf8.h: overlong, surrogate, above U+10FFFF, cut)
// go as \u00XX, one escape a byte, so the output is valid UTF-8 JSON
// whatever the input holds. Such a byte reads back as the code point of
// its value (0xFF as U+00FF): a writer that must give bytes back exactly
// writes them as hex beside the text (export's key_hex).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace frs {

// The most bytes one byte of input becomes (\u00XX).
inline constexpr size_t kJsonEscapedBytesPerByte = 6;

// Writes `s` escaped, without quotes, at `p`, which must have room for
// kJsonEscapedBytesPerByte * s.size() bytes; returns the new end.
char* JsonEscapeInto(std::string_view s, char* p);

// Appends `s` escaped, without quotes.
void AppendJsonEscaped(std::string_view s, std::string* out);

// Appends `s` escaped, between quotes: a JSON string value.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace frs
