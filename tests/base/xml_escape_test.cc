// Text into XML (base/xml_escape.h): markup characters become entities, and
// bytes XML does not allow become '?' unless the caller keeps them.
#include "base/xml_escape.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

namespace frs {
namespace {

std::string Escaped(std::string_view text, XmlBadBytes bad = XmlBadBytes::kReplace) {
  std::string out;
  AppendXmlEscaped(text, &out, bad);
  return out;
}

TEST(XmlEscape, EachMarkupCharacterIsAnEntity) {
  const std::pair<const char*, const char*> cases[] = {
      {"&", "&amp;"},
      {"<", "&lt;"},
      {">", "&gt;"},
      {"\"", "&quot;"},
      {"'", "&apos;"},
      {"a<b>&\"c'd", "a&lt;b&gt;&amp;&quot;c&apos;d"},
      {"&amp;", "&amp;amp;"},  // escaped once more, never taken for an entity
      {"plain text, tab\tnew\nline\r", "plain text, tab\tnew\nline\r"},
      {"", ""},
  };
  for (const auto& [text, xml] : cases) EXPECT_EQ(Escaped(text), xml) << text;
}

TEST(XmlEscape, AppendsToWhatIsThere) {
  std::string out = "<r k=\"";
  AppendXmlEscaped("a&b", &out);
  EXPECT_EQ(out, "<r k=\"a&amp;b");
}

// Any bytes echoed into an answer (a route, a key in a message) leave it
// well-formed XML: a byte outside a character XML allows becomes '?'.
TEST(XmlEscape, BytesXmlDoesNotAllowBecomeQuestionMarks) {
  EXPECT_EQ(Escaped(std::string_view("a\xff\xfe"
                                     "b\xc3\xa9"
                                     "c\xe2\x82\xac\xf0\x9f\x98\x80"
                                     "d\xc3")),
            "a??b\xc3\xa9"
            "c\xe2\x82\xac\xf0\x9f\x98\x80"
            "d?");
  // Overlong, surrogate, U+FFFE, a control character, a cut sequence.
  EXPECT_EQ(Escaped(std::string_view("\xc0\xaf|\xed\xa0\x80|\xef\xbf\xbe|\x01|\xe2\x82")), "??|???|???|?|??");
  EXPECT_EQ(Escaped(std::string_view("\0", 1)), "?");
  EXPECT_EQ(Escaped(std::string_view("\xf4\x90\x80\x80")), "????") << "past U+10FFFF";
  EXPECT_EQ(Escaped(std::string_view("\xf4\x8f\xbf\xbd")), "\xf4\x8f\xbf\xbd") << "U+10FFFD is allowed";
}

TEST(XmlEscape, KeptBytesPassAsTheyAre) {
  const std::string_view bad("k\xff\x01\xc0\xaf");
  EXPECT_EQ(Escaped(bad, XmlBadBytes::kKeep), bad);
  EXPECT_EQ(Escaped(std::string_view("\xff<\x01&"), XmlBadBytes::kKeep), "\xff&lt;\x01&amp;") << "markup still escaped";
}

}  // namespace
}  // namespace frs
