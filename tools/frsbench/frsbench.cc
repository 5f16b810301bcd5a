// frsbench: benchmarks of the counter store (docs/benchmarks.md has the
// figures and the commands that made them).
//
//   frsbench store --procs P --keys K --seconds S [--dir D] [--files F --keynodes N --chain L] [--state-bytes B]
//       Pre-fills K keys with a 16-byte state (one fixed-window rule: window
//       start, count, debt), forks P processes that each run read-modify-write
//       updates (Store::Update incrementing the count, as an acquire does) on
//       uniformly random resident keys for S seconds, and prints one JSON line.
//   frsbench store --fill [--all | --chain L] [--keynodes N --files F --repeat R]
//       Fills an empty store with uniform random keys until the first live
//       eviction and prints the occupancy (nodes / slots) at that moment, next
//       to simulated figures for placement without the cuckoo step (two-choice)
//       and with a single choice, on the same key sequence.
//   frsbench zone [--zone Z] [--interval I] [--windows N] [--direct]
//       The cost of the time zone on a calendar window's decision: N
//       CalendarZone::WindowOf (frs/calendar.h) over instants spread across 2026 (both DST
//       changes of a zone that has them), through FRS's zone table, or with
//       --direct through cctz's own lookups (what the table saves); one JSON
//       line. For instructions rather than time (the machine is shared):
//       valgrind --tool=callgrind --toggle-collect='*ZoneWindows*' frsbench zone ...
//
// The measured operation includes fingerprinting the key (FingerprintOf), as
// a real request hashes its key; key formatting is done before the clock runs.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "frs/calendar.h"
#include "frs/key.h"
#include "frs/store.h"
#include "frs/store_placement.h"  // the store's own placement, for the simulations

namespace {

using frs::Commit;
using frs::Fingerprint;
using frs::NodeRef;
using frs::Store;
using frs::StoreGeometry;

constexpr uint16_t kBiz = 1;
constexpr uint32_t kWindowS = 86400;  // long enough that no window rolls over during a run
constexpr int kSampleEvery = 64;      // one latency sample per this many ops
constexpr size_t kMaxSamplesPerProc = size_t{1} << 21;

// What a biz with one fixed-window rule keeps per key: 16 bytes.
// The engine's fixed-window block (limit/rule_state.h, window_counter.h):
// tag (interval, algo fixed, 16 bytes), window start, count, borrow debt,
// little-endian. Written as the engine writes it, so that the store keeps
// it as it keeps a real one-rule biz's node (compact: one 32-byte slot).
struct FixedWindowState {
  uint32_t tag;
  uint32_t window_start;
  uint32_t count;
  uint32_t debt;
};
static_assert(sizeof(FixedWindowState) == 16);
constexpr uint32_t FixedTag(uint32_t interval) { return interval | 0u << 25 | 1u << 27; }

uint64_t NowNs(clockid_t clk = CLOCK_MONOTONIC) {
  timespec ts;
  clock_gettime(clk, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
uint32_t NowS() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "frsbench: %s\n", what.c_str());
  std::exit(1);
}

// A tiny JSON object writer (one line).
class Json {
 public:
  Json& Str(const char* k, const std::string& v) {
    Key(k);
    out_ << '"';
    for (char c : v) {
      if (c == '"' || c == '\\') out_ << '\\';
      out_ << c;
    }
    out_ << '"';
    return *this;
  }
  Json& Int(const char* k, uint64_t v) {
    Key(k);
    out_ << v;
    return *this;
  }
  Json& Num(const char* k, double v, int prec = 1) {
    Key(k);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", prec, v);
    out_ << buf;
    return *this;
  }
  Json& Raw(const char* k, const std::string& v) {
    Key(k);
    out_ << v;
    return *this;
  }
  std::string Done() { return "{" + out_.str() + "}"; }

 private:
  void Key(const char* k) {
    if (!first_) out_ << ',';
    first_ = false;
    out_ << '"' << k << "\":";
  }
  std::ostringstream out_;
  bool first_ = true;
};

// A temporary store directory, removed on destruction unless kept.
class TempDir {
 public:
  TempDir(const std::string& parent, const std::string& stem, bool keep) : keep_(keep) {
    std::string tmpl = parent + "/" + stem + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) Die(tmpl + ": mkdtemp: " + std::strerror(errno));
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!keep_) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_;
};

