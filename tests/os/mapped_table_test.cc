// A mapped table's header, checked one way, and the one opener of the
// fixed-size tables (os/mapped_table.h).
#include "os/mapped_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"

namespace frs::os {
namespace {

using testing::TempDir;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t slots;
  uint32_t slot_bytes;
  uint64_t checksum;
  uint64_t shared;  // not covered: changed by writers
};
constexpr TableFormat kFormat{.magic = "TESTTABL", .version = 3, .header_bytes = 40, .checksum_at = 24};
static_assert(sizeof(Header) == kFormat.header_bytes && offsetof(Header, checksum) == kFormat.checksum_at);
constexpr uint64_t kBytes = 4096;

Header Want() {
  Header h{};
  h.slots = 8;
  h.slot_bytes = 64;
  SealHeader(&h, kFormat);
  return h;
}

void Smash(const std::string& path, uint64_t at, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
}

TEST(MappedTable, SealedHeaderIsCleanAndEveryChecksumIsItsFormats) {
  const Header h = Want();
  EXPECT_EQ(std::memcmp(h.magic, "TESTTABL", 8), 0);
  EXPECT_EQ(h.version, 3u);
  EXPECT_EQ(h.header_bytes, 40u);
  EXPECT_TRUE(CheckTableHeader("t", &h, kBytes, kFormat, &h, kBytes).ok());
  TableFormat fnv = kFormat;
  fnv.sum = HeaderSum::kFnv1a;
  EXPECT_NE(HeaderChecksum(&h, fnv), HeaderChecksum(&h, kFormat));
  EXPECT_FALSE(CheckTableHeader("t", &h, kBytes, fnv, &h, kBytes).ok());
}

// Each fault named, with its kind, in the order they are checked.
TEST(MappedTable, EachFaultIsNamedWithItsKind) {
  const Header want = Want();
  struct Case {
    const char* fault;
    Status::Code code;
    void (*spoil)(Header*);
    uint64_t size;
  } cases[] =
      {
          {"t: shorter than its header", Status::Code::kCorruption, [](Header*) {}, 39},
          {"t: bad magic", Status::Code::kCorruption, [](Header* h) { h->magic[0] = 'X'; }, kBytes},
          {"t: format version 9, this build reads 3", Status::Code::kMismatch, [](Header* h) { h->version = 9; },
           kBytes},
          {"t: header checksum", Status::Code::kCorruption, [](Header* h) { h->slots = 9; }, kBytes},
          {"t: table layout differs from this build's", Status::Code::kMismatch,
           [](Header* h) {
    h->slots = 9;
    SealHeader(h, kFormat);
           },
           kBytes},
          {"t: truncated (4000 bytes of 4096)", Status::Code::kCorruption, [](Header*) {}, 4000},
          // Grown past its size (truncate -s +N, a copy over a longer file).
          {"t: extended (4097 bytes of 4096): with frsd stopped, truncate -s 4096 t gives it its size back; then "
           "frsctl verify checks what it holds",
           Status::Code::kCorruption, [](Header*) {}, 4097},
  };
  for (const Case& c : cases) {
    Header h = want;
    c.spoil(&h);
    Status s = CheckTableHeader("t", &h, c.size, kFormat, &want, kBytes);
    EXPECT_EQ(s.message(), c.fault);
    EXPECT_EQ(s.code(), c.code) << c.fault;
  }
  // Words after the checksum are the writers': never a fault.
  Header h = want;
  h.shared = 12345;
  EXPECT_TRUE(CheckTableHeader("t", &h, kBytes, kFormat, &want, kBytes).ok());
  // Without `want`, the geometry is the table's own.
  h.slots = 9;
  SealHeader(&h, kFormat);
  EXPECT_TRUE(CheckTableHeader("t", &h, kBytes, kFormat, nullptr, 0).ok());
}

TEST(MappedTable, OpenCreatesChecksAndReadOnlyCreatesNothing) {
  TempDir d;
  const std::string path = d / "table.frs";
  const Header want = Want();
  auto ro = OpenMappedTable(path, kFormat, &want, kBytes, /*read_only=*/true);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(ro->file, nullptr);
  EXPECT_EQ(std::memcmp(ro->base, &want, sizeof want), 0);
  // In memory: the header, then zeros to the table's end.
  for (uint64_t i = sizeof want; i < kBytes; ++i) ASSERT_EQ(ro->base[i], 0) << i;
  EXPECT_EQ(ro->memory.size(), kBytes);
  EXPECT_FALSE(std::filesystem::exists(path));

  {
    auto made = OpenMappedTable(path, kFormat, &want, kBytes, false);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    ASSERT_NE(made->file, nullptr);
    EXPECT_EQ(std::filesystem::file_size(path), kBytes);
  }
  auto again = OpenMappedTable(path, kFormat, &want, kBytes, true);
  ASSERT_TRUE(again.ok()) << again.status().ToString();

  // A damaged one: the read-only open and the writing one say the same.
  const uint32_t v = 7;
  Smash(path, 8, &v, sizeof v);
  auto r1 = OpenMappedTable(path, kFormat, &want, kBytes, true);
  auto r2 = OpenMappedTable(path, kFormat, &want, kBytes, false);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().message(), path + ": format version 7, this build reads 3");
  EXPECT_EQ(r2.status().ToString(), r1.status().ToString());
  // Nothing was changed.
  auto r3 = OpenMappedTable(path, kFormat, &want, kBytes, false);
  EXPECT_EQ(r3.status().ToString(), r1.status().ToString());
}

}  // namespace
}  // namespace frs::os
