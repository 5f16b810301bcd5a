// The decision log: the line format and its JSON escaping, the bounded
// buffer that drops and counts, whole lines per write(2), failed writes,
// reopening after a rename, the record and sample settings.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "common/small_disk.h"
#include "common/temp_dir.h"
#include "server/decision_line.h"
#include "server/decision_log.h"
#include "server/logger.h"

namespace frs::server {
namespace {

std::string Line(const DecisionRecord& r) {
  std::vector<char> buf(kMaxDecisionLineBytes);
  return std::string(buf.data(), FormatDecisionLine(r, buf));
}

DecisionRecord ContractExample(const IpAddress* client) {
  return DecisionRecord{.ts_ms = 1795625073261,
                        .biz = "login",
                        .key = "user:42",
                        .rule = "login_1",
                        .allowed = false,
                        .n = 1,
                        .count = 5,
                        .limit = 5,
                        .remaining = 0,
                        .retry_after = 41,
                        .route = "user:42",
                        .client = client};
}

TEST(DecisionLine, IsTheContractsLineExactly) {
  IpAddress ip;
  ASSERT_TRUE(IpAddress::Parse("10.0.0.7", &ip));
  EXPECT_EQ(
      Line(ContractExample(&ip)),
      "{\"ts\":1795625073261,\"biz\":\"login\",\"key\":\"user:42\",\"rule\":\"login_1\",\"allowed\":false,\"n\":1,"
      "\"count\":5,\"limit\":5,\"remaining\":0,\"retry_after\":41,\"route\":\"user:42\",\"client\":\"10.0.0.7\"}\n");
}

// A biz that declares its key's fields gets them as members after the
// contract's twelve, so no consumer splits keys itself.
TEST(DecisionLine, DeclaredFieldsAreMembersAfterTheKey) {
  const std::vector<std::string> fields = {"user", "ad"};
  DecisionRecord r = ContractExample(nullptr);
  r.biz = "ad_user";
  r.key = "u1|ad7";
  r.route = "u1|ad7";
  r.fields = fields;
  r.separator = '|';
  const std::string line = Line(r);
  EXPECT_NE(line.find("\"client\":\"\",\"user\":\"u1\",\"ad\":\"ad7\"}\n"), std::string::npos) << line;

  // Empty parts are values too; another number of parts writes none.
  r.key = "|ad7";
  EXPECT_NE(Line(r).find("\"user\":\"\",\"ad\":\"ad7\""), std::string::npos) << Line(r);
  r.key = "u1|ad7|x";
  EXPECT_EQ(Line(r).find("\"user\":"), std::string::npos) << Line(r);
  r.key = "u1";
  EXPECT_EQ(Line(r).find("\"user\":"), std::string::npos) << Line(r);
}

TEST(DecisionLine, AFieldNamedAsALineMemberIsPrefixed) {
  const std::vector<std::string> fields = {"key", "n", "app"};
  DecisionRecord r = ContractExample(nullptr);
  r.key = "k\"1:7:a\\b";
  r.fields = fields;
  const std::string line = Line(r);
  EXPECT_NE(line.find("\"field_key\":\"k\\\"1\",\"field_n\":\"7\",\"app\":\"a\\\\b\""), std::string::npos) << line;
}

TEST(DecisionLine, AnEnvoyDecisionNamesItsDomainAndDescriptor) {
  DecisionRecord r = ContractExample(nullptr);
  r.biz = "envoy.rl.user";
  r.key = "user_ann";
  r.domain = "rl";
  r.descriptor = "user";
  const std::string line = Line(r);
  EXPECT_NE(line.find(",\"client\":\"\",\"domain\":\"rl\",\"descriptor\":\"user\"}\n"), std::string::npos) << line;
}

TEST(DecisionLine, ShadowWouldDenyIsDeniedWithShadowTrue) {
  DecisionRecord r = ContractExample(nullptr);
  r.shadow = true;
  r.retry_after = -1;
  const std::string line = Line(r);
  EXPECT_NE(line.find("\"allowed\":false"), std::string::npos) << line;
  EXPECT_NE(line.find("\"retry_after\":-1,"), std::string::npos) << line;
  const std::string tail = "\"client\":\"\",\"shadow\":true}\n";
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
}

// A denial for a full reservation table says so: its rule is within its
// limit, and nothing else on the line tells why it was denied.
TEST(DecisionLine, AFullReservationTableIsNamed) {
  DecisionRecord r = ContractExample(nullptr);
  r.reservations_full = true;
  r.shadow = true;
  const std::string tail = "\"client\":\"\",\"reservations_full\":true,\"shadow\":true}\n";
  std::string line = Line(r);
  EXPECT_EQ(line.substr(line.size() - tail.size()), tail) << line;
  r.allowed = true;  // an allowed decision's reservation is its answer's business
  r.shadow = false;
  line = Line(r);
  EXPECT_EQ(line.find("reservations_full"), std::string::npos) << line;
}

TEST(DecisionLine, ClientsOfEachFamily) {
  IpAddress v6, mapped;
  ASSERT_TRUE(IpAddress::Parse("2001:db8::7", &v6));
  ASSERT_TRUE(IpAddress::Parse("::ffff:192.0.2.1", &mapped));
  EXPECT_NE(Line(ContractExample(&v6)).find("\"client\":\"2001:db8::7\"}"), std::string::npos);
  EXPECT_NE(Line(ContractExample(&mapped)).find("\"client\":\"192.0.2.1\"}"), std::string::npos);
}

TEST(DecisionLine, ParsesAsJsonWithTheRightValues) {
  // The strongest check of validity: a real JSON parser (python3) reads the
  // line back and gives each string field its bytes (invalid UTF-8 bytes as
  // the characters U+00XX).
  ASSERT_EQ(std::system("command -v python3 >/dev/null 2>&1"), 0)
      << "python3 is not installed (tools/setup.sh --test installs it)";
  frs::testing::TempDir d;
  DecisionRecord r = ContractExample(nullptr);
  const std::string key = std::string("q\"b\\s\x01\n\x7f\xc3\xa9\xff", 11);
  r.key = key;
  r.route = "r\x80";
  {
    std::FILE* f = std::fopen((d / "line").c_str(), "wb");
    const std::string line = Line(r);
    std::fwrite(line.data(), 1, line.size(), f);
    std::fclose(f);
  }
  const std::string cmd =
      "python3 -c 'import json,sys; o=json.loads(open(sys.argv[1],\"rb\").read().decode(\"utf-8\")); "
      "k=o[\"key\"]; assert k == \"q\\\"b\\\\s\\x01\\n\\x7f\\u00e9\\u00ff\", repr(k); "
      "assert o[\"route\"] == \"r\\u0080\", repr(o[\"route\"]); assert o[\"allowed\"] is False; "
      "assert o[\"count\"] == 5' '" +
      (d / "line") + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A GET's route is as long as the request line allows: a route of 2.6 KB
// and more made no line at all, so a client could keep its acquires and
// denials out of the log. Every decision makes a line; a long string is cut
// with a marker and the line says "truncated":true.
TEST(DecisionLine, EveryDecisionMakesALineLongFieldsAreCutWithAMarker) {
  std::vector<char> buf(kMaxDecisionLineBytes);
  for (size_t len : {size_t{2600}, size_t{4000}, size_t{1} << 20}) {
    DecisionRecord r = ContractExample(nullptr);
    const std::string route(len, '\x01');  // six bytes a byte escaped
    r.route = route;
    const size_t n = FormatDecisionLine(r, buf);
    ASSERT_NE(n, 0u) << "a route of " << len << " bytes made no line";
    const std::string line(buf.data(), n);
    std::string cut;
    for (size_t i = 0; i < kDecisionRouteCap; ++i) cut += "\\u0001";
    EXPECT_NE(line.find(",\"route\":\"" + cut + std::string(kDecisionTruncated) + "\",\"client\":\"\""),
              std::string::npos)
        << line.substr(0, 200);
    EXPECT_TRUE(line.ends_with("\",\"truncated\":true}\n")) << line.substr(line.size() - 40);
  }
  // Every string field is capped the same way, and a cut never splits a
  // UTF-8 character (a reader gets whole characters, then the marker).
  DecisionRecord r = ContractExample(nullptr);
  std::string key(kDecisionKeyCap - 1, 'k');
  key += "\xC3\xA9tail";  // the cap falls inside the two-byte e-acute
  const std::string biz(kDecisionBizCap + 1, 'b'), rule(kDecisionRuleCap + 9, 'r');
  r.key = key;
  r.biz = biz;
  r.rule = rule;
  r.shadow = true;
  const std::string line(buf.data(), FormatDecisionLine(r, buf));
  ASSERT_FALSE(line.empty());
  EXPECT_NE(line.find("\"key\":\"" + std::string(kDecisionKeyCap - 1, 'k') + "...\""), std::string::npos);
  EXPECT_NE(line.find("\"biz\":\"" + std::string(kDecisionBizCap, 'b') + "...\""), std::string::npos);
  EXPECT_NE(line.find("\"rule\":\"" + std::string(kDecisionRuleCap, 'r') + "...\""), std::string::npos);
  EXPECT_TRUE(line.ends_with("\",\"truncated\":true,\"shadow\":true}\n")) << line.substr(line.size() - 40);
  // Strings within their caps are written whole, without the field.
  EXPECT_EQ(Line(ContractExample(nullptr)).find("truncated"), std::string::npos);
}

std::string TestLine(size_t i, size_t width = 100) {
  std::string s = "{\"i\":" + std::to_string(i) + ",\"pad\":\"";
  s.append(width - s.size() - 3, 'x');
  return s + "\"}\n";
}

// Reads SOCK_SEQPACKET messages (one per write(2)) until EOF.
std::vector<std::string> ReadMessages(int fd) {
  std::vector<std::string> out;
  std::vector<char> buf(256 * 1024);
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    out.emplace_back(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

TEST(DecisionLog, EachWriteHoldsWholeLinesAndAtMost64KB) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  int big = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  DecisionLogCounters counters{};
  std::vector<std::string> messages;
  std::thread reader([&] { messages = ReadMessages(sv[1]); });
  const size_t kLines = 20000;
  {
    DecisionLogOptions o;
    o.buffer_bytes = 8u << 20;  // room for all: nothing dropped
    auto log = DecisionLog::OpenFdForTesting(o, &counters, os::UniqueFd(sv[0]));
    for (size_t i = 0; i < kLines; ++i) log->Append(TestLine(i, 90 + i % 50));
    log->Flush();
  }  // closes its end: the reader sees EOF
  reader.join();
  close(sv[1]);
  size_t lines = 0, next = 0;
  bool multi_line_write = false;
  for (const std::string& m : messages) {
    ASSERT_LE(m.size(), DecisionLog::kMaxWriteBytes);
    ASSERT_FALSE(m.empty());
    ASSERT_EQ(m.back(), '\n') << "a write ended inside a line";
    size_t start = 0, in_message = 0;
    for (size_t nl = m.find('\n'); nl != std::string::npos; nl = m.find('\n', start)) {
      ASSERT_EQ(m.substr(start, nl + 1 - start), TestLine(next, 90 + next % 50));
      ++next;
      ++lines;
      ++in_message;
      start = nl + 1;
    }
    multi_line_write = multi_line_write || in_message > 1;
  }
  EXPECT_EQ(lines, kLines);
  EXPECT_TRUE(multi_line_write) << "lines are written together, not one write(2) each";
  EXPECT_EQ(CounterGet(counters.lines), kLines);
  EXPECT_EQ(CounterGet(counters.dropped_full), 0u);
  EXPECT_EQ(CounterGet(counters.dropped_failed), 0u);
}

TEST(DecisionLog, AFullBufferDropsAndCountsWithoutWaiting) {
  // A writer stuck in write(2) (a socket no one reads yet: a stalled disk)
  // leaves the buffer to fill; later lines are dropped and counted, and
  // Append never waits for it.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  DecisionLogCounters counters{};
  const size_t kLines = 50000;
  std::vector<std::string> messages;
  std::thread reader;
  {
    DecisionLogOptions o;
    o.buffer_bytes = 16 * 1024;
    o.flush_every_ms = 5;
    auto log = DecisionLog::OpenFdForTesting(o, &counters, os::UniqueFd(sv[0]));
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kLines; ++i) log->Append(TestLine(i));
    const auto took = std::chrono::steady_clock::now() - start;
    // Nobody reads until the loop ends, so a loop that ends did not wait
    // for the writer; the bound catches an Append that waits a while per
    // line (1 ms a line would take 50 s), not a loaded machine (an ASan
    // build beside CI's took 3 s against a bound of 2 that failed it).
    EXPECT_LT(took, std::chrono::seconds(30));
    EXPECT_GT(CounterGet(counters.dropped_full), 0u);
    // Were the worker killed now (its writer stuck), the master would count
    // what it kept and never wrote: on a copy, the log being alive.
    DecisionLogCounters dead{};
    for (auto [to, from] : {std::pair{&dead.kept, &counters.kept},
                            {&dead.lines, &counters.lines},
                            {&dead.dropped_failed, &counters.dropped_failed}})
      CounterSet(*to, CounterGet(*from));
    const uint64_t unwritten = kLines - CounterGet(counters.dropped_full) - CounterGet(counters.lines);
    EXPECT_GT(unwritten, 0u);
    EXPECT_EQ(DecisionLog::CountLost(&dead), unwritten);
    EXPECT_EQ(CounterGet(dead.dropped_failed), unwritten);
    EXPECT_EQ(DecisionLog::CountLost(&dead), 0u);  // counted once
    reader = std::thread([&] { messages = ReadMessages(sv[1]); });
    log->Flush();
  }
  reader.join();
  close(sv[1]);
  size_t lines = 0;
  for (const std::string& m : messages) {
    ASSERT_EQ(m.back(), '\n');
    for (char c : m) lines += c == '\n';
  }
  EXPECT_EQ(lines, CounterGet(counters.lines));
  EXPECT_EQ(CounterGet(counters.lines) + CounterGet(counters.dropped_full), kLines);
  EXPECT_EQ(CounterGet(counters.dropped_failed), 0u);
  // Everything kept was written: a worker that exits now took nothing.
  EXPECT_EQ(CounterGet(counters.kept), CounterGet(counters.lines));
  EXPECT_EQ(DecisionLog::CountLost(&counters), 0u);
}

TEST(DecisionLog, FailedWritesAreCountedAndNothingBreaks) {
  // frsd's log into a file of the test's, to see the failure said there.
  frs::testing::TempDir dir;
  const std::string frsd_log = dir / "frsd.log";
  ASSERT_TRUE(Logger::Get().Configure(frsd_log, "worker 0").ok());
  DecisionLogCounters counters{};
  DecisionLogOptions o;
  o.file = "/dev/full";  // every write: ENOSPC
  auto log = DecisionLog::Start(o, &counters);
  for (size_t i = 0; i < 1000; ++i) log->Append(TestLine(i));
  log->Flush();
  EXPECT_EQ(CounterGet(counters.lines), 0u);
  EXPECT_EQ(CounterGet(counters.dropped_failed), 1000u);
  std::ifstream in(frsd_log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Said once (a minute), with the error, not once per lost line.
  EXPECT_NE(text.find("decision log: a write failed (No space left on device)"), std::string::npos) << text;
  size_t said = 0;
  for (size_t at = text.find("a write failed"); at != std::string::npos; at = text.find("a write failed", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << text;
  ASSERT_TRUE(Logger::Get().Configure("", "frsd").ok());
}

// A full disk's episode was said by its first failed write alone: the lines
// lost after it, and the writes taking lines again, went unsaid.
TEST(DecisionLog, WritesThatTakeLinesAgainAfterFailuresSayHowManyWentInAll) {
  frs::testing::TempDir dir;
  frs::testing::SmallDisk disk(dir / "small", "64k");
  if (!disk.mounted()) GTEST_SKIP() << "needs root to mount a small tmpfs (CI runs as root)";
  const std::string frsd_log = dir / "frsd.log";
  ASSERT_TRUE(Logger::Get().Configure(frsd_log, "worker 0").ok());
  DecisionLogCounters counters{};
  DecisionLogOptions o;
  o.file = dir / "small/decisions.log";
  auto log = DecisionLog::Start(o, &counters);
  const std::string filler = dir / "small/filler";
  ASSERT_EQ(std::system(("dd if=/dev/zero of='" + filler + "' bs=4k 2>/dev/null").c_str()) >> 8, 1) << "not full";
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 100; ++i) log->Append(TestLine(i));
    log->Flush();
  }
  const uint64_t lost = CounterGet(counters.dropped_failed);
  EXPECT_GE(lost, 200u);
  std::filesystem::remove(filler);
  log->Append(TestLine(0));
  log->Flush();
  std::ifstream in(frsd_log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("decision log: writing again; " + std::to_string(lost) +
                      " line(s) lost in all since the writes began to fail"),
            std::string::npos)
      << text;
  ASSERT_TRUE(Logger::Get().Configure("", "frsd").ok());
}

size_t LinesOf(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  size_t n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) n += c == '\n';
  std::fclose(f);
  return n;
}

// A decision log of its own: decisions.log in a temp dir.
struct LogInTempDir {
  // Flushed once: the writer has opened the file (a rename made after this
  // renames the file it writes).
  LogInTempDir() : log(DecisionLog::Start(Options(), &counters)) { log->Flush(); }
  DecisionLogOptions Options() const {
    DecisionLogOptions o;
    o.file = d / "decisions.log";
    return o;
  }
  frs::testing::TempDir d;
  DecisionLogCounters counters{};
  std::unique_ptr<DecisionLog> log;
};

TEST(DecisionLog, ReopenAfterARenameLosesAndRepeatsNothing) {
  LogInTempDir t;
  auto& [d, counters, log] = t;
  const DecisionLogOptions o = t.Options();
  for (size_t i = 0; i < 300; ++i) log->Append(TestLine(i));
  ASSERT_EQ(std::rename(o.file.c_str(), (d / "decisions.log.1").c_str()), 0);
  // Lines appended after the rename and before the reopen go to the old file.
  for (size_t i = 300; i < 500; ++i) log->Append(TestLine(i));
  log->Reopen();
  for (size_t i = 500; i < 700; ++i) log->Append(TestLine(i));
  log->Flush();
  EXPECT_EQ(LinesOf(d / "decisions.log.1") + LinesOf(o.file), 700u);
  EXPECT_GE(LinesOf(d / "decisions.log.1"), 500u);
  EXPECT_EQ(CounterGet(counters.lines), 700u);
  log.reset();
}

TEST(DecisionLog, AFileThatCannotBeOpenedIsAnErrorNamingIt) {
  DecisionLogCounters counters{};
  DecisionLogOptions o;
  o.file = "/nonexistent-dir/decisions.log";
  Status check = DecisionLog::CheckFile(o.file);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(check.message().find("/nonexistent-dir/decisions.log"), std::string::npos);
  // Started anyway (a worker's reload): its lines are counted lost.
  auto log = DecisionLog::Start(o, &counters);
  for (size_t i = 0; i < 10; ++i) log->Append(TestLine(i));
  log->Flush();
  EXPECT_EQ(CounterGet(counters.dropped_failed), 10u);
}

TEST(DecisionLog, RecordsDenialsOnlyUnlessAllAndSamples) {
  LogInTempDir t;
  DecisionLogOptions o = t.Options();
  auto& log = t.log;
  DecisionLog& l = *log;
  EXPECT_TRUE(l.Wants(true));
  EXPECT_FALSE(l.Wants(false));
  o.record_all = true;
  l.SetOptions(o);
  EXPECT_TRUE(l.Wants(false));
  o.sample = 0;
  l.SetOptions(o);
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(l.Wants(true));
  o.sample = 0.25;
  l.SetOptions(o);
  int kept = 0;
  for (int i = 0; i < 100000; ++i) kept += l.Wants(true);
  EXPECT_NEAR(kept, 25000, 1500);
}

}  // namespace
}  // namespace frs::server
