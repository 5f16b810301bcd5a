// frsctl/json_out.h: --json output is written by FRS's one JSON writer
// (frs/json_writer.h), under the name frsctl's commands use.
//
// Usage: JsonOut j; j.BeginObject().Key("slots").Int(10).EndObject(); j.str().
//
// Thread safety: a value used by one thread.
#pragma once

#include "frs/json_writer.h"

namespace frs::ctl {

using JsonOut = frs::JsonWriter;

}  // namespace frs::ctl