std::string DefaultTmp() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

std::unique_ptr<Store> OpenStore(const std::string& dir, const StoreGeometry& g) {
  frs::StoreOptions o;
  o.dir = dir;
  o.geometry = g;
  auto s = Store::Open(o);
  if (!s.ok()) Die("cannot open the store: " + s.status().ToString());
  return std::move(s.value());
}

uint64_t AllocatedBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += uint64_t(st.st_blocks) * 512;
  }
  return total;
}

// ------------------------------------------------------------ store --procs

struct StoreArgs {
  int procs = 1;
  uint64_t keys = 1000000;
  double seconds = 5;
  std::string dir;
  uint32_t files = 2;
  uint32_t keynodes = 0;  // 0: sized for keys / 0.85
  uint32_t chain = 8;
  // Bytes of state per key: 16 is one fixed rule (a compact node, 1 slot);
  // more makes a general node of NodeSlots(state_bytes) slots, as a biz of
  // more rules or a sliding window keeps (48: an ad cap of sliding max 3
  // plus a daily calendar, or a sliding window of max 10: 3 slots). The
  // fixed-window counter is the state's first 16 bytes either way.
  uint32_t state_bytes = 16;
  uint64_t seed = 42;
  bool keep = false;
  bool verify = true;
};

// Shared (MAP_SHARED | MAP_ANONYMOUS) between the parent and its workers.
struct Shared {
  std::atomic<int> ready;
  std::atomic<int> go;
  uint64_t start_ns;
  uint64_t end_ns;
  struct Proc {
    uint64_t ops;
    uint64_t elapsed_ns;
    uint64_t cpu_ns;  // CPU time the worker got while measuring (the machine is shared)
    uint64_t samples;
    uint64_t errors;
    char error[200];
  } proc[64];
};

// Fixed-width keys "uid:0000000042" (14 bytes): what a uid-keyed rule sees.
constexpr int kKeyWidth = 14;
void FormatKey(uint64_t i, char* out) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "uid:%010" PRIu64, i);
  std::memcpy(out, buf, kKeyWidth);
}

