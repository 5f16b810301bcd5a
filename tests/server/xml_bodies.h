// tests/server/xml_bodies.h: request bodies refused for what they hold (a
// control character, an undefined entity, content beside the one root
// element). protocol_test.cc checks that each is a 400 with a sentence;
// xml_scanner_test.cc, that the fast scanner leaves each to pugixml and both
// paths refuse it alike.
#pragma once

#include <string>
#include <vector>

namespace frs::server {

inline std::vector<std::string> RefusedXmlBodies() {
  return {
      R"(<request cmd="acquire" biz="login" key="alice&#0;x"/>)",
      R"(<request cmd="acquire" biz="login" key="alice&#x0;x"/>)",
      R"(<request cmd="acquire" biz="login&#0;x" key="alice"/>)",
      R"(<request cmd="acquire&#0;x" biz="login" key="alice"/>)",
      R"(<request cmd="reset" biz="login" token="s3cret&#0;junk"/>)",
      std::string("<request cmd=\"acquire\" biz=\"login\" key=\"alice") + '\0' + "x\"/>",
      R"(<request cmd="acquire" biz="login" key="a&#9;b"/>)",
      R"(<request cmd="acquire" biz="log&#10;in" key="a"/>)",
      R"(<request cmd="reset" biz="login" token="t&#127;"/>)",
      R"(<request cmd="acquire" biz="login" key="a&#x85;b"/>)",
      R"(<request cmd="acquire" biz="login" key="a&#1;b"/>)",
      R"(<request cmd="acquire" biz="login" key="alice"/><request cmd="acquire" biz="login" key="bob"/>)",
      R"(<request cmd="acquire" biz="login" key="alice"/>trailing)",
      R"(<request cmd="acquire" biz="login" key="alice"/>x)",
      std::string("<request cmd=\"acquire\" biz=\"login\" key=\"a\xEF\xBF\xBE") + "b\"/>",
      "<request cmd=\"acquire\" biz=\"login\" key=\"alice\"/>\nx\n",
      R"(<request cmd="acquire" biz="login" key="alice"/><!-- c -->x)",
      R"(garbage<request cmd="acquire" biz="login" key="alice"/>)",
      R"(<request cmd="acquire" biz="login" key="alice"><![CDATA[x]]></request>)",
      R"(<request cmd="acquire" biz="login" key="alice"><![CDATA[]]></request>)",
      R"(<request cmd="acquire" biz="login" key="alice">text</request>)",
      R"(<batch><![CDATA[ ]]><request cmd="acquire" biz="login" key="a"/></batch>)",
      R"(<request cmd="acquire" biz="login" key="&foo;"/>)",
      R"(<request cmd="acquire" biz="login" key="a&b"/>)",
      R"(<request cmd="acquire" biz="login" key="&#xD800;"/>)",
      R"(<?pi x?><request cmd="acquire" biz="login" key="a"/>)",
  };
}

}  // namespace frs::server
