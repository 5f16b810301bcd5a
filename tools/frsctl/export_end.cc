#include "export_end.h"

#include <charconv>

namespace frs::ctl {
namespace {

constexpr std::string_view kHead = "{\"end\":{\"nodes\":";
constexpr std::string_view kMiddle = ",\"receipts\":";
constexpr std::string_view kTail = "}}";

bool Number(std::string_view* s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), *v);
  if (ec != std::errc() || p == s->data()) return false;
  s->remove_prefix(static_cast<size_t>(p - s->data()));
  return true;
}

}  // namespace

std::string ExportEndLine(uint64_t nodes, uint64_t receipts) {
  return std::string(kHead) + std::to_string(nodes) + std::string(kMiddle) + std::to_string(receipts) +
         std::string(kTail);
}

bool IsExportEndLine(std::string_view line) { return line.starts_with("{\"end\":"); }

Status ParseExportEndLine(std::string_view line, uint64_t* nodes, uint64_t* receipts) {
  // Exactly as ExportEndLine writes it: the line is frsctl's own, and one
  // in another form was edited.
  std::string_view s = line;
  if (s.starts_with(kHead)) {
    s.remove_prefix(kHead.size());
    if (Number(&s, nodes) && s.starts_with(kMiddle)) {
      s.remove_prefix(kMiddle.size());
      if (Number(&s, receipts) && s == kTail) return Status::OK();
    }
  }
  return Status::InvalidArgument("an end line is {\"end\":{\"nodes\":N,\"receipts\":M}}, as export writes it");
}

}  // namespace frs::ctl
