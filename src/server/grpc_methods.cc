#include "server/grpc_methods.h"

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/health/v1/health.pb.h"

namespace frs::server {

namespace {

constexpr std::string_view kShouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view kHealthCheck = "/grpc.health.v1.Health/Check";
constexpr std::string_view kRlsService = "envoy.service.ratelimit.v3.RateLimitService";

using RlsResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;
using Reply = GrpcService::Reply;

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
    : m_(std::make_unique<Messages>()), rls_(engine), opts_(opts) {}
GrpcMethods::~GrpcMethods() = default;

int GrpcMethods::MethodOf(std::string_view path) const {
  if (path == kShouldRateLimit) return kShouldRateLimitMethod;
  if (path == kHealthCheck) return kHealthCheckMethod;
  return -1;
}

void GrpcMethods::Call(int method, std::string_view message, Reply* out) {
  if (method == kShouldRateLimitMethod) return ShouldRateLimit(message, out);
  if (method == kHealthCheckMethod) return HealthCheck(message, out);
  Fail(GrpcCode::kUnimplemented, "unknown method", out);
}

void GrpcMethods::ShouldRateLimit(std::string_view message, Reply* out) {
  auto& in = m_->request;
  if (!ParseInto(message, &in, "RateLimitRequest", out)) return;
  if (in.domain().empty()) return Fail(GrpcCode::kInvalidArgument, "rate limit domain must not be empty", out);
  req_.Clear();
  req_.domain = in.domain();
  // 0 (not set) is 1, as Envoy and envoyproxy/ratelimit take it; a
  // descriptor's own hits_addend, when set, wins, 0 included (a look).
  req_.hits = in.hits_addend() == 0 ? 1 : in.hits_addend();
  req_.descriptors.resize(static_cast<size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& d = in.descriptors(i);
    envoy::RlsDescriptor& rd = req_.descriptors[static_cast<size_t>(i)];
    rd.entries.clear();
    for (const auto& e : d.entries()) rd.entries.push_back(envoy::Entry{e.key(), e.value()});
    rd.has_hits = d.has_hits_addend();
    rd.hits = rd.has_hits ? d.hits_addend().value() : 0;
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
  RlsResponse& r = m_->response;
  r.Clear();
  r.set_overall_code(static_cast<RlsResponse::Code>(answer_.overall));
  for (const envoy::RlsStatus& st : answer_.statuses) {
    auto* s = r.add_statuses();
    s->set_code(static_cast<RlsResponse::Code>(st.code));
    s->set_limit_remaining(st.remaining);
    if (st.has_limit) {
      auto* l = s->mutable_current_limit();
      l->set_requests_per_unit(st.limit->limit.requests_per_unit);
      l->set_unit(static_cast<RlsResponse::RateLimit::Unit>(st.limit->limit.unit));
      if (!st.limit->name.empty()) l->set_name(st.limit->name);
      s->mutable_duration_until_reset()->set_seconds(st.until_reset_s);
    }
  }
  if (opts_.headers && answer_.tightest >= 0) {
    // envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED, with its default
    // names and values (service/ratelimit.go): the descriptor with the
    // fewest remaining (an OVER_LIMIT one first), its limit as "N".
    const envoy::RlsStatus& t = answer_.statuses[static_cast<size_t>(answer_.tightest)];
    auto add = [&](const char* k, std::string v) {
      auto* h = r.add_response_headers_to_add();
      h->set_key(k);
      h->set_value(std::move(v));
    };
    add("RateLimit-Limit", std::to_string(t.limit->limit.requests_per_unit));
    add("RateLimit-Remaining", std::to_string(t.remaining));
    add("RateLimit-Reset", std::to_string(t.until_reset_s));
  }
  r.SerializeToString(&out->body);
}

void GrpcMethods::HealthCheck(std::string_view message, Reply* out) {
  auto& in = m_->health_request;
  if (!ParseInto(message, &in, "HealthCheckRequest", out)) return;
  if (!in.service().empty() && in.service() != kRlsService) return Fail(GrpcCode::kNotFound, "unknown service", out);
  auto& r = m_->health_response;
  r.set_status(shutting_down_ ? ::grpc::health::v1::HealthCheckResponse::NOT_SERVING
                              : ::grpc::health::v1::HealthCheckResponse::SERVING);
  r.SerializeToString(&out->body);
}

void GrpcMethods::SetCluster(const ClusterView& c) {
  rls_.SetOwnership(envoy::Ownership{c.ring, c.self_index, c.enforce, c.replicas, c.catching_up});
}

}  // namespace frs::server
