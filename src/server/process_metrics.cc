#include "server/process_metrics.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "os/unique_dir.h"

namespace frs::server {
namespace {

struct ProcSample {
  double cpu_seconds = 0;
  double start_unix = 0;
  uint64_t rss_bytes = 0;
  uint64_t open_fds = 0;
  uint64_t max_fds = 0;
};

double BootTimeUnix() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double t = 0;
      in >> t;
      return t;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

bool Sample(pid_t pid, ProcSample* s) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  // The command name (field 2) may hold spaces and parentheses: fields are
  // counted from the last ')'.
  size_t rp = line.rfind(')');
  if (rp == std::string::npos) return false;
  std::istringstream fields(line.substr(rp + 2));
  std::string f;
  // fields[0] is field 3 (state); utime is 14, stime 15, starttime 22, rss 24.
  unsigned long long utime = 0, stime = 0, start = 0;
  long long rss_pages = 0;
  for (int i = 3; i <= 24 && (fields >> f); ++i) {
    if (i == 14) utime = std::strtoull(f.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(f.c_str(), nullptr, 10);
    if (i == 22) start = std::strtoull(f.c_str(), nullptr, 10);
    if (i == 24) rss_pages = std::strtoll(f.c_str(), nullptr, 10);
  }
  static const double kTicks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  static const double kBoot = BootTimeUnix();
  static const long kPage = ::sysconf(_SC_PAGESIZE);
  s->cpu_seconds = static_cast<double>(utime + stime) / kTicks;
  s->start_unix = kBoot + static_cast<double>(start) / kTicks;
  s->rss_bytes = rss_pages > 0 ? static_cast<uint64_t>(rss_pages) * static_cast<uint64_t>(kPage) : 0;

  std::snprintf(path, sizeof path, "/proc/%d/fd", static_cast<int>(pid));
  if (os::UniqueDir d = os::OpenDir(path)) {
    while (dirent* e = ::readdir(d.get()))
      if (e->d_name[0] != '.') ++s->open_fds;
  }
  std::snprintf(path, sizeof path, "/proc/%d/limits", static_cast<int>(pid));
  std::ifstream limits(path);
  while (std::getline(limits, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream ls(line.substr(std::strlen("Max open files")));
    unsigned long long soft = 0;
    if (ls >> soft) s->max_fds = soft;
  }
  return true;
}

void Labels(const ProcessRef& p, std::string* out) {
  if (p.slot < 0) {
    out->append("{process=\"master\"}");
  } else {
    out->append("{process=\"worker\",slot=\"").append(std::to_string(p.slot)).append("\"}");
  }
}

}  // namespace

void AppendProcessMetrics(const std::vector<ProcessRef>& procs, std::string* out) {
  std::vector<std::pair<ProcessRef, ProcSample>> samples;
  for (const ProcessRef& p : procs) {
    ProcSample s;
    if (p.pid > 0 && Sample(p.pid, &s)) samples.emplace_back(p, s);
  }
  struct Series {
    const char* name;
    const char* type;
    const char* help;
  };
  const Series series[] = {
      {"process_cpu_seconds_total", "counter", "User and system CPU time spent, by frsd process."},
      {"process_resident_memory_bytes", "gauge",
       "Resident memory, by frsd process (touched store pages count in each)."},
      {"process_open_fds", "gauge", "Open file descriptors, by frsd process."},
      {"process_max_fds", "gauge", "The open file descriptor limit, by frsd process."},
      {"process_start_time_seconds", "gauge", "Start time of the process since the unix epoch, by frsd process."},
  };
  char num[64];
  for (size_t k = 0; k < sizeof series / sizeof series[0]; ++k) {
    out->append("# HELP ").append(series[k].name).append(" ").append(series[k].help).append("\n");
    out->append("# TYPE ").append(series[k].name).append(" ").append(series[k].type).append("\n");
    for (const auto& [p, s] : samples) {
      out->append(series[k].name);
      Labels(p, out);
      switch (k) {
        case 0: std::snprintf(num, sizeof num, " %.2f\n", s.cpu_seconds); break;
        case 1: std::snprintf(num, sizeof num, " %llu\n", static_cast<unsigned long long>(s.rss_bytes)); break;
        case 2: std::snprintf(num, sizeof num, " %llu\n", static_cast<unsigned long long>(s.open_fds)); break;
        case 3: std::snprintf(num, sizeof num, " %llu\n", static_cast<unsigned long long>(s.max_fds)); break;
        default: std::snprintf(num, sizeof num, " %.2f\n", s.start_unix); break;
      }
      out->append(num);
    }
  }
}

}  // namespace frs::server
