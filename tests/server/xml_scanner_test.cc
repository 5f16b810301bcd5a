// The fast scanner (server/xml_scanner.h) against pugixml's path: for every
// body, hand-written and generated, both decoders must give the same
// requests, or the same error (the scanner hands every error to pugixml).
#include "server/xml_scanner.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "server/request_decoder.h"
#include "server/xml_bodies.h"

namespace frs::server {
namespace {

struct Outcome {
  bool ok = false;
  bool batch = false;
  bool compact = false;
  bool fast = false;
  std::vector<WireRequest> reqs;
  ProtocolError err;
};

Outcome Run(bool fast_path, std::string body, uint32_t max_batch, std::string* keep) {
  // The decoders read in place: each gets its own copy, kept alive for the
  // views in `reqs`.
  *keep = std::move(body);
  XmlRequestDecoder d(fast_path);
  Outcome o;
  o.ok = d.Decode(keep->data(), keep->size(), max_batch, &o.reqs, &o.batch, &o.err);
  o.compact = d.compact();
  o.fast = d.last_was_fast();
  return o;
}

std::string Show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) out.push_back(static_cast<char>(c));
    else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

// Every field of a decoded request, to compare two at once.
auto Fields(const WireRequest& r) {
  return std::tie(r.cmd, r.biz, r.key, r.token, r.has_token, r.route, r.route_key, r.receipt, r.node, r.n, r.count,
                  r.route_known, r.route_pos, r.replace);
}

// Decodes `body` both ways and compares everything; returns whether the
// fast path took it.
bool Same(const std::string& body, uint32_t max_batch = 64) {
  std::string a_buf, b_buf;
  const Outcome a = Run(true, body, max_batch, &a_buf);
  const Outcome b = Run(false, body, max_batch, &b_buf);
  SCOPED_TRACE(Show(body));
  EXPECT_FALSE(b.fast);
  EXPECT_EQ(a.ok, b.ok);
  if (a.ok != b.ok) return a.fast;
  if (!a.ok) {
    EXPECT_FALSE(a.fast);
    EXPECT_EQ(a.err.status, b.err.status);
    EXPECT_EQ(a.err.msg, b.err.msg);
    return a.fast;
  }
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.compact, b.compact);
  EXPECT_EQ(a.reqs.size(), b.reqs.size());
  for (size_t i = 0; i < a.reqs.size() && i < b.reqs.size(); ++i) {
    const WireRequest &x = a.reqs[i], &y = b.reqs[i];
    SCOPED_TRACE("member " + std::to_string(i + 1));
    EXPECT_EQ(Fields(x), Fields(y));
  }
  return a.fast;
}

TEST(XmlScanner, TakesTheCommonShapes) {
  const std::string fast[] = {
      R"(<request cmd="acquire" biz="login" key="user:42" n="3"/>)",
      R"(<request cmd='acquire' biz='login' key='user:42'/>)",
      R"(<request key="k" n="2" biz="b" cmd="update"/>)",
      "  \r\n<request cmd=\"query\"\tbiz=\"b\"\nkey=\"k\" />\n",
      R"(<request cmd="reset" biz="login" token="t0k"/>)",
      R"(<request cmd="set" biz="b" key="k" count="0" token="x"/>)",
      R"(<request cmd="get" biz="1" key="a'b"/>)",
      R"(<request cmd="get" biz="1" key='a"b'/>)",
      R"(<request cmd="get" biz="1" key="a>b"/>)",
      "<request cmd=\"get\" biz=\"1\" key=\"caf\xc3\xa9 \xe2\x82\xac\"/>",
      R"(<batch><request cmd="query" biz="bench" key="k1"/><request cmd="query" biz="bench" key="k2"/></batch>)",
      R"(<batch answer="compact"><request cmd="query" biz="bench" key="k1"/></batch>)",
      R"(<batch answer='full' ><request cmd="acquire" biz="b" key="k" n="1"/></batch>  )",
      "<batch>\n  <request cmd=\"update\" biz=\"b\" key=\"k\"/>\n  <request cmd=\"delete\" biz=\"b\" key=\"k\" "
      "token=\"t\"/>\n</batch>\n",
      R"(<batch><request cmd="merge" receipt="r1" node="{}" token="t"/></batch>)",
      R"(<batch><request cmd="merge" receipt="r1" replace="1" node="{}" token="t"/></batch>)",
      R"(<request cmd="merge" receipt="r1" replace="0" node="{}" token="t"/>)",
      // The handler refuses these; the decoders both accept them.
      R"(<request cmd="stats"/>)",
      R"(<batch><request cmd="merge" receipt="r" node="{}" token="t"/><request cmd="query" biz="b" key="k"/></batch>)",
      "<request cmd=\"query\" biz=\"b\" key=\"" + std::string(255, 'k') + "\"/>",
  };
  for (const std::string& body : fast) EXPECT_TRUE(Same(body)) << body;
}

