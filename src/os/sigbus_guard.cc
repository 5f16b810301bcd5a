#include "os/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>

namespace frs::os {
namespace {

// Every mapping a worker holds: the store's files and, above all, the
// statistics day files (three per <stats> table: 140 bizzes of 8 tables
// took 3,360). A fuller table leaves a mapping unwatched, so callers that
// can refuse one (stats/group_table.cc) do.
constexpr int kMaxMappings = 16384;

struct Entry {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> len{0};
  std::atomic<std::atomic<bool>*> broken{nullptr};
};
Entry g_entries[kMaxMappings];
std::mutex g_register_mu;  // registration only; the handler never locks
int g_hint = 0;            // where the next free entry likely is (under g_register_mu)
std::atomic<bool> g_installed{false};
uintptr_t g_page = 4096;  // set before the handler is installed

void OnSigbus(int sig, siginfo_t* info, void*) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Entry& e : g_entries) {
    const uintptr_t base = e.base.load(std::memory_order_acquire);
    const size_t len = e.len.load(std::memory_order_acquire);
    if (base == 0 || addr < base || addr >= base + len) continue;
    // Without reserve: a statistics mapping may be gigabytes of address
    // space, which an overcommit policy would refuse as anonymous memory.
    void* p = ::mmap(reinterpret_cast<void*>(base), len, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      // Then the faulting page alone: the next fault elsewhere comes back here.
      const uintptr_t page = addr & ~(g_page - 1);
      p = ::mmap(reinterpret_cast<void*>(page), g_page, PROT_READ | PROT_WRITE,
                 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED) break;
    if (std::atomic<bool>* b = e.broken.load(std::memory_order_acquire)) b->store(true, std::memory_order_release);
    return;  // the faulting access runs again, on a zero page
  }
  // Not ours: die of it as we would have.
  ::signal(sig, SIG_DFL);
}

}  // namespace

int RegisterGuardedMapping(uint8_t* base, size_t len, std::atomic<bool>* broken) {
  std::lock_guard<std::mutex> g(g_register_mu);
  for (int k = 0; k < kMaxMappings; ++k) {
    const int i = (g_hint + k) % kMaxMappings;
    Entry& e = g_entries[i];
    if (e.base.load(std::memory_order_relaxed) != 0) continue;
    e.broken.store(broken, std::memory_order_release);
    e.len.store(len, std::memory_order_release);
    e.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    g_hint = (i + 1) % kMaxMappings;
    return i;
  }
  return -1;
}

void UnregisterGuardedMapping(int handle) {
  if (handle < 0 || handle >= kMaxMappings) return;
  std::lock_guard<std::mutex> g(g_register_mu);
  Entry& e = g_entries[handle];
  e.base.store(0, std::memory_order_release);
  e.len.store(0, std::memory_order_release);
  e.broken.store(nullptr, std::memory_order_release);
}

}  // namespace frs::os

namespace frs {

void InstallSigbusGuard() {
  if (os::g_installed.exchange(true)) return;
  os::g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = os::OnSigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace frs
