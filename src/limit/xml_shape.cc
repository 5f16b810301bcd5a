#include "limit/xml_shape.h"

#include <string_view>

namespace frs::limit {
namespace {

std::optional<XmlShapeProblem> RepeatedAttribute(const pugi::xml_node& n) {
  for (pugi::xml_attribute a = n.first_attribute(); a; a = a.next_attribute())
    for (pugi::xml_attribute b = a.next_attribute(); b; b = b.next_attribute())
      if (std::string_view(a.name()) == b.name())
        return XmlShapeProblem{n.offset_debug(), "<" + std::string(n.name()) + ">: attribute '" +
                                                     std::string(a.name()) + "' is given twice"};
  for (pugi::xml_node c : n.children())
    if (c.type() == pugi::node_element)
      if (auto p = RepeatedAttribute(c)) return p;
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
      default: break;  // the declaration, a doctype or a processing instruction
    }
  }
  return std::nullopt;
}

}  // namespace frs::limit