int RunStore(const StoreArgs& a) {
  if (a.procs < 1 || a.procs > 64) Die("--procs must be 1..64");
  if (a.keys < 1 || a.keys > (uint64_t{1} << 32)) Die("--keys must be 1..2^32");
  if (a.chain < 1 || a.chain > 64) Die("--chain must be 1..64");
  if (a.state_bytes < 16 || a.state_bytes > frs::kMaxStateBytes)
    Die("--state-bytes must be 16.." + std::to_string(frs::kMaxStateBytes));
  const uint32_t slots_per_key = a.state_bytes == 16 ? 1 : frs::NodeSlots(a.state_bytes, 0);
  StoreGeometry g;
  g.files = a.files;
  g.chain = a.chain;
  if (a.keynodes) {
    g.keynodes = a.keynodes;
  } else {
    uint64_t slots = static_cast<uint64_t>(std::ceil(static_cast<double>(a.keys) * slots_per_key / 0.85));
    uint64_t per = uint64_t{g.files} * g.chain;
    // A whole number of key-node groups of 64 slots (frs/store.h
    // KeynodeGroup): a count with no such divisor would make groups of
    // fewer key-nodes, or of one.
    const uint64_t unit = std::max<uint32_t>(1, 64 / g.chain);
    g.keynodes = static_cast<uint32_t>(std::max<uint64_t>(unit, (slots + per * unit - 1) / (per * unit) * unit));
  }

  std::unique_ptr<TempDir> tmp;
  std::string dir = a.dir;
  if (dir.empty()) {
    tmp = std::make_unique<TempDir>(DefaultTmp(), "frsbench-store", a.keep);
    dir = tmp->path();
  }

  // Every key's bytes, formatted once; workers index into this (copy-on-write after fork).
  std::vector<char> keybuf(a.keys * kKeyWidth);
  for (uint64_t i = 0; i < a.keys; ++i) FormatKey(i, &keybuf[i * kKeyWidth]);
  auto key_at = [&](uint64_t i) { return std::string_view(&keybuf[i * kKeyWidth], kKeyWidth); };

  auto store = OpenStore(dir, g);
  const frs::StoreStats before = store->Stats();
  const uint32_t now0 = NowS();

  // Prefill: one node per key, count 0, expiring with its window.
  const uint64_t t_fill0 = NowNs();
  uint64_t prefill_errors = 0;
  for (uint64_t i = 0; i < a.keys; ++i) {
    std::string_view k = key_at(i);
    frs::KeyRef ref{kBiz, frs::FingerprintOf(kBiz, k), k, static_cast<uint8_t>(k.size())};
    frs::Status s = store->Update(ref, a.state_bytes, now0, [&](NodeRef& n) {
      auto* st = reinterpret_cast<FixedWindowState*>(n.state);
      if (!n.exists) {
        st->tag = FixedTag(kWindowS);
        st->window_start = now0;
        st->count = 0;
        st->debt = 0;
      }
      n.expire_s = st->window_start + kWindowS;
      return Commit::kWrite;
    });
    if (!s.ok()) {
      if (++prefill_errors == 1) std::fprintf(stderr, "frsbench: prefill: %s\n", s.ToString().c_str());
    }
  }
  const double prefill_s = static_cast<double>(NowNs() - t_fill0) / 1e9;
  const frs::StoreStats filled = store->Stats();

  // Workers.
  const size_t shared_bytes = sizeof(Shared) + size_t(a.procs) * kMaxSamplesPerProc * sizeof(uint32_t);
  void* mem = ::mmap(nullptr, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) Die(std::string("mmap: ") + std::strerror(errno));
  auto* sh = new (mem) Shared();
  auto* samples_base = reinterpret_cast<uint32_t*>(static_cast<char*>(mem) + sizeof(Shared));

  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int p = 0; p < a.procs; ++p) {
    pid_t pid = ::fork();
    if (pid < 0) Die(std::string("fork: ") + std::strerror(errno));
    if (pid > 0) {
      pids.push_back(pid);
      continue;
    }
    // ---- worker p
    Shared::Proc& me = sh->proc[p];
    uint32_t* samples = samples_base + size_t(p) * kMaxSamplesPerProc;
    {
      auto ws = OpenStore(dir, g);
      // The key sequence: uniformly random resident keys, drawn and copied
      // out before the clock runs. The bytes are read sequentially, as a
      // server reads a key from the request it just received; reading them
      // at random from the big key table would add a cache miss that no
      // real request has.
      std::mt19937_64 rng(a.seed * 1000003 + uint64_t(p) + 1);
      size_t seq_len = size_t{1} << 16;
      while (seq_len < (size_t{1} << 21) && seq_len < 4 * a.keys) seq_len <<= 1;
      struct alignas(16) KeyRec {
        char bytes[16];
      };
      std::vector<KeyRec> seq(seq_len);
      std::uniform_int_distribution<uint64_t> pick(0, a.keys - 1);
      for (auto& x : seq) std::memcpy(x.bytes, &keybuf[pick(rng) * kKeyWidth], kKeyWidth);

      uint32_t now_s = NowS();
      const Store::Mutator acquire = [&now_s](NodeRef& n) {
        auto* st = reinterpret_cast<FixedWindowState*>(n.state);
        if (!n.exists || now_s >= st->window_start + kWindowS) {
          st->tag = FixedTag(kWindowS);
          st->window_start = now_s;
          st->count = 0;
          st->debt = 0;
        }
        st->count += 1;
        n.expire_s = st->window_start + kWindowS;
        return Commit::kWrite;
      };
      auto key_of = [&](size_t i) { return std::string_view(seq[i & (seq_len - 1)].bytes, kKeyWidth); };
      auto one = [&](size_t i) {
        std::string_view k = key_of(i);
        frs::KeyRef ref{kBiz, frs::FingerprintOf(kBiz, k), k, static_cast<uint8_t>(k.size())};
        frs::Status s = ws->Update(ref, a.state_bytes, now_s, acquire);
        if (__builtin_expect(!s.ok(), 0)) {
          if (me.errors++ == 0) std::snprintf(me.error, sizeof me.error, "%s", s.ToString().c_str());
        }
      };
      // Warm the worker's own state (writer entry, tid cache) before the start.
      one(0);
      size_t i = 1;
      sh->ready.fetch_add(1);
      while (!sh->go.load(std::memory_order_acquire)) ::usleep(100);
      const uint64_t start = sh->start_ns, end = sh->end_ns;
      while (NowNs() < start) {
      }
      const uint64_t cpu0 = NowNs(CLOCK_PROCESS_CPUTIME_ID);
      uint64_t ops = 0, nsamp = 0, t = start;
      while (t < end) {
        // One timed op, then kSampleEvery - 1 untimed ones.
        uint64_t t0 = NowNs();
        one(i++);
        t = NowNs();
        if (nsamp < kMaxSamplesPerProc)
          samples[nsamp++] = static_cast<uint32_t>(std::min<uint64_t>(t - t0, UINT32_MAX));
        for (int j = 1; j < kSampleEvery; ++j) one(i++);
        ops += kSampleEvery;
        now_s = NowS();
      }
      me.ops = ops;
      me.elapsed_ns = NowNs() - start;
      me.cpu_ns = NowNs(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
      me.samples = nsamp;
    }
    std::fflush(stderr);
    ::_exit(0);
  }

  while (sh->ready.load() < a.procs) {
    int status;
    pid_t r = ::waitpid(-1, &status, WNOHANG);
    if (r > 0) Die("a worker exited before the start");
    ::usleep(1000);
  }
  sh->start_ns = NowNs() + 20000000;  // 20 ms from now, so every worker starts together
  sh->end_ns = sh->start_ns + static_cast<uint64_t>(a.seconds * 1e9);
  sh->go.store(1, std::memory_order_release);
  bool worker_failed = false;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) worker_failed = true;
  }
  if (worker_failed) Die("a worker failed");

  uint64_t total_ops = 0, errors = 0;
  double ops_per_s = 0, ops_per_cpu_s = 0, cpu_share = 0;
  std::string per_proc = "[";
  std::vector<uint32_t> all;
  for (int p = 0; p < a.procs; ++p) {
    const Shared::Proc& pr = sh->proc[p];
    total_ops += pr.ops;
    errors += pr.errors;
    double r = pr.elapsed_ns ? static_cast<double>(pr.ops) * 1e9 / static_cast<double>(pr.elapsed_ns) : 0;
    ops_per_s += r;
    if (pr.cpu_ns) ops_per_cpu_s += static_cast<double>(pr.ops) * 1e9 / static_cast<double>(pr.cpu_ns);
    if (pr.elapsed_ns) cpu_share += static_cast<double>(pr.cpu_ns) / static_cast<double>(pr.elapsed_ns);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.0f", p ? "," : "", r);
    per_proc += buf;
    uint32_t* s = samples_base + size_t(p) * kMaxSamplesPerProc;
    all.insert(all.end(), s, s + pr.samples);
    if (pr.errors) std::fprintf(stderr, "frsbench: worker %d: %" PRIu64 " errors, first: %s\n", p, pr.errors, pr.error);
  }
  per_proc += "]";
  auto pct = [&](double q) -> uint64_t {
    if (all.empty()) return 0;
    size_t k = std::min(all.size() - 1, static_cast<size_t>(q * static_cast<double>(all.size())));
    std::nth_element(all.begin(), all.begin() + static_cast<long>(k), all.end());
    return all[k];
  };
  const uint64_t p50 = pct(0.50), p99 = pct(0.99), p999 = pct(0.999);
  const frs::StoreStats after = store->Stats();

  // Every increment must be there: the counts sum to the ops done.
  std::string check = "skipped";
  if (a.verify) {
    uint64_t sum = 0, nodes = 0;
    frs::Store::Filter flt;
    flt.biz = kBiz;
    frs::Status s = store->ForEach(flt, [&](const frs::NodeInfo& n) {
      FixedWindowState st{};
      std::memcpy(&st, n.state.data(), std::min(n.state.size(), sizeof st));
      sum += st.count;
      ++nodes;
    });
    if (!s.ok()) Die("verify: " + s.ToString());
    // Warm-up ops (one per worker) count too.
    uint64_t expected = total_ops + uint64_t(a.procs);
    if (!a.dir.empty() && before.total.nodes_used) {
      check = "skipped (reused store)";
    } else if (after.total.evictions_live != before.total.evictions_live) {
      check = "skipped (live evictions lost counts)";
    } else {
      check = sum == expected ? "ok" : "MISMATCH sum=" + std::to_string(sum) + " expected=" + std::to_string(expected);
    }
  }

  const uint64_t bytes_mapped = after.bytes_mapped;
  // What the store made of the nodes (compact ones take one slot).
  const double node_slots = filled.total.nodes_used ? static_cast<double>(filled.total.slots_used) /
                                                          static_cast<double>(filled.total.nodes_used)
                                                    : 0.0;
  Json j;
  j.Str("bench", "store")
      .Int("procs", a.procs)
      .Int("keys", a.keys)
      .Num("seconds", a.seconds, 2)
      .Num("ops_per_s", ops_per_s, 0)
      .Raw("ops_per_s_per_proc", per_proc)
      .Num("ops_per_cpu_s", ops_per_cpu_s, 0)
      .Num("cpu_share", cpu_share / a.procs, 3)
      .Int("ops", total_ops)
      .Int("errors", errors)
      .Int("p50_ns", p50)
      .Int("p99_ns", p99)
      .Int("p999_ns", p999)
      .Int("latency_samples", all.size())
      .Num("bytes_per_key", static_cast<double>(bytes_mapped) / static_cast<double>(a.keys), 1)
      .Num("node_bytes_per_key", node_slots * frs::kSlotBytes, 1)
      .Num("slot_bytes_per_key", static_cast<double>(g.slots() * frs::kSlotBytes) / static_cast<double>(a.keys), 1)
      .Int("file_bytes", bytes_mapped)
      .Int("file_bytes_allocated", AllocatedBytes(dir))
      // Slots used, as frsctl stat and /metrics say it (it was nodes over
      // slots: a third of the truth for 3-slot nodes).
      .Num("occupancy", static_cast<double>(filled.total.slots_used) / static_cast<double>(g.slots()), 4)
      .Int("files", g.files)
      .Int("keynodes", g.keynodes)
      .Int("chain", g.chain)
      .Int("slots", g.slots())
      .Int("key_bytes", kKeyWidth)
      .Int("state_bytes", a.state_bytes)
      .Num("prefill_s", prefill_s, 3)
      .Int("prefill_errors", prefill_errors)
      .Int("evictions_live", filled.total.evictions_live - before.total.evictions_live)
      .Int("cuckoo_moves", filled.total.cuckoo_moves - before.total.cuckoo_moves)
      .Int("evictions_live_run", after.total.evictions_live - filled.total.evictions_live)
      .Str("count_check", check)
      .Str("dir", dir);
  std::printf("%s\n", j.Done().c_str());
  store.reset();
  ::munmap(mem, shared_bytes);
  return errors || prefill_errors ? 1 : 0;
}