TEST(XmlScanner, HandsEverythingElseToPugixml) {
  const std::string slow[] = {
      "",
      "   ",
      R"(<request cmd="acquire" biz="login" key="a&amp;b"/>)",
      R"(<request cmd="acquire" biz="login" key="a&#x41;b"/>)",
      R"(<request cmd="acquire" biz="login" key="a&foo;b"/>)",
      "<request cmd=\"acquire\" biz=\"login\" key=\"a\tb\"/>",
      "<request cmd=\"acquire\" biz=\"login\" key=\"a\x7f\"/>",
      "<request cmd=\"acquire\" biz=\"login\" key=\"a\xc2\x85\"/>",
      "<request cmd=\"acquire\" biz=\"login\" key=\"a\xff\"/>",
      R"(<request cmd="acquire" biz="login" key="a<b"/>)",
      R"(<request cmd="acquire" biz="login" key="k" key="k"/>)",
      R"(<request cmd="acquire" cmd="query" biz="login" key="k"/>)",
      R"(<request cmd="acquire" biz="login" key="k" color="red"/>)",
      R"(<request cmd="acquire" biz="login" key="k" Key="k"/>)",
      R"(<request cmd = "acquire" biz="login" key="k"/>)",
      R"(<request cmd="acquire"biz="login" key="k"/>)",
      R"(<request cmd="acquire" biz="login" key="k"></request>)",
      R"(<request cmd="acquire" biz="login" key="k"><!-- c --></request>)",
      R"(<request cmd="acquire" biz="login" key="k"/><!-- trailing -->)",
      R"(<!-- leading --><request cmd="acquire" biz="login" key="k"/>)",
      R"(<?xml version="1.0"?><request cmd="acquire" biz="login" key="k"/>)",
      "\xef\xbb\xbf<request cmd=\"acquire\" biz=\"login\" key=\"k\"/>",
      "\v<request cmd=\"acquire\" biz=\"login\" key=\"k\"/>",
      "<request cmd=\"acquire\" biz=\"login\"\fkey=\"k\"/>",
      R"(<request cmd="acquire" biz="login" key="k"/><request cmd="acquire" biz="login" key="k"/>)",
      R"(<request cmd="acquire" biz="" key="k"/>)",
      R"(<request cmd="acquire" biz="b" key=""/>)",
      R"(<request cmd="acquire" biz="b" key="k" n="0"/>)",
      R"(<request cmd="acquire" biz="b" key="k" n="+1"/>)",
      R"(<request cmd="acquire" biz="b" key="k" n="2147483648"/>)",
      R"(<request cmd="acquire" biz="b" key="k" count="1"/>)",
      R"(<request cmd="jump" biz="b" key="k"/>)",
      R"(<request cmd="reset" biz="b" key="k"/>)",
      R"(<request cmd="acquire" biz="b" key="k")",
      R"(<request cmd="acquire" biz="b" key="k/>)",
      R"(<requests cmd="acquire" biz="b" key="k"/>)",
      "<request cmd=\"query\" biz=\"b\" key=\"" + std::string(256, 'k') + "\"/>",
      R"(<batch></batch>)",
      R"(<batch/>)",
      R"(<batch answer="terse"><request cmd="query" biz="b" key="k"/></batch>)",
      R"(<batch answer="compact" answer="full"><request cmd="query" biz="b" key="k"/></batch>)",
      R"(<batch mode="x"><request cmd="query" biz="b" key="k"/></batch>)",
      R"(<batch><request cmd="stats"/></batch>)",
      R"(<batch><request cmd="query" biz="b" key="k"/>text</batch>)",
      R"(<batch><request cmd="query" biz="b" key="k"/><![CDATA[x]]></batch>)",
      R"(<batch><request cmd="query" biz="b" key="k"/><!-- c --></batch>)",
      R"(<batch><batch><request cmd="query" biz="b" key="k"/></batch></batch>)",
      R"(<batch><request cmd="query" biz="b" key="k"/></batch >)",
      R"(<batch><request cmd="query" biz="b" key="k"/></batch>x)",
      R"(<batch><request cmd="query" biz="b" key="k"/>)",
      R"(<batch><request cmd="query" biz="b" key="k" receipt="r"/></batch>)",
      R"(<batch><request cmd="query" biz="b" key="k" replace="1"/></batch>)",
      R"(<batch><request cmd="merge" receipt="r" replace="yes" node="{}" token="t"/></batch>)",
      R"(<batch><request cmd="merge" receipt="r" replace="1" replace="1" node="{}" token="t"/></batch>)",
  };
  for (const std::string& body : slow) EXPECT_FALSE(Same(body)) << body;
  // And every body refused for what it holds (protocol_test.cc answers each with a 400).
  for (const std::string& body : RefusedXmlBodies()) EXPECT_FALSE(Same(body)) << body;
}

