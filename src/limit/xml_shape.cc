#include "limit/xml_shape.h"

#include <cstdint>
#include <string_view>
#include <utility>

namespace frs::limit {
namespace {

std::optional<XmlShapeProblem> RepeatedAttributeOf(const pugi::xml_node& n) {
  for (pugi::xml_attribute a = n.first_attribute(); a; a = a.next_attribute())
    for (pugi::xml_attribute b = a.next_attribute(); b; b = b.next_attribute())
      if (std::string_view(a.name()) == b.name())
        return XmlShapeProblem{n.offset_debug(), "<" + std::string(n.name()) + ">: attribute '" +
                                                     std::string(a.name()) + "' is given twice"};
  return std::nullopt;
}

// The first element of `n`'s children, or of the siblings after `n`, or
// null.
pugi::xml_node FirstElement(pugi::xml_node n) {
  while (n && n.type() != pugi::node_element) n = n.next_sibling();
  return n;
}

// Every element under `root`, `root` included, in document order, without
// recursion: a file of 25,000 nested elements (175 KB) overflowed the stack
// of a recursive walk, and a reload of one killed the master.
std::optional<XmlShapeProblem> RepeatedAttribute(const pugi::xml_node& root) {
  pugi::xml_node n = root;
  while (n) {
    if (auto p = RepeatedAttributeOf(n)) return p;
    if (pugi::xml_node child = FirstElement(n.first_child())) {
      n = child;
      continue;
    }
    // Up until a node with an element after it, never past `root`.
    while (n != root && !FirstElement(n.next_sibling())) n = n.parent();
    n = n == root ? pugi::xml_node() : FirstElement(n.next_sibling());
  }
  return std::nullopt;
}

}  // namespace

std::optional<XmlShapeProblem> FindXmlShapeProblem(const pugi::xml_document& doc, const char* root) {
  bool seen_root = false;
  for (pugi::xml_node n : doc.children()) {
    switch (n.type()) {
      case pugi::node_element:
        if (seen_root)
          return XmlShapeProblem{n.offset_debug(), "<" + std::string(n.name()) + "> after </" + root +
                                                       ">: a file holds one <" + root + "> and nothing after it"};
        seen_root = true;
        if (auto p = RepeatedAttribute(n)) return p;
        break;
      case pugi::node_pcdata:
      case pugi::node_cdata: {
        // At the text itself, not at the line breaks before it.
        const std::string_view text = n.value();
        const size_t at = n.type() == pugi::node_pcdata ? text.find_first_not_of(" \t\r\n") : 0;
        return XmlShapeProblem{n.offset_debug() + static_cast<std::ptrdiff_t>(at == std::string_view::npos ? 0 : at),
                               std::string("text outside <") + root + ">"};
      }
      case pugi::node_doctype: {
        // `<!DOCTYPE frs>` says nothing; anything after the name (a SYSTEM
        // or PUBLIC DTD, an internal subset) declares what nothing here
        // reads.
        std::string_view v = n.value();
        v = v.substr(0, v.find_last_not_of(" \t\r\n") + 1);
        if (v.find_first_of(" \t\r\n[") != std::string_view::npos)
          return XmlShapeProblem{n.offset_debug(),
                                 "a <!DOCTYPE> that names a DTD or declares entities: neither is read (an entity "
                                 "reference stays as written); write the values out and keep at most "
                                 "<!DOCTYPE name>"};
        break;
      }
      default: break;  // the declaration or a processing instruction
    }
  }
  return std::nullopt;
}

std::optional<XmlShapeProblem> FindNulProblem(std::string_view text) {
  constexpr size_t npos = std::string_view::npos;
  if (const size_t at = text.find('\0'); at != npos)
    return XmlShapeProblem{static_cast<std::ptrdiff_t>(at),
                           "a NUL byte, which XML does not allow: the file would be read as ending here"};
  // One pass: a comment or a CDATA section is skipped whole (`&#0;` in it
  // is those four characters, no reference), each "<!" found once.
  size_t lt = text.find("<!");
  size_t at = text.find("&#");
  while (at != npos) {
    if (lt != npos && lt < at) {
      size_t past = lt + 2;
      for (const auto& [open, close] : {std::pair<std::string_view, std::string_view>{"<!--", "-->"},
                                        std::pair<std::string_view, std::string_view>{"<![CDATA[", "]]>"}})
        if (text.substr(lt, open.size()) == open) {
          const size_t c = text.find(close, lt + open.size());
          if (c == npos) return std::nullopt;  // never closed: pugixml refuses the file
          past = c + close.size();
        }
      lt = text.find("<!", past);
      if (past > at) at = text.find("&#", past);
      continue;
    }
    size_t i = at + 2;
    const bool hex = i < text.size() && text[i] == 'x';
    if (hex) ++i;
    const size_t digits = i;
    uint64_t value = 0;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      int d = c >= '0' && c <= '9' ? c - '0' : -1;
      if (hex && d < 0 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) d = (c | 0x20) - 'a' + 10;
      if (d < 0) break;
      // Any number of leading zeros is still NUL; past Unicode's last
      // character the value only needs to stay above 0.
      if (value <= 0x10FFFF) value = value * (hex ? 16 : 10) + static_cast<uint64_t>(d);
    }
    if (i > digits && i < text.size() && text[i] == ';' && value == 0)
      return XmlShapeProblem{static_cast<std::ptrdiff_t>(at),
                             "a character reference to NUL (" + std::string(text.substr(at, i + 1 - at)) +
                                 "), which XML does not allow: a value would be read up to it and no further"};
    at = text.find("&#", at + 2);
  }
  return std::nullopt;
}

}  // namespace frs::limit