// ------------------------------------------------------------ store --fill

// Placement into the same key-node groups as the store (frs::PlacementOf),
// without moves: with two choices a key goes where the store's first
// placement step puts it (frs::PlacementChoice: A while it has room to
// spare, else the group of its two with more free slots); `choices` 1 is
// single-choice (always A). Returns the occupancy when a key first finds its
// groups full.
double SimulateFirstOverflow(const std::vector<std::string>& keys, const StoreGeometry& g, int choices,
                             uint64_t* placed_out) {
  // The store locks and fills key-node groups (frs/store.h KeynodeGroup).
  const uint32_t groups = g.keynodes / frs::KeynodeGroup(g), group_slots = frs::GroupSlots(g);
  std::vector<uint8_t> load(uint64_t{g.files} * groups, 0);
  uint64_t placed = 0;
  for (const std::string& key : keys) {
    const frs::KeyPlacement l = frs::PlacementOf(g, kBiz, key);
    uint8_t* chains[2] = {&load[uint64_t{l.file} * groups + l.a], &load[uint64_t{l.file} * groups + l.b]};
    const int ncand = choices == 1 || l.a == l.b ? 1 : 2;
    bool fits[2];
    uint32_t free_slots[2];
    for (int c = 0; c < 2; ++c) {
      fits[c] = *chains[c] < group_slots;
      free_slots[c] = group_slots - *chains[c];
    }
    const int dst = frs::PlacementChoice(fits, free_slots, ncand);
    if (dst < 0) break;
    ++*chains[dst];
    ++placed;
  }
  *placed_out = placed;
  return static_cast<double>(placed) / static_cast<double>(g.slots());
}