// A member whose bytes up to its key's value repeat the previous member's
// is read from its key on (the rest taken as the previous member had it):
// pairs that share such a prefix, or nearly do, decode as pugixml decodes
// them, and the valid ones take the fast path.
TEST(XmlScanner, MembersRepeatingThePreviousPrefixDecodeAsPugixmlDoes) {
  const std::string m = R"(<request cmd="query" biz="bench" key="k1"/>)";
  const std::pair<std::string, bool> seconds[] = {
      {R"(<request cmd="query" biz="bench" key="k2"/>)", true},
      {R"(<request cmd="query" biz="bench" key="k2" n="3"/>)", true},
      {R"(<request cmd="query" biz="bench" key="k2" token="t"/>)", true},
      {R"(<request cmd="query" biz="bench" key="k2"  />)", true},
      {R"(<request cmd="query" biz="bench" key="caf)"
       "\xc3\xa9"
       R"("/>)",
       true},
      {R"(<request cmd="query" biz="bench" key="a'b"/>)", true},
      {R"(<request cmd="query" biz="bench" key='k2'/>)", true},
      {R"(<request cmd="query" biz="bench2" key="k2"/>)", true},
      {R"(<request cmd="query" biz="benc" key="k2"/>)", true},
      {R"(<request cmd="update" biz="bench" key="k2"/>)", true},
      {R"(<request  cmd="query" biz="bench" key="k2"/>)", true},
      {R"(<request cmd="query" key="k2" biz="bench"/>)", true},
      {R"(<request cmd="query" biz="bench" key=""/>)", false},
      {R"(<request cmd="query" biz="bench" key="k2" key="k3"/>)", false},
      {R"(<request cmd="query" biz="bench" key="k2" biz="b"/>)", false},
      {R"(<request cmd="query" biz="bench" key="k2" n="0"/>)", false},
      {R"(<request cmd="query" biz="bench" key="a&amp;b"/>)", false},
      {R"(<request cmd="query" biz="bench" key="a)"
       "\xff"
       R"("/>)",
       false},
      {R"(<request cmd="query" biz="bench" key="k2"></request>)", false},
      {R"(<request cmd="query" biz="bench" key="k2)", false},
      {R"(<request cmd="query" biz="bench" key=")", false},
      {R"(<request cmd="query" biz="bench" key=)", false},
  };
  for (const auto& [second, valid] : seconds) {
    for (const std::string& body : {"<batch>" + m + second + "</batch>", "<batch>" + m + second + m + "</batch>",
                                    "<batch>" + second + m + second + "</batch>"}) {
      EXPECT_EQ(Same(body, 8), valid) << body;
    }
  }
  // A key first: its prefix is the key's name alone, and what follows the
  // key is read for each member.
  EXPECT_TRUE(
      Same(R"(<batch><request key="a" cmd="query" biz="b"/><request key="b" cmd="update" biz="c" n="2"/></batch>)"));
  // The next member's bytes are fewer than the prefix (the body ends).
  EXPECT_FALSE(Same("<batch>" + m + R"(<request cmd="query" biz="be)"));
}

TEST(XmlScanner, BatchLimitIsPugixmlsError) {
  std::string body = "<batch>";
  for (int i = 0; i < 5; ++i) body += "<request cmd=\"query\" biz=\"b\" key=\"k" + std::to_string(i) + "\"/>";
  body += "</batch>";
  EXPECT_TRUE(Same(body, 5));
  EXPECT_FALSE(Same(body, 4));
}

// Each byte that must stop the scanner's value loop (control characters,
// quotes, '&', '<', DEL, and 0xC2, the lead byte of C1), at every position
// of values of 1..40 bytes: the scan strides over eight bytes at a time
// and must not step over one.
TEST(XmlScanner, EveryStopByteIsSeenWhereverItFallsInAValue) {
  // And 0xFF, never UTF-8: a key holding it is refused, so a scan that
  // missed it would call the key printable ASCII and accept it.
  const char stops[] = {'\0', '\t', '\n', '\x1f', '"', '\'', '&', '<', '\x7f', '\xc2', '\xff'};
  for (size_t len = 1; len <= 40; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (char stop : stops) {
        std::string key(len, 'k');
        key[at] = stop;
        if (stop == '\xc2' && at + 1 < len) key[at + 1] = '\x85';  // NEL, a C1 control
        // In the key (which is checked again later) and in the biz (which
        // only the scanner and pugixml check for control characters).
        Same("<batch><request cmd=\"query\" biz=\"b\" key=\"" + key + "\"/></batch>");
        Same("<request cmd=\"query\" biz=\"" + key + "\" key=\"k\"/>");
      }
    }
    EXPECT_TRUE(Same("<batch><request cmd=\"query\" biz=\"b\" key=\"" + std::string(len, 'k') + "\"/></batch>"));
  }
}

