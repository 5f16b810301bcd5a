// client/http_client.h: the blocking HTTP/1.1 client (frs/http_client.h),
// under the names frsd's catch-up and the tests use. Responses are parsed by
// Boost.Beast's parser, so no HTTP parsing is written here.
//
// Thread safety: as frs/http_client.h.
#pragma once

#include "frs/http_client.h"

namespace frs::client {

using frs::HttpClient;
using frs::HttpResponse;

}  // namespace frs::client