struct FillArgs {
  uint32_t files = 2;
  uint32_t keynodes = 65536;
  std::vector<uint32_t> chains{8};
  int repeat = 3;
  uint64_t seed = 1;
  std::string dir;
  bool keep = false;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Array(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.4f", i ? "," : "", v[i]);
    s += buf;
  }
  return s + "]";
}

int RunFill(const FillArgs& a) {
  if (a.repeat < 1) Die("--repeat must be >= 1");
  for (uint32_t chain : a.chains) {
    StoreGeometry g;
    g.files = a.files;
    g.keynodes = a.keynodes;
    g.chain = chain;
    if (chain < 1 || chain > 64) Die("--chain must be 1..64");
    std::vector<double> occ, two, one;
    uint64_t cuckoo_total = 0;
    double insert_ns_total = 0;
    uint64_t inserts_total = 0;
    for (int rep = 0; rep < a.repeat; ++rep) {
      TempDir tmp(a.dir.empty() ? DefaultTmp() : a.dir, "frsbench-fill", a.keep);
      auto store = OpenStore(tmp.path(), g);
      std::mt19937_64 rng(a.seed * 7919 + chain * 131 + uint64_t(rep));
      std::vector<std::string> keys;
      keys.reserve(g.slots());
      const uint32_t now = NowS();
      const Store::Mutator create = [now](NodeRef& n) {
        auto* st = reinterpret_cast<FixedWindowState*>(n.state);
        st->tag = FixedTag(kWindowS);
        st->window_start = now;
        st->count = 1;
        n.expire_s = now + kWindowS;
        return Commit::kWrite;
      };
      double at = -1;
      const uint64_t cap = 2 * g.slots() + 16;
      const uint64_t t0 = NowNs();
      uint64_t n = 0;
      for (; n < cap; ++n) {
        char key[32];
        int len = std::snprintf(key, sizeof key, "k%016" PRIx64, rng());
        std::string_view k(key, static_cast<size_t>(len));
        Fingerprint fp = frs::FingerprintOf(kBiz, k);
        keys.emplace_back(k);
        frs::UpdateResult r;
        frs::Status s = store->Update(frs::KeyRef{kBiz, fp, k, static_cast<uint8_t>(len)}, sizeof(FixedWindowState),
                                      now, create, &r);
        if (!s.ok()) Die("fill: " + s.ToString());
        if (r.evicted_live) {
          // Nodes at the moment the new key needed room: one went, one came.
          at = static_cast<double>(store->Stats().total.nodes_used) / static_cast<double>(g.slots());
          ++n;
          break;
        }
      }
      insert_ns_total += static_cast<double>(NowNs() - t0);
      inserts_total += n;
      if (at < 0) Die("fill: no live eviction after " + std::to_string(cap) + " inserts");
      cuckoo_total += store->Stats().total.cuckoo_moves;
      occ.push_back(at);
      // The same key sequence, placed without moves.
      uint64_t placed;
      two.push_back(SimulateFirstOverflow(keys, g, 2, &placed));
      one.push_back(SimulateFirstOverflow(keys, g, 1, &placed));
    }
    Json j;
    j.Str("bench", "fill")
        .Int("chain", chain)
        .Int("files", g.files)
        .Int("keynodes", g.keynodes)
        .Int("slots", g.slots())
        .Int("repeat", static_cast<uint64_t>(a.repeat))
        .Num("first_live_eviction_occupancy", Median(occ), 4)
        .Raw("runs", Array(occ))
        .Num("without_cuckoo_two_choice_occupancy", Median(two), 4)
        .Raw("without_cuckoo_runs", Array(two))
        .Num("single_choice_occupancy", Median(one), 4)
        .Raw("single_choice_runs", Array(one))
        .Int("cuckoo_moves_per_run", cuckoo_total / static_cast<uint64_t>(a.repeat))
        .Num("insert_ns", insert_ns_total / static_cast<double>(inserts_total), 0);
    std::printf("%s\n", j.Done().c_str());
    std::fflush(stdout);
  }
  return 0;
}

