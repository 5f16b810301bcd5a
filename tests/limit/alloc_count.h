// tests/limit/alloc_count.h: counts heap allocations (operator new) made by
// any thread while an AllocCount is alive (the hot path must make none).
#pragma once

namespace frs::limit::testing {

class AllocCount {
 public:
  AllocCount();
  ~AllocCount();
  long count() const;
};

}  // namespace frs::limit::testing
