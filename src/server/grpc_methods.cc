#include "server/grpc_methods.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "base/utf8.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "server/replicator.h"
#include "server/rls_request.h"
#include "server/rls_response.h"

namespace frs::server {

namespace {

constexpr std::string_view kShouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view kHealthCheck = "/grpc.health.v1.Health/Check";
constexpr std::string_view kHealthWatch = "/grpc.health.v1.Health/Watch";
constexpr std::string_view kRlsService = "envoy.service.ratelimit.v3.RateLimitService";

using RlsResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;
using Reply = GrpcService::Reply;

// upstream's short name for the service (its health checks use it).
constexpr std::string_view kRlsShortName = "ratelimit";

// `src`'s fields into `dest`, as envoyproxy/ratelimit merges the metadata of
// the descriptors that passed: two maps merge, else the first value stays.
void MergeStruct(google::protobuf::Struct* dest, const google::protobuf::Struct& src) {
  for (const auto& [k, v] : src.fields()) {
    auto& fields = *dest->mutable_fields();
    auto it = fields.find(k);
    if (it == fields.end()) {
      fields[k] = v;
    } else if (it->second.has_struct_value() && v.has_struct_value()) {
      MergeStruct(it->second.mutable_struct_value(), v.struct_value());
    }
  }
}

// A call answered with an error status.
void Fail(GrpcCode code, std::string message, Reply* out) {
  out->code = code;
  out->message = std::move(message);
}

// Parses `message` into `m` (cleared first); INVALID_ARGUMENT naming `type`
// when it does not parse.
template <class Message>
bool ParseInto(std::string_view message, Message* m, const char* type, Reply* out) {
  m->Clear();
  if (m->ParseFromArray(message.data(), static_cast<int>(message.size()))) return true;
  Fail(GrpcCode::kInvalidArgument, std::string("the message is not a ") + type, out);
  return false;
}

}  // namespace

struct GrpcMethods::Messages {
  ::envoy::service::ratelimit::v3::RateLimitRequest request;
  RlsResponse response;
  ::grpc::health::v1::HealthCheckRequest health_request;
  ::grpc::health::v1::HealthCheckResponse health_response;
};

GrpcMethods::GrpcMethods(Engine* engine, const GrpcOptions& opts)
    : m_(std::make_unique<Messages>()), rls_(engine), opts_(opts) {
  rls_.SetSettings(opts.rls);
}
GrpcMethods::~GrpcMethods() = default;

int GrpcMethods::MethodOf(std::string_view path) const {
  if (path == kShouldRateLimit) return kShouldRateLimitMethod;
  if (path == kHealthCheck) return kHealthCheckMethod;
  if (path == kHealthWatch) return kHealthWatchMethod;
  return -1;
}

void GrpcMethods::Call(int method, std::string_view message, Reply* out) {
  if (method == kShouldRateLimitMethod) return ShouldRateLimit(message, out);
  if (method == kHealthCheckMethod) return HealthCheck(message, out, false);
  if (method == kHealthWatchMethod) return HealthCheck(message, out, true);
  Fail(GrpcCode::kUnimplemented, "unknown method", out);
}

void GrpcMethods::Refused(int method) {
  // Refused before its message was read (too long, badly framed,
  // compressed): a call Envoy made all the same, an `error` as a malformed
  // one is.
  if (method == kShouldRateLimitMethod) CountEnvoyRefused(metrics_);
}

void GrpcMethods::ShouldRateLimit(std::string_view message, Reply* out) {
  // The message's bytes decoded directly when they are in the shape clients
  // write, else through protobuf (rls_request.h); the dynamic metadata
  // quotes the protobuf message, so it is always parsed when they are on.
  // A call of thousands of descriptors (a 64 KiB message holds 32,768; past
  // 64 it is refused) would leave their room behind in this worker: not
  // kept for the calls after it.
  if (req_.descriptors.capacity() > 4 * envoy::kMaxDescriptorsPerCall)
    std::vector<envoy::RlsDescriptor>().swap(req_.descriptors);
  if (m_->request.descriptors().Capacity() > 4 * static_cast<int>(envoy::kMaxDescriptorsPerCall))
    ::envoy::service::ratelimit::v3::RateLimitRequest().Swap(&m_->request);
  if (opts_.metadata || !DecodeRateLimitRequest(message, &req_)) {
    auto& in = m_->request;
    if (!ParseInto(message, &in, "RateLimitRequest", out)) return CountEnvoyRefused(metrics_);
    RlsRequestFromProto(in, &req_);
  }
  if (req_.domain.empty()) {
    CountEnvoyRefused(metrics_);
    return Fail(GrpcCode::kInvalidArgument, "rate limit domain must not be empty", out);
  }
  rls_.Decide(req_, &answer_);
  CountEnvoyAnswer(metrics_, req_, answer_);
  log_.Record(decision_log_, peer_, req_, answer_);
  if (!answer_.status.ok()) {
    // A descriptor another shard owns (enforce="1") is UNAVAILABLE too, as
    // envoyproxy/ratelimit answers when its backend is: Envoy applies its
    // failure_mode_deny, and the message names the owner.
    out->code =
        answer_.status.code() == Status::Code::kInvalidArgument ? GrpcCode::kInvalidArgument : GrpcCode::kUnavailable;
    out->message = answer_.status.message();
    return;
  }
  const bool headers = opts_.headers && answer_.tightest >= 0;
  if (!headers && !opts_.metadata) {
    // The common answer: its bytes written directly (rls_response.h).
    EncodeRateLimitResponse(answer_, &out->body);
    return;
  }
  RlsResponse& r = m_->response;
  FillRateLimitResponse(answer_, &r);
  if (headers) {
    // envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED, with the names
    // of <grpc limit_header ...> (LIMIT_*_HEADER): the descriptor upstream
    // picks (RlsAnswer::tightest), its limit as "N".
    const envoy::RlsStatus& t = answer_.statuses[static_cast<size_t>(answer_.tightest)];
    auto add = [&](const char* k, std::string v) {
      auto* h = r.add_response_headers_to_add();
      h->set_key(k);
      h->set_value(std::move(v));
    };
    add(opts_.limit_header.c_str(), std::to_string(t.limit_value().requests_per_unit));
    add(opts_.remaining_header.c_str(), std::to_string(t.remaining));
    add(opts_.reset_header.c_str(), std::to_string(t.until_reset_s));
  }
  if (opts_.metadata) AddDynamicMetadata();
  r.SerializeToString(&out->body);
}

void GrpcMethods::AddDynamicMetadata() {
  // As envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA: the domain, each
  // descriptor's entries ("key=value"), own limit and hits_addend, the
  // request's hits_addend, and the merged `metadata` of the limits of the
  // descriptors that passed.
  const auto& in = m_->request;
  auto& fields = *m_->response.mutable_dynamic_metadata()->mutable_fields();
  // Envoy forwards header bytes as they came: a value that is not UTF-8
  // in a protobuf string field would make Envoy refuse the whole answer
  // (and, failing open, let every descriptor of the call through).
  fields["domain"].set_string_value(Utf8Repaired(in.domain()));
  auto* list = fields["descriptors"].mutable_list_value();
  for (const auto& d : in.descriptors()) {
    auto& df = *list->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = df["entries"].mutable_list_value();
    for (const auto& e : d.entries()) entries->add_values()->set_string_value(Utf8Repaired(e.key() + "=" + e.value()));
    if (d.has_limit())
      df["limit"].set_string_value("requests_per_unit:" + std::to_string(d.limit().requests_per_unit()) +
                                   " unit:" + std::to_string(d.limit().unit()));
    if (d.has_hits_addend()) df["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
    if (d.is_negative_hits()) df["isNegativeHits"].set_bool_value(true);
  }
  if (in.hits_addend() != 0) fields["hitsAddend"].set_number_value(in.hits_addend());
  google::protobuf::Struct passed;
  for (uint32_t i : answer_.passed) {
    const envoy::RlsStatus& st = answer_.statuses[i];
    if (!st.has_limit || st.limit->metadata_json.empty()) continue;
    google::protobuf::Struct m;
    // Written by envoy_config.cc from the YAML: always a JSON object.
    if (google::protobuf::util::JsonStringToMessage(st.limit->metadata_json, &m).ok()) MergeStruct(&passed, m);
  }
  if (passed.fields_size() > 0) *fields["metadata"].mutable_struct_value() = std::move(passed);
}

void GrpcMethods::HealthCheck(std::string_view message, Reply* out, bool watch) {
  using Health = ::grpc::health::v1::HealthCheckResponse;
  auto& in = m_->health_request;
  if (!ParseInto(message, &in, "HealthCheckRequest", out)) return;
  auto& r = m_->health_response;
  if (!in.service().empty() && in.service() != kRlsService && in.service() != kRlsShortName) {
    // Check: NOT_FOUND; Watch: a status message, the stream kept (grpc's
    // health/v1 protocol), so a service registered later could be seen.
    if (!watch) return Fail(GrpcCode::kNotFound, "unknown service", out);
    r.set_status(Health::SERVICE_UNKNOWN);
    r.SerializeToString(&out->body);
    return;
  }
  // "": the server as a whole, as grpc's health server answers it upstream,
  // where HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED holds the service's own
  // name only. A store file lost (about half the calls answered UNAVAILABLE)
  // or a replica's catch-up holds every name, as /health and /healthcheck:
  // Envoy's gRPC health check (service "" by default) kept sending calls to
  // a frsd its HTTP probes called unhealthy.
  const bool healthy = !shutting_down_ && healthy_;
  const bool serving = healthy && (in.service().empty() || Serving());
  r.set_status(serving ? Health::SERVING : Health::NOT_SERVING);
  r.SerializeToString(&out->body);
}

bool GrpcMethods::Serving() const {
  if (shutting_down_) return false;
  return !opts_.healthy_with_config || (rls_.rules() && !rls_.rules()->empty());
}

GrpcOptions GrpcOptionsFor(const SrvConfig& cfg) {
  GrpcOptions o;
  o.headers = cfg.grpc_headers;
  o.limit_header = cfg.grpc_limit_header;
  o.remaining_header = cfg.grpc_remaining_header;
  o.reset_header = cfg.grpc_reset_header;
  o.metadata = cfg.grpc_metadata;
  o.healthy_with_config = cfg.grpc_healthy_with_config;
  o.rls.global_shadow = cfg.grpc_shadow;
  o.rls.global_quota = cfg.grpc_quota;
  o.rls.near_limit_ratio = cfg.grpc_near_limit_ratio;
  o.rls.stop_increment = cfg.grpc_stop_increment;
  return o;
}

void GrpcMethods::SetCluster(const ClusterView& c) {
  cluster_ = c;
  std::function<bool(long, bool)> refusing;
  if (repl_ != nullptr)
    refusing = [r = repl_](long peer, bool as_successor) { return r->Refusing(peer, as_successor); };
  rls_.SetOwnership(envoy::Ownership{c.ring, c.self_index, c.enforce, c.replicas, c.catching_up, std::move(refusing)});
}

void GrpcMethods::SetReplicator(const Replicator* r) {
  repl_ = r;
  SetCluster(cluster_);
}

}  // namespace frs::server
