// frs/read_position.h: where a parser that owns its input iterator is.
//
// A library parser given an iterator pair (nlohmann-json's SAX lexer, for
// one) reads through its own copy and reports events without saying at
// which byte. To give every value its byte range (an error naming the byte,
// a value's text copied out whole), the caller hands it this iterator,
// which writes how far it has gone into a pointer the caller reads between
// events.
//
// Thread safety: used by the one thread that parses.
#pragma once

#include <cstddef>
#include <iterator>

namespace frs {

class ReadPositionIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  // `read` receives the position after each step; it must outlive the
  // iterator and every copy the parser makes of it.
  ReadPositionIterator(const char* p, const char** read) : p_(p), read_(read) {}
  reference operator*() const { return *p_; }
  ReadPositionIterator& operator++() {
    *read_ = ++p_;
    return *this;
  }
  ReadPositionIterator operator++(int) {
    ReadPositionIterator was = *this;
    ++*this;
    return was;
  }
  bool operator==(const ReadPositionIterator& o) const { return p_ == o.p_; }

 private:
  const char* p_;
  const char** read_;
};

}  // namespace frs
