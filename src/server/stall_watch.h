// server/stall_watch.h: the master's watch over hung workers.
//
// A worker's loop turns at least once a second, idle or not, and writes the
// time of each turn (WorkerCounters::beat_ms). A worker whose loop has not
// turned for <limits worker_stall_ms> is hung: an endless loop, a SIGSTOP,
// a debugger's breakpoint, a page fault on a stalled disk. Left alone it
// keeps its share of the connections unanswered, and a store lock it holds
// keeps every other worker waiting on that chain's keys. The master kills
// it (SIGKILL), which the store is built to survive: its locks are
// recovered and the slot is started again, as after any other death.
//
// A worker that waits for a store lock is judged by who holds it
// (WorkerCounters::lock_wait_tid). Killing a waiter frees nothing:
// - held by another worker of this frsd: that worker is judged on its own
//   and killed if it is hung, which ends the wait;
// - held by the waiter itself (a lock taken twice), or by a worker whose
//   own wait leads back to it (locks taken in opposite orders): hung; the
//   lowest slot of the round is killed;
// - held by another process (frsctl, a program on libfrs) that does not
//   let go: frsd cannot end that wait; it is logged, once per wait.
//
// A worker that has not begun to serve is judged from its start, against
// kStartMs or worker_stall_ms, whichever is longer: one stuck while it opens
// the store (a stalled disk) would hold its slot, and on a reuseport
// listener the connections queued on its socket, for good.
//
// The master judges only while it runs itself: a gap in its own turns (a
// SIGSTOP of the whole process group, a suspended VM, a long reload) counts
// for the workers too, so each gets a whole worker_stall_ms from then on. A
// shorter freeze cannot reach the least worker_stall_ms allowed
// (kMinStallMs): an idle loop's second, the gap, and a margin.
//
// Judge() is a pure decision over what the workers published; the master
// does the killing and the logging (master.cc).
//
// Thread safety: the master's thread only (its one StallWatch). Judge reads no
// shared memory: the master copies the workers' counters into WorkerBeats
// first. ThreadGroupOf and ProcessName are plain functions over /proc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "config/srv_config.h"

namespace frs::server {

// One worker slot as the master sees it.
struct WorkerBeat {
  pid_t pid = 0;          // the slot's worker; 0: none
  int64_t beat_ms = 0;    // CLOCK_MONOTONIC ms of its loop's last turn (of its start, before it serves)
  uint32_t wait_tid = 0;  // the live owner of a store lock it waits for; 0: none
  int64_t wait_since_ms = 0;
  bool serving = true;  // false: still starting
};

struct StallVerdict {
  enum class Kind : uint8_t {
    kKill,         // hung: kill it
    kForeignWait,  // waits for a lock another process holds: say so
  };
  Kind kind;
  uint32_t slot = 0;
  bool serving = true;     // kKill: false for a worker that never began to serve
  int64_t stalled_ms = 0;  // since its last turn or its start (kKill), or since its wait began (kForeignWait)
  uint32_t owner_tid = 0;  // kForeignWait: the lock's owner
  pid_t owner_pid = 0;     // kForeignWait: that thread's process
};

class StallWatch {
 public:
  // The master turns at least once a second; a gap longer than this in its
  // own turns gives every worker a whole worker_stall_ms from then on.
  static constexpr int64_t kMasterGapMs = 1500;
  // The least worker_stall_ms srv.xml takes: an idle loop turns every
  // second, and a freeze just short of kMasterGapMs must not reach it.
  static constexpr uint32_t kMinStallMs = kMinWorkerStallMs;  // what srv.xml enforces
  // How long a worker may take to begin serving (at least).
  static constexpr int64_t kStartMs = 30000;

  // The process a thread id belongs to (its thread group); 0: no such
  // thread. ThreadGroupOf below reads /proc.
  using OwnerPid = std::function<pid_t(uint32_t tid)>;

  // What to do now. `stall_ms` 0: the watch is off (nothing is judged).
  std::vector<StallVerdict> Judge(int64_t now_ms, uint32_t stall_ms, std::span<const WorkerBeat> slots,
                                  const OwnerPid& owner_pid);

 private:
  int64_t last_ms_ = -1;        // the master's last judging turn
  uint32_t last_stall_ms_ = 0;  // the period it judged by (a reload may change it)
  int64_t resumed_ms_ = 0;      // judged from here at the earliest (the watch's start, the master's last gap)
  // Per slot: the pid already killed (a worker in uninterruptible sleep
  // dies only when it wakes) and the wait already said.
  std::vector<pid_t> killed_;
  std::vector<int64_t> wait_said_;
};

// The thread group (process id) of thread `tid`, from /proc/TID/status;
// 0 when there is no such thread.
pid_t ThreadGroupOf(uint32_t tid);
// A process's name (/proc/PID/comm), "?" when it cannot be read.
std::string ProcessName(pid_t pid);

}  // namespace frs::server
