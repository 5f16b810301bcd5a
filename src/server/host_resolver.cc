#include "server/host_resolver.h"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>

#include <cstring>
#include <exception>
#include <thread>
#include <utility>

namespace frs::server {
namespace {

// getaddrinfo's answers, in its order; `flags` AI_NUMERICHOST asks for a
// literal only (no lookup, never blocks).
int GetAddrInfo(const std::string& host, const std::string& port, int flags, std::vector<HostResolver::Address>* out,
                std::string* err) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = flags;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    *err = std::string("cannot resolve: ") + gai_strerror(rc);
    return rc;
  }
  out->clear();
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    HostResolver::Address& to = out->emplace_back();
    std::memcpy(&to.addr, a->ai_addr, a->ai_addrlen);
    to.len = a->ai_addrlen;
  }
  ::freeaddrinfo(res);
  if (out->empty()) {
    *err = "cannot resolve: no address";
    return EAI_NONAME;
  }
  return 0;
}

bool SameAddresses(const std::vector<HostResolver::Address>& a, const std::vector<HostResolver::Address>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].len != b[i].len || std::memcmp(&a[i].addr, &b[i].addr, a[i].len) != 0) return false;
  return true;
}

}  // namespace

HostResolver::HostResolver(LookupFn lookup) : lookup_(std::move(lookup)) {
  if (!lookup_)
    lookup_ = [](const std::string& host, const std::string& port, std::vector<Address>* out, std::string* err) {
      return GetAddrInfo(host, port, 0, out, err);
    };
}

HostResolver::Entry& HostResolver::EntryOf(const std::string& name) {
  for (Entry& e : entries_)
    if (e.name == name) return e;
  Entry& e = entries_.emplace_back();
  e.name = name;
  const size_t colon = name.rfind(':');
  e.host = name.substr(0, colon);
  e.port = colon == std::string::npos ? "" : name.substr(colon + 1);
  const bool bracketed = e.host.size() >= 2 && e.host.front() == '[' && e.host.back() == ']';
  if (bracketed) e.host = e.host.substr(1, e.host.size() - 2);
  std::string err;
  if (GetAddrInfo(e.host, e.port, AI_NUMERICHOST | AI_NUMERICSERV, &e.addresses, &err) == 0) {
    e.literal = true;
  } else if (bracketed) {
    // In brackets it can only be an address: nothing to look up.
    e.literal = true;
  }
  return e;
}

void HostResolver::Start(Entry& e) {
  auto job = std::make_shared<Job>();
  // The thread takes no signal: the worker's handlers run on its loop
  // (signals.h), and a signal sent to the process must reach it there. The
  // caller's mask comes back however this ends.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  struct Restore {
    const sigset_t* mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, mask, nullptr); }
  } restore{&old};
  try {
    std::thread([job, host = e.host, port = e.port, lookup = lookup_] {
      job->rc = lookup(host, port, &job->addresses, &job->error);
      if (job->rc == 0 && job->addresses.empty()) {
        job->rc = EAI_NONAME;
        job->error = "cannot resolve: no address";
      }
      job->done.store(true, std::memory_order_release);
    }).detach();
  } catch (const std::exception& ex) {
    // No thread to be had (the process's limit, memory): this try fails,
    // and the link's next try (a second later) asks again.
    job->rc = EAI_SYSTEM;
    job->error = std::string("cannot start a lookup: ") + ex.what();
    job->done.store(true, std::memory_order_release);
  }
  e.job = std::move(job);
}

bool HostResolver::Collect(Entry& e, int64_t now_ns, std::string* error) {
  Job& job = *e.job;
  bool ok = true;
  if (job.rc == 0) {
    // The same answer again keeps the turn it was at: the address that
    // failed last is not tried first again.
    if (!SameAddresses(job.addresses, e.addresses)) e.next = 0;
    e.addresses = std::move(job.addresses);
    e.found_ns = now_ns;
    e.stale = false;
  } else if (!e.addresses.empty()) {
    // A refresh that failed keeps the addresses it had (DNS down is no
    // reason to stop reaching a peer that still answers there), and waits
    // before it asks again.
    e.no_refresh_before_ns = now_ns + kFailedRefreshNs;
  } else {
    ok = false;
    *error = job.error;
  }
  e.job.reset();
  return ok;
}

HostResolver::Answer HostResolver::Resolve(const std::string& name, int64_t now_ns) {
  Entry& e = EntryOf(name);
  Answer a;
  if (e.literal) {
    if (e.addresses.empty()) {
      a.state = State::kFailed;
      a.error = "cannot resolve: " + e.host + " in brackets is not an IPv6 address";
      return a;
    }
    a.state = State::kReady;
    a.address = e.addresses[e.next % e.addresses.size()];
    return a;
  }
  const int64_t asked_before_ns = e.asked_ns;
  e.asked_ns = now_ns;
  if (e.job && e.job->done.load(std::memory_order_acquire)) {
    std::string error;
    // A failure nobody waited on is old news: asked again afresh below.
    if (!Collect(e, now_ns, &error) && now_ns - asked_before_ns <= kUnaskedFailureNs) {
      a.state = State::kFailed;
      a.error = error;
      return a;
    }
  }
  if (!e.addresses.empty()) {
    if ((e.stale || now_ns - e.found_ns >= kRefreshNs) && now_ns >= e.no_refresh_before_ns && !e.job) Start(e);
    a.state = State::kReady;
    a.address = e.addresses[e.next % e.addresses.size()];
    return a;
  }
  if (!e.job) Start(e);
  a.state = State::kPending;
  return a;
}

void HostResolver::Stale(const std::string& name) {
  for (Entry& e : entries_)
    if (e.name == name) {
      ++e.next;
      e.stale = !e.literal;
    }
}

bool HostResolver::Pending() const {
  for (const Entry& e : entries_)
    if (e.job && !e.job->done.load(std::memory_order_acquire)) return true;
  return false;
}

bool HostResolver::Pending(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return e.job && !e.job->done.load(std::memory_order_acquire);
  return false;
}

}  // namespace frs::server
