// limit/xml_shape.h: what pugixml accepts but a configuration file of FRS
// must not hold (map.xml, srv.xml).
//
// pugixml parses a document leniently: a second element or text after the
// root element, and an attribute given twice (the last one wins for a
// reader that looks it up by name, the first for one that walks them), are
// not errors to it. In a configuration each is a typo that silently drops
// or changes a limit, so both files are refused whole for them. So is a
// doctype that holds more than its name (a SYSTEM or PUBLIC DTD, entities
// declared inside it): pugixml neither reads nor applies a DTD, so a value
// written as `&name;` would reach the setting as those bytes.
//
// Thread safety: pure functions (they only read the document or the text).
#pragma once

#include <cstddef>
#include <optional>
#include <pugixml.hpp>
#include <string>
#include <string_view>

namespace frs::limit {

// How both files are parsed: as a fragment, so that text after the root
// element is kept as a node (pugixml drops it from a document) and
// FindXmlShapeProblem can refuse it; with the doctype kept as a node, so
// that one declaring entities is refused rather than skipped (pugixml
// expands none: `&name;` would be read as those six bytes).
inline constexpr unsigned kConfigXmlFlags = pugi::parse_default | pugi::parse_fragment | pugi::parse_doctype;

struct XmlShapeProblem {
  std::ptrdiff_t offset = 0;  // of the node at fault, for the file:line
  std::string message;
};

// The first problem in `doc` (document order), or none. `root` names the
// root element the file must have, for the message.
std::optional<XmlShapeProblem> FindXmlShapeProblem(const pugi::xml_document& doc, const char* root);

// A NUL in the file's bytes, or a character reference to one (`&#0;`,
// `&#x0;`), which XML forbids: pugixml reads a value up to it, so
// `max="5&#0;000"` was max 5 and a name stopped short, and a NUL byte
// ended the file where it stood. Asked of the text before it is parsed.
std::optional<XmlShapeProblem> FindNulProblem(std::string_view text);

}  // namespace frs::limit
