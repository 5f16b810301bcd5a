// server/host_resolver.h: a peer's "host:port" turned into an address
// without blocking the worker loop.
//
// getaddrinfo blocks while it asks DNS: when no name server answers, for
// resolv.conf's timeout times its attempts (10 s by default), and a worker
// loop that waits on it serves none of its connections meanwhile. A literal
// address (IPv4, or IPv6 in brackets) is read at once, as before; a name is
// looked up on a thread of its own while the loop goes on, and asked for
// again on a later turn (kPending). A found address is kept: a connection
// that failed to open marks it stale (Stale), and so does age (kRefreshNs),
// and a stale address is still served while a new lookup runs behind it, so
// that a slow or dead DNS never holds up a connection to a peer whose
// address is known, and a peer that moved is found on a later try (a
// refresh that fails is not tried again for kFailedRefreshNs). A name with
// several addresses (localhost: ::1 and 127.0.0.1) is tried at each in turn,
// the next after each connection that failed to open, as getaddrinfo(3)
// orders them.
//
// Thread safety: one resolver per thread (a worker's loop). A lookup's
// thread shares only its own Job with the resolver, through `done`; a
// resolver dropped while a lookup runs leaves that thread to finish alone.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace frs::server {

class HostResolver {
 public:
  struct Address {
    sockaddr_storage addr{};
    socklen_t len = 0;
  };
  // One lookup of a name: 0 and its addresses in *out (at least one), or
  // an error's words in *err. The default is getaddrinfo's; tests give
  // their own.
  using LookupFn =
      std::function<int(const std::string& host, const std::string& port, std::vector<Address>* out, std::string* err)>;
  enum class State : uint8_t { kReady, kPending, kFailed };
  struct Answer {
    State state = State::kPending;
    Address address;
    std::string error;  // kFailed: why, for the link's log line
  };
  // An address found is looked up again at a connection this long after
  // it was found (a link kept open looks nothing up).
  static constexpr int64_t kRefreshNs = 30'000'000'000;
  // A refresh that failed is not tried again before this: while DNS is
  // down, a peer that keeps failing is not one lookup per try.
  static constexpr int64_t kFailedRefreshNs = 5'000'000'000;
  // A failed lookup nobody asked after for this long is not said: DNS may
  // have mended since, and the next asker gets a fresh lookup.
  static constexpr int64_t kUnaskedFailureNs = 2'000'000'000;

  explicit HostResolver(LookupFn lookup = {});
  HostResolver(const HostResolver&) = delete;
  HostResolver& operator=(const HostResolver&) = delete;

  // `name` is "host:port" (a ring shard's name; "[v6]:port" for IPv6). A
  // name whose lookup failed answers kFailed once; the next call asks again.
  Answer Resolve(const std::string& name, int64_t now_ns);
  // A connection to `name` failed: its next address is tried, and the name
  // is looked up again (the addresses known are served meanwhile).
  void Stale(const std::string& name);
  // Whether a lookup runs (the loop should come back soon for its answer);
  // Pending(name): one of `name`.
  bool Pending() const;
  bool Pending(const std::string& name) const;

 private:
  struct Job {
    std::atomic<bool> done{false};
    int rc = 0;
    std::vector<Address> addresses;
    std::string error;
  };
  struct Entry {
    std::string name, host, port;
    bool literal = false;            // an address, never looked up
    std::vector<Address> addresses;  // empty: none found yet
    size_t next = 0;                 // the one tried now
    int64_t found_ns = 0;
    int64_t no_refresh_before_ns = 0;  // a refresh failed (kFailedRefreshNs)
    int64_t asked_ns = 0;              // Resolve's last call (kUnaskedFailureNs)
    bool stale = false;
    std::shared_ptr<Job> job;  // a lookup in flight
  };

  Entry& EntryOf(const std::string& name);
  void Start(Entry& e);
  // The finished lookup's answer taken into `e`; false: it failed with no
  // address known, its words in *error.
  bool Collect(Entry& e, int64_t now_ns, std::string* error);

  LookupFn lookup_;
  std::vector<Entry> entries_;  // a ring's few shards: searched in order
};

}  // namespace frs::server