// Bodies built from pieces that each path may read differently, then
// mutated byte by byte: the paths agree on every one.
TEST(XmlScanner, AgreesWithPugixmlOnGeneratedBodies) {
  std::mt19937 rng(20261124);
  auto pick = [&](const auto& v) -> const auto& { return v[rng() % std::size(v)]; };
  const std::string names[] = {"cmd", "biz", "key", "n", "count", "token", "receipt", "node", "route", "x", "CMD"};
  const std::string cmds[] = {"query", "update", "acquire", "get", "set", "delete", "reset", "stats", "merge", "nope"};
  const std::string values[] = {"bench",
                                "k1",
                                "",
                                "1",
                                "0",
                                "64",
                                "-1",
                                "2147483647",
                                "a b",
                                "a'b",
                                "a\"b",
                                "&#0;",
                                "x&amp;y",
                                "&lt;",
                                "&#x20AC;",
                                "&foo;",
                                "&",
                                "<",
                                ">",
                                "\t",
                                "\x7f",
                                "\xc2\x85",
                                "\xc3\xa9",
                                "\xff",
                                std::string(300, 'v'),
                                std::string(255, 'k'),
                                "{\"biz\":1}",
                                "1e3",
                                " 5",
                                "5 "};
  const std::string seps[] = {" ", " ", " ", "  ", "\t", "\n", "\r\n", "", "\v", " = "};
  auto attr = [&]() {
    std::string name = pick(names);
    std::string value = name == "cmd" && rng() % 4 != 0 ? pick(cmds) : pick(values);
    const char q = rng() % 3 == 0 ? '\'' : '"';
    std::string eq = rng() % 20 == 0 ? " = " : "=";
    if (value.find(q) != std::string::npos && rng() % 2) value = "v";
    return name + eq + q + value + q;
  };
  auto request = [&]() {
    std::string r = "<request";
    const int nattrs = static_cast<int>(rng() % 6);
    bool has_cmd = false;
    for (int i = 0; i < nattrs; ++i) {
      r += pick(seps);
      if (!has_cmd && rng() % 3 != 0) {
        r += std::string("cmd=\"") + pick(cmds) + "\"";
        has_cmd = true;
      } else {
        r += attr();
      }
    }
    if (rng() % 3 == 0) r += " ";
    r += rng() % 25 == 0 ? "></request>" : "/>";
    return r;
  };
  // A typical member, so that many generated bodies are valid.
  auto good = [&]() {
    std::string r = std::string("<request cmd=\"") + (rng() % 2 ? "query" : "acquire") + "\" biz=\"bench\" key=\"k" +
                    std::to_string(rng() % 1000) + "\"";
    if (rng() % 3 == 0) r += " n=\"" + std::to_string(rng() % 5) + "\"";
    return r + "/>";
  };
  int fast = 0, total = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string body;
    if (rng() % 4 == 0) {
      body = rng() % 2 ? good() : request();
    } else {
      const int kind = static_cast<int>(rng() % 5);
      body = kind == 0   ? "<batch>"
             : kind == 1 ? "<batch answer=\"compact\">"
             : kind == 2 ? "<batch answer='full'>"
             : kind == 3 ? "<batch >"
                         : "<batch x=\"1\">";
      const int members = static_cast<int>(rng() % 6);
      for (int i = 0; i < members; ++i) {
        body += pick(seps);
        body += rng() % 3 ? good() : request();
        if (rng() % 40 == 0) body += "<!--c-->";
      }
      body += "</batch>";
    }
    if (rng() % 10 == 0) body = pick(seps) + body + pick(seps);
    ++total;
    fast += Same(body, 4);
    // Mutations of it: a byte replaced, inserted or removed.
    for (int m = 0; m < 4; ++m) {
      std::string mut = body;
      const char bytes[] = {'<', '>', '/', '"', '\'', '=', '&', ';', ' ', '\0', 'a', '\n', '\x80', '#'};
      const size_t at = mut.empty() ? 0 : rng() % mut.size();
      switch (rng() % 3) {
        case 0:
          if (!mut.empty()) mut[at] = pick(bytes);
          break;
        case 1: mut.insert(mut.begin() + static_cast<long>(at), pick(bytes)); break;
        default:
          if (!mut.empty()) mut.erase(at, 1);
      }
      ++total;
      fast += Same(mut, 4);
    }
    if (::testing::Test::HasFailure()) break;
  }
  // Enough of them took each path to make the comparison mean something.
  EXPECT_GT(fast, total / 20);
  EXPECT_LT(fast, total * 19 / 20);
}

}  // namespace
}  // namespace frs::server
