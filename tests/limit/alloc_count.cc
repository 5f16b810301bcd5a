// Replaces the global operator new/delete of the test binary; kept in a file
// of its own so no new-expression is compiled next to the free() below.
#include "limit/alloc_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer uses it): else
// it comes from the sanitizer's own operator new and is freed by free().
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace frs::limit::testing {

AllocCount::AllocCount() {
  allocations.store(0);
  counting.store(true);
}
AllocCount::~AllocCount() { counting.store(false); }
long AllocCount::count() const { return allocations.load(); }

}  // namespace frs::limit::testing
