// NextQueryParam and PercentDecode scan 16 bytes at a step: their answers
// against a byte-at-a-time reference on random query strings, each in a heap
// block of exactly its length (ASan: a load past its end is a failure).
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "server/request_decoder.h"

namespace frs::server {
namespace {

struct Pair {
  std::string name, value;
  bool operator==(const Pair&) const = default;
};

// The query's pairs as server/request_decoder.h defines them: split at '&',
// empty pairs skipped, each split at its first '='.
std::vector<Pair> Reference(std::string_view q) {
  std::vector<Pair> out;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) out.push_back({std::string(pair), ""});
    else out.push_back({std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1))});
  }
  return out;
}

TEST(QueryScan, SixteenBytesAtOnceAnswerAsOneAtATime) {
  std::mt19937 rng(20261202);
  // Few '&' and '=' in some strings, many in others: pairs of every length
  // across the 16-byte steps.
  const std::string alphabets[] = {"ab0=&", "abcdefgh0123456789=&", "abcdefghijklmnopqrstuvwxyz0123456789:%+=&"};
  for (int round = 0; round < 20000; ++round) {
    const std::string& alpha = alphabets[round % 3];
    const size_t len = rng() % 90;
    auto block = std::make_unique<char[]>(len);  // new char[0] is valid; ASan flags any read of it
    for (size_t i = 0; i < len; ++i) block[i] = alpha[rng() % alpha.size()];
    const std::string_view query(block.get(), len);

    std::vector<Pair> got;
    std::string_view rest = query, name, value;
    while (NextQueryParam(&rest, &name, &value)) got.push_back({std::string(name), std::string(value)});
    ASSERT_EQ(got, Reference(query)) << "query \"" << query << "\"";
    EXPECT_TRUE(rest.empty());

    // PercentDecode: `in` itself exactly when it holds no '%' and no '+'.
    std::string buf;
    std::string_view out;
    const bool ok = PercentDecode(query, &buf, &out);
    const bool plain = query.find_first_of("%+") == std::string_view::npos;
    if (plain) {
      ASSERT_TRUE(ok);
      EXPECT_EQ(out.data(), query.data()) << query;
    } else if (ok) {
      EXPECT_NE(out.data(), query.data()) << query;
      std::string want;  // the decoding, byte at a time
      for (size_t i = 0; i < query.size(); ++i) {
        if (query[i] == '+') {
          want += ' ';
        } else if (query[i] == '%') {
          want += static_cast<char>(std::stoi(std::string(query.substr(i + 1, 2)), nullptr, 16));
          i += 2;
        } else {
          want += query[i];
        }
      }
      EXPECT_EQ(out, want) << query;
    } else {
      // Refused only for a '%' without two hex digits after it.
      bool malformed = false;
      for (size_t i = 0; i < query.size(); ++i)
        if (query[i] == '%') {
          malformed = i + 2 >= query.size() || !std::isxdigit(static_cast<unsigned char>(query[i + 1])) ||
                      !std::isxdigit(static_cast<unsigned char>(query[i + 2]));
          if (malformed) break;
          i += 2;
        }
      EXPECT_TRUE(malformed) << query;
    }
  }
}

}  // namespace
}  // namespace frs::server
