#include "server/stall_watch.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace frs::server {

namespace {

// Whether slot `i`'s wait leads, worker by worker, back to itself, and `i`
// is the lowest slot on that round.
bool FirstOfACycle(uint32_t i, std::span<const WorkerBeat> slots, const StallWatch::OwnerPid& owner_pid) {
  uint32_t at = i;
  for (size_t steps = 0; steps < slots.size(); ++steps) {
    if (slots[at].wait_tid == 0) return false;
    const pid_t owner = owner_pid(slots[at].wait_tid);
    auto next = std::find_if(slots.begin(), slots.end(), [&](const WorkerBeat& o) { return o.pid == owner; });
    if (owner == 0 || next == slots.end()) return false;
    at = static_cast<uint32_t>(next - slots.begin());
    if (at < i) return false;
    if (at == i) return true;
  }
  return false;
}

}  // namespace

std::vector<StallVerdict> StallWatch::Judge(int64_t now_ms, uint32_t stall_ms, std::span<const WorkerBeat> slots,
                                            const OwnerPid& owner_pid) {
  std::vector<StallVerdict> out;
  if (stall_ms == 0) {
    last_ms_ = -1;
    return out;
  }
  // The first turn of the watch (at start, or switched on by a reload), a
  // reload that changed its period, or the master itself did not run for a
  // while: every worker gets a whole stall_ms from now.
  if (last_ms_ < 0 || stall_ms != last_stall_ms_ || now_ms - last_ms_ > kMasterGapMs) resumed_ms_ = now_ms;
  last_ms_ = now_ms;
  last_stall_ms_ = stall_ms;
  killed_.resize(slots.size(), 0);
  wait_said_.resize(slots.size(), 0);
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const WorkerBeat& w = slots[i];
    const int64_t stalled = now_ms - std::max(w.beat_ms, resumed_ms_);
    const int64_t limit = w.serving ? int64_t{stall_ms} : std::max(int64_t{stall_ms}, kStartMs);
    if (w.pid <= 0 || stalled < limit) {
      wait_said_[i] = 0;
      continue;
    }
    if (w.wait_tid != 0) {
      const pid_t owner = owner_pid(w.wait_tid);
      // Gone: the waiter takes the lock over on its next check.
      if (owner == 0) continue;
      const bool ours = std::any_of(slots.begin(), slots.end(), [&](const WorkerBeat& o) { return o.pid == owner; });
      // Another worker: judged in its own right, and its death ends this
      // wait; unless the waits go round back here (two writes that took
      // their locks in opposite orders), where the cycle's first slot is
      // killed to break it.
      if (ours && owner != w.pid && !FirstOfACycle(i, slots, owner_pid)) continue;
      if (!ours) {
        if (wait_said_[i] != w.wait_since_ms) {
          wait_said_[i] = w.wait_since_ms;
          out.push_back({StallVerdict::Kind::kForeignWait, i, w.serving, now_ms - w.wait_since_ms, w.wait_tid, owner});
        }
        continue;
      }
    }
    if (killed_[i] == w.pid) continue;
    killed_[i] = w.pid;
    out.push_back({StallVerdict::Kind::kKill, i, w.serving, stalled, 0, 0});
  }
  return out;
}

pid_t ThreadGroupOf(uint32_t tid) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(std::strtol(line.c_str() + 5, nullptr, 10));
  return 0;
}

std::string ProcessName(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name.empty() ? "?" : name;
}

}  // namespace frs::server
