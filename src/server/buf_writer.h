// server/buf_writer.h: a bounds-free write cursor over a caller's stack
// buffer, for the responses on the hot path (GET /acquire, POST /frs).
//
// Why: building a ~400-byte response with one std::string append per
// piece costs a capacity check per piece, a strlen per C-string literal, and
// the iterator-pair append(first, last) goes through the generic
// _M_replace. Together they were the largest user-space cost of the
// request path after the store. Writing into a buffer sized for the worst
// case and appending once keeps the bytes identical and the work linear.
//
// The caller sizes the buffer for the worst case of what it writes (an
// integer is at most kMaxDecimalChars); nothing here checks bounds.
//
// Thread safety: values used by one thread at a time: each response makes its
// own, over its own stack buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/decimal.h"

namespace frs::server {

class BufWriter {
 public:
  explicit BufWriter(char* buf) : begin_(buf), p_(buf) {}

  // A string literal: its length is known at compile time.
  template <size_t N>
  void Lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void Str(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void Char(char c) { *p_++ = c; }
  void Int(int64_t v) { p_ = WriteDecimal(p_, v); }
  // ` name="V"` with `lead` = ` name="` (a literal: copied with a
  // constant length).
  template <size_t N>
  void Field(const char (&lead)[N], int64_t v) {
    Lit(lead);
    Int(v);
    Char('"');
  }

  size_t size() const { return static_cast<size_t>(p_ - begin_); }
  void AppendTo(std::string* out) const { out->append(begin_, size()); }

 private:
  char* begin_;
  char* p_;
};

// The digits of the last integer written through it, copied when the next
// one is the same: reset times repeat (a decision's reset is usually its
// rule's, the members of a batch often share a window), and they are the
// ten-digit integers that cost the most to write.
class DigitsMemo {
 public:
  void Int(BufWriter& w, int64_t v) {
    if (len_ == 0 || v != v_) {
      BufWriter d(digits_);
      d.Int(v);
      len_ = d.size();
      v_ = v;
    }
    w.Str(std::string_view(digits_, len_));
  }

 private:
  int64_t v_ = 0;
  size_t len_ = 0;
  char digits_[24];
};

}  // namespace frs::server
