// limit/json_sax.h: nlohmann::json's strict SAX parser run over a string,
// for readers that build their own values (node import, frsctl).
//
// A handler derives from SaxReader: it receives the library's events, may
// refuse one (Refuse names what is wrong), and knows how far the lexer has
// read (ReadTo) so it can tell where a value ended. ParseWith turns the
// library's syntax errors and a handler's refusal alike into an
// InvalidArgument naming the byte offset; nothing thrown leaves it.
//
// Include only from .cc files: it brings in the whole library.
//
// Thread safety: a handler is used by one parse at a time.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "frs/read_position.h"
#include "frs/status.h"

namespace frs::limit {

class SaxReader {
 public:
  // The library's SAX interface, the part every handler shares.
  bool binary(nlohmann::json::binary_t&) { return Refuse("binary values are not JSON"); }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 8:
    // syntax error ...": what follows the column is the message.
    std::string_view what = e.what();
    size_t column = what.find("column ");
    size_t colon = column == std::string_view::npos ? column : what.find(": ", column);
    why_ = std::string(colon == std::string_view::npos ? what : what.substr(colon + 2));
    at_ = position > 0 ? position - 1 : 0;
    return false;
  }

 protected:
  // Stops the parse, naming what is wrong at the byte just read.
  bool Refuse(std::string why) {
    why_ = std::move(why);
    at_ = ReadTo() > 0 ? ReadTo() - 1 : 0;
    return false;
  }
  // How many bytes of the text the lexer has read. A number's event comes
  // after the lexer has also read the byte that ended it (when there is one).
  size_t ReadTo() const { return static_cast<size_t>(read_ - text_.data()); }
  std::string_view text() const { return text_; }

 private:
  template <class Handler>
  friend Status ParseWith(std::string_view text, Handler* h);

  std::string_view text_;
  const char* read_ = nullptr;
  std::string why_;
  size_t at_ = 0;
};

// Parses exactly one JSON value (surrounding whitespace allowed) into `h`.
template <class Handler>
Status ParseWith(std::string_view text, Handler* h) {
  SaxReader& r = *h;
  r.text_ = text;
  r.read_ = text.data();
  try {
    if (nlohmann::json::sax_parse(ReadPositionIterator(text.data(), &r.read_),
                                  ReadPositionIterator(text.data() + text.size(), &r.read_), h))
      return Status::OK();
  } catch (const std::exception& e) {
    // Only bad_alloc or a library surprise: syntax errors reach parse_error.
    return Status::InvalidArgument(std::string("JSON could not be read: ") + e.what());
  }
  return Status::InvalidArgument("JSON at byte " + std::to_string(r.at_) + ": " + r.why_);
}

}  // namespace frs::limit
