// server/process_metrics.h: the Prometheus `process_*` series of frsd's
// processes, read from /proc when /metrics is scraped.
//
// frsd is several processes, so each series carries a `process` label:
// `master`, or `worker` with the worker's `slot`. CPU seconds, resident
// memory, open descriptors, the descriptor limit and the start time follow
// the names and units client libraries use (process_cpu_seconds_total,
// process_resident_memory_bytes, process_open_fds, process_max_fds,
// process_start_time_seconds). Resident memory counts the shared store
// pages a process has touched in each process that touched them: sum it
// with that in mind.
//
// Thread safety: a plain function over /proc; safe anywhere.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace frs::server {

struct ProcessRef {
  pid_t pid = 0;
  int slot = -1;  // -1: the master
};

// Appends the HELP/TYPE lines and one sample per live process of `procs`;
// a process that vanished meanwhile is left out.
void AppendProcessMetrics(const std::vector<ProcessRef>& procs, std::string* out);

}  // namespace frs::server
