// tests/server/scripted_lookups.h: name lookups a test answers, for
// HostResolver (server/host_resolver.h) and the Replicator that uses it: each
// lookup waits for the answer the test gives it, so that one can be held for
// as long as the test chooses, and counts itself.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "server/host_resolver.h"

namespace frs::testing {

using Address = server::HostResolver::Address;

inline Address V4(const char* ip, uint16_t port) {
  Address a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.addr);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  EXPECT_EQ(::inet_pton(AF_INET, ip, &in->sin_addr), 1);
  a.len = sizeof(sockaddr_in);
  return a;
}

inline std::string Text(const Address& a) {
  char buf[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.addr);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    port = ntohs(in->sin_port);
  } else if (a.addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    port = ntohs(in6->sin6_port);
    return std::string("[") + buf + "]:" + std::to_string(port);
  }
  return std::string(buf) + ":" + std::to_string(port);
}

// Lookups the test answers: each call takes the next answer it is given
// (Give), waiting for it, and counts itself.
class Lookups {
 public:
  server::HostResolver::LookupFn Fn() {
    return [s = state_](const std::string& host, const std::string& port, std::vector<Address>* out, std::string* err) {
      const int i = s->calls.fetch_add(1);
      if (i >= kMax) {
        *err = "more lookups than the test answers";
        return EAI_FAIL;
      }
      s->asked[i] = host + ":" + port;
      // A caller that waited here would never get to Give: after 10 s the
      // lookup gives up, and its caller sees a failure, not kPending.
      if (s->answers[i].get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        *err = "the test gave no answer";
        return EAI_AGAIN;
      }
      const Answer& a = s->given[i];
      if (a.rc != 0) {
        *err = a.error;
        return a.rc;
      }
      *out = a.addresses;
      return 0;
    };
  }
  // The answer of the i-th lookup (from 0).
  void Give(int i, std::vector<Address> addresses) {
    state_->given[i].addresses = std::move(addresses);
    Answered(i);
  }
  void Fail(int i, const std::string& error) {
    state_->given[i].rc = EAI_NONAME;
    state_->given[i].error = error;
    Answered(i);
  }
  int calls() const { return state_->calls.load(); }
  std::string asked(int i) const { return state_->asked[i]; }
  ~Lookups() {
    // A lookup still waiting ends now, its thread with it.
    for (int i = 0; i < kMax; ++i) Answered(i);
  }

 private:
  void Answered(int i) {
    if (!answered_[i]) state_->answers[i].set_value();
    answered_[i] = true;
  }

  static constexpr int kMax = 8;
  struct Answer {
    int rc = 0;
    std::vector<Address> addresses;
    std::string error;
  };
  struct State {
    std::atomic<int> calls{0};
    std::promise<void> answers[kMax];
    Answer given[kMax];
    std::string asked[kMax];
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  bool answered_[kMax] = {};
};

}  // namespace frs::testing
