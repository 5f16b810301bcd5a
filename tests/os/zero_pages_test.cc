// Zero-filled memory from an anonymous mapping (os/zero_pages.h).
#include "os/zero_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace frs::os {
namespace {

// Whether [p, p + n) is mapped: msync of unmapped memory fails with ENOMEM.
bool Mapped(void* p, size_t n) { return ::msync(p, n, MS_ASYNC) == 0 || errno != ENOMEM; }

TEST(ZeroPages, GivesZerosToWriteAndReturnsThemWhenDestroyedOrMovedOver) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = 3 * page + 5;  // not a whole number of pages
  auto z = ZeroPages::Map(bytes);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  ASSERT_NE(z->data(), nullptr);
  EXPECT_EQ(z->size(), bytes);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(z->data()[i], 0) << i;
  std::memset(z->data(), 0x5a, bytes);
  EXPECT_EQ(z->data()[bytes - 1], 0x5a);

  uint8_t* first = z->data();
  ZeroPages owner = std::move(z.value());
  EXPECT_EQ(z->data(), nullptr);
  EXPECT_EQ(z->size(), 0u);
  EXPECT_EQ(owner.data(), first);
  EXPECT_TRUE(Mapped(first, bytes));

  // Moved over: the mapping it held is returned, the new one kept.
  auto other = ZeroPages::Map(page);
  ASSERT_TRUE(other.ok());
  uint8_t* second = other->data();
  owner = std::move(other.value());
  EXPECT_FALSE(Mapped(first, bytes));
  EXPECT_EQ(owner.data(), second);
  {
    ZeroPages last = std::move(owner);
    EXPECT_TRUE(Mapped(second, page));
  }
  EXPECT_FALSE(Mapped(second, page));
}

TEST(ZeroPages, ZeroBytesIsAnError) {
  auto z = ZeroPages::Map(0);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace frs::os