// One calendar window the way cctz's own interface gives it: the local civil
// time of t, back to the window's local start by civil arithmetic, and both
// ends to UTC (the earlier of a repeated time, the end of a skipped one). It
// leaves out WindowOf's rare second pass of a repeated hour.
void DirectWindow(const cctz::time_zone& tz, int64_t interval, int64_t t, int64_t* start, int64_t* end) {
  static const cctz::civil_second kEpoch(1970, 1, 1, 0, 0, 0);
  const cctz::civil_second local = tz.lookup(cctz::time_point<cctz::seconds>(cctz::seconds(t))).cs;
  const int64_t ls = local - kEpoch;
  const int64_t floor = ls >= 0 ? ls / interval * interval : -((-ls + interval - 1) / interval) * interval;
  const cctz::civil_second from = local - (ls - floor);
  auto utc = [&](const cctz::civil_second& cs) {
    const cctz::time_zone::civil_lookup l = tz.lookup(cs);
    return (l.kind == cctz::time_zone::civil_lookup::SKIPPED ? l.trans : l.pre).time_since_epoch().count();
  };
  *start = utc(from);
  *end = utc(from + interval);
}

// The measured loops, by name for callgrind's --toggle-collect.
__attribute__((noinline)) uint64_t ZoneWindowsTable(const frs::CalendarZone& tz, uint32_t interval, int64_t t0,
                                                    int64_t step, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t k = 0; k < n; ++k) {
    int64_t start, end;
    tz.WindowOf(interval, t0 + static_cast<int64_t>(k) * step, &start, &end);
    sum = sum * 31 + static_cast<uint64_t>(start) * 7 + static_cast<uint64_t>(end);
  }
  return sum;
}
__attribute__((noinline)) uint64_t ZoneWindowsDirect(const cctz::time_zone& tz, uint32_t interval, int64_t t0,
                                                     int64_t step, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t k = 0; k < n; ++k) {
    int64_t start, end;
    DirectWindow(tz, interval, t0 + static_cast<int64_t>(k) * step, &start, &end);
    sum = sum * 31 + static_cast<uint64_t>(start) * 7 + static_cast<uint64_t>(end);
  }
  return sum;
}

