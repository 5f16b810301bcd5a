#include "server/metrics.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace frs::server {

namespace {

// The commands' labels are their names (frs/decision.h); then the requests
// that are no command.
constexpr size_t kCmds = std::size(kCmdNames);
constexpr const char* kOtherLabels[] = {"batch", "health", "metrics", "json", "none"};
static_assert(kCmds + std::size(kOtherLabels) == static_cast<size_t>(CmdLabel::kCount));

}  // namespace

// Label values are biz names from map.xml: escape what the format demands.
void AppendLabelValue(std::string* out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out->append("\\\\");
    else if (c == '"') out->append("\\\"");
    else if (c == '\n') out->append("\\n");
    else out->push_back(c);
  }
}

CmdLabel LabelOf(Cmd cmd) {
  switch (cmd) {
    case Cmd::kQuery: return CmdLabel::kQuery;
    case Cmd::kUpdate: return CmdLabel::kUpdate;
    case Cmd::kAcquire: return CmdLabel::kAcquire;
    case Cmd::kGet: return CmdLabel::kGet;
    case Cmd::kSet: return CmdLabel::kSet;
    case Cmd::kDelete: return CmdLabel::kDelete;
    case Cmd::kReset: return CmdLabel::kReset;
    case Cmd::kStats: return CmdLabel::kStats;
    case Cmd::kMerge: return CmdLabel::kMerge;
    case Cmd::kRelease: return CmdLabel::kRelease;
    case Cmd::kRenew: return CmdLabel::kRenew;
    case Cmd::kSettle: return CmdLabel::kSettle;
  }
  return CmdLabel::kNone;
}

const char* LabelName(CmdLabel label) {
  const size_t i = static_cast<size_t>(label);
  return i < kCmds ? kCmdNames[i].data() : kOtherLabels[i - kCmds];
}

size_t StatusSlot(int http_status) {
  for (size_t i = 0; i < kStatusSlots; ++i)
    if (kStatusCodes[i] == http_status) return i;
  return StatusSlot(500);
}

void WorkerCounters::CountRequest(CmdLabel label, int http_status, uint64_t latency_ns) {
  CounterAdd(requests[static_cast<size_t>(label)][StatusSlot(http_status)]);
  uint64_t us = latency_ns / 1000;
  size_t b = 0;
  while (b < kLatencyBuckets - 1 && us > kLatencyBoundsUs[b]) ++b;
  CounterAdd(latency[b]);
  CounterAdd(latency_sum_ns, latency_ns);
}

Result<std::unique_ptr<Metrics>> Metrics::Create(uint32_t workers) {
  size_t bytes = sizeof(MasterCounters) + size_t{workers} * sizeof(WorkerCounters);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap of the metrics region", errno);
  auto m = std::make_unique<Metrics>(Key{});
  m->base_ = p;
  m->bytes_ = bytes;
  m->workers_ = workers;
  m->master_ = static_cast<MasterCounters*>(p);
  m->workers_base_ = reinterpret_cast<WorkerCounters*>(static_cast<char*>(p) + sizeof(MasterCounters));
  CounterSet(m->master_->started_unix, static_cast<uint64_t>(std::time(nullptr)));
  uint64_t token = 0;
  if (::getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token) || token == 0)
    token = static_cast<uint64_t>(std::time(nullptr)) * 1000003u + static_cast<uint64_t>(::getpid()) + 1;
  CounterSet(m->master_->stream_token, token);
  return m;
}

Metrics::~Metrics() {
  if (base_) munmap(base_, bytes_);
}

}  // namespace frs::server
