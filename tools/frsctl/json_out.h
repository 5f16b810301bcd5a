// frsctl/json_out.h: --json output is written by the one JSON writer of
// node export (limit/node_json.h), under the name frsctl's commands use.
//
// Usage: JsonOut j; j.BeginObject().Key("slots").Int(10).EndObject(); j.str().
//
// Thread safety: a value used by one thread.
#pragma once

#include "base/json_escape.h"
#include "limit/node_json.h"

namespace frs::ctl {

using JsonOut = limit::JsonWriter;
using frs::AppendJsonString;

}  // namespace frs::ctl
