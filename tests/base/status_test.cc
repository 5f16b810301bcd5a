// Errors as values (frs/status.h): Status and Result.
#include "frs/status.h"

#include <errno.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

namespace frs {
namespace {

TEST(Status, OkIsEmpty) {
  const Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), Status::Code::kOk);
  EXPECT_EQ(ok.message(), "");
  EXPECT_EQ(ok.ToString(), "OK");
  EXPECT_TRUE(Status::OK().ok());
  EXPECT_FALSE(ok.IsNotFound());
}

TEST(Status, EachFactoryCarriesItsCodeAndSentence) {
  struct Case {
    Status s;
    Status::Code code;
    const char* text;
  };
  const Case cases[] = {
      {Status::NotFound("a"), Status::Code::kNotFound, "NotFound: a"},
      {Status::InvalidArgument("b"), Status::Code::kInvalidArgument, "InvalidArgument: b"},
      {Status::Corruption("c"), Status::Code::kCorruption, "Corruption: c"},
      {Status::Mismatch("d"), Status::Code::kMismatch, "Mismatch: d"},
      {Status::IOError("e"), Status::Code::kIOError, "IOError: e"},
      {Status::Busy("f"), Status::Code::kBusy, "Busy: f"},
      {Status::Unavailable("g"), Status::Code::kUnavailable, "Unavailable: g"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.s.ok()) << c.text;
    EXPECT_EQ(c.s.code(), c.code) << c.text;
    EXPECT_EQ(c.s.ToString(), c.text);
    EXPECT_EQ(c.s.message(), std::string(1, c.text[std::strlen(c.text) - 1])) << "no code prefix";
    EXPECT_EQ(c.s.IsNotFound(), c.code == Status::Code::kNotFound) << c.text;
  }
}

TEST(Status, CopiesShareTheSentence) {
  Status a = Status::Corruption("data/frs.0: bad magic");
  Status b = a;
  a = Status::OK();
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(b.ToString(), "Corruption: data/frs.0: bad magic");
}

TEST(Status, FromErrnoIsAnIOErrorNamingItsContext) {
  const Status s = Status::FromErrno("/etc/frs/srv.xml", ENOENT);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.message(), std::string("/etc/frs/srv.xml: ") + std::strerror(ENOENT));
  EXPECT_EQ(Status::FromErrno("x", EACCES).message(), std::string("x: ") + std::strerror(EACCES));
}

TEST(Result, HoldsAValue) {
  Result<std::string> r = std::string("v");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), "v");
  EXPECT_EQ(r->size(), 1u);
  *r += "w";
  EXPECT_EQ(r.value(), "vw");
  const std::string moved = std::move(r).value();
  EXPECT_EQ(moved, "vw");
}

TEST(Result, HoldsTheStatusThatExplainsNoValue) {
  Result<int> r = Status::NotFound("no key");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_EQ(r.status().message(), "no key");
}

TEST(Result, IsNeverOkWithoutAValue) {
  Result<int> r = Status::OK();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "Result built from an OK status");
}

TEST(Result, MoveOnlyValuesPassThrough) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(42);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 42);
}

}  // namespace
}  // namespace frs
