// server/xml_scanner.h: a strict scanner for the bodies nearly every client
// sends, so that they skip pugixml.
//
// Why: a member of a batch cost ~1,670 instructions in pugixml and the
// per-node walk (a third of a `query` decision; docs/performance.md, "The
// floor of HTTP"). The shapes it takes are
//
//   <request a="v" .../>
//   <batch[ answer="compact|full"]> <request a="v" .../> ... </batch>
//
// with whitespace (space, tab, CR, LF) around elements and between
// attributes, values in either quote holding no '&' and no '<'. The
// attributes go through RequestAttrs, as pugixml's do.
//
// The scanner never reports an error of its own and never changes the body:
// anything else (entities, comments, CDATA, an XML declaration, whitespace
// around '=', an end tag, a byte it does not expect, and every body that
// fails a check) makes it answer "not mine", and the caller decodes the
// same bytes with pugixml, which gives the answer or the error message it
// always gave. So a body it accepts decodes to exactly what pugixml's path
// would decode (tests/server/xml_scanner_test.cc compares the two).
//
// Thread safety: a pure function (it fills the caller's vector).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/wire.h"

namespace frs::server {

// True: `body` was one of the shapes above and every request in it checked
// out; `out` holds them (views into `body`), `is_batch` and `compact` say
// which root and answer form. False: decode it the slow way (`out` and the
// flags are then unspecified).
bool ScanSimpleBody(std::string_view body, uint32_t max_batch, std::vector<WireRequest>* out, bool* is_batch,
                    bool* compact);

}  // namespace frs::server