struct ZoneArgs {
  std::string zone = "America/New_York";
  uint32_t interval = 3600;
  uint64_t windows = 1000000;
  bool direct = false;
};

int RunZone(const ZoneArgs& a) {
  if (a.interval == 0 || a.windows == 0) Die("--interval and --windows must be positive");
  auto tz = frs::CalendarZone::Load(a.zone);
  if (!tz.ok()) Die(tz.status().message());
  cctz::time_zone direct;
  if (a.direct && !cctz::load_time_zone(a.zone, &direct)) Die("cctz cannot load " + a.zone);
  const int64_t t0 = 1767225600;  // 2026-01-01 00:00 UTC
  const int64_t step = std::max<int64_t>(1, 365 * 86400 / static_cast<int64_t>(a.windows));
  const uint64_t begin = NowNs(CLOCK_PROCESS_CPUTIME_ID);
  const uint64_t sum = a.direct ? ZoneWindowsDirect(direct, a.interval, t0, step, a.windows)
                                : ZoneWindowsTable(tz.value(), a.interval, t0, step, a.windows);
  const uint64_t cpu_ns = NowNs(CLOCK_PROCESS_CPUTIME_ID) - begin;
  // Both ways find the same windows: the sums agree (outside a repeated hour's second pass).
  Json j;
  j.Str("bench", "zone")
      .Str("zone", a.zone)
      .Str("lookups", a.direct ? "cctz" : "table")
      .Int("interval", a.interval)
      .Int("windows", a.windows)
      .Num("cpu_ns_per_window", static_cast<double>(cpu_ns) / static_cast<double>(a.windows), 1)
      .Int("checksum", sum);
  std::printf("%s\n", j.Done().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"frsbench: benchmarks of the FRS counter store and of calendar windows' time zone"};
  app.require_subcommand(1);
  CLI::App* st = app.add_subcommand("store", "read-modify-write throughput, or fill occupancy with --fill");

  StoreArgs sa;
  FillArgs fa;
  bool fill = false, all = false;
  uint32_t chain = 8, files = 2, keynodes = 0;
  std::string dir;
  uint64_t seed = 0;
  bool seed_set = false;
  st->add_option("--procs", sa.procs, "worker processes")->capture_default_str();
  st->add_option("--keys", sa.keys, "resident keys")->capture_default_str();
  st->add_option("--seconds", sa.seconds, "measured seconds")->capture_default_str();
  st->add_option("--dir", dir,
                 "store directory (throughput: used as is and kept; --fill: parent of the temporary stores). "
                 "Default: a temporary directory under $TMPDIR or /tmp, removed afterwards");
  st->add_option("--files", files, "store files")->capture_default_str();
  st->add_option("--keynodes", keynodes,
                 "key-nodes per file (throughput default: slots >= keys / 0.85; --fill default: 65536)");
  st->add_option("--chain", chain, "slots per conflict chain")->capture_default_str();
  st->add_option("--state-bytes", sa.state_bytes,
                 "state bytes per key: 16 a one-rule node (1 slot), 32 two rules (an ad cap) or a sliding window of "
                 "max 5..12 (2 slots), 48 one of max 13..20 (3 slots); docs/store.md has every shape")
      ->capture_default_str();
  st->add_flag("--fill", fill, "fill an empty store until the first live eviction");
  st->add_flag("--all", all, "with --fill: chains 4, 8 and 16, one line each");
  st->add_option("--repeat", fa.repeat, "with --fill: runs per chain length (median reported)")->capture_default_str();
  auto* seed_opt = st->add_option("--seed", seed, "random seed");
  st->add_flag("--keep", sa.keep, "keep the temporary store directory");
  bool no_verify = false;
  st->add_flag("--no-verify", no_verify, "skip the check that the counts sum to the ops done");

  CLI::App* zn = app.add_subcommand("zone", "the cost of the time zone on a calendar window");
  ZoneArgs za;
  zn->add_option("--zone", za.zone, "IANA zone")->capture_default_str();
  zn->add_option("--interval", za.interval, "window seconds")->capture_default_str();
  zn->add_option("--windows", za.windows, "windows computed")->capture_default_str();
  zn->add_flag("--direct", za.direct, "ask cctz for every lookup instead of FRS's zone table");

  CLI11_PARSE(app, argc, argv);
  if (zn->parsed()) return RunZone(za);
  seed_set = seed_opt->count() > 0;
  if (fill) {
    fa.files = files;
    fa.keynodes = keynodes ? keynodes : 65536;
    fa.chains = all ? std::vector<uint32_t>{4, 8, 16} : std::vector<uint32_t>{chain};
    fa.dir = dir;
    fa.keep = sa.keep;
    if (seed_set) fa.seed = seed;
    return RunFill(fa);
  }
  if (all) Die("--all goes with --fill");
  sa.dir = dir;
  sa.files = files;
  sa.keynodes = keynodes;
  sa.chain = chain;
  sa.verify = !no_verify;
  if (seed_set) sa.seed = seed;
  return RunStore(sa);
}
