#include "stats/distinct_sketch.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace frs::stats::sketch {
namespace {

inline constexpr uint32_t kRankBits = 64 - kPrecision;  // q: the bits that rank the value
inline constexpr uint32_t kSparseBytes = kSparseSlots * 4;

uint32_t LoadCode(const uint32_t& w) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(w)).load(std::memory_order_acquire);
}

// Claims a zero slot for `code`; true when the slot holds `code` after.
bool ClaimSlot(uint32_t& w, uint32_t code, bool* claimed) {
  uint32_t expected = 0;
  std::atomic_ref<uint32_t> a(w);
  if (a.compare_exchange_strong(expected, code, std::memory_order_acq_rel)) {
    *claimed = true;
    return true;
  }
  return expected == code;
}

uint32_t SparseStart(uint32_t code) { return (code * 0x9E3779B1u) >> (32 - 9); }
static_assert(kSparseSlots == 1u << 9);

void DenseMax(uint8_t* registers, uint32_t code) {
  std::atomic_ref<uint8_t> r(registers[RegisterOf(code)]);
  const uint8_t rank = RankOf(code);
  uint8_t cur = r.load(std::memory_order_relaxed);
  while (cur < rank && !r.compare_exchange_weak(cur, rank, std::memory_order_relaxed)) {
  }
}

// The offset of the block `field` points at, allocating and publishing one
// when there is none; 0 when none can be allocated. Racing writers may both
// allocate: one wins the compare-and-swap and the loser's block stays unused
// (the file's bound has room for it).
uint32_t BlockOf(uint32_t& field, BlockSource* blocks, uint32_t bytes) {
  std::atomic_ref<uint32_t> a(field);
  uint32_t off = a.load(std::memory_order_acquire);
  if (off != 0) return off;
  const uint32_t fresh = blocks->Allocate(bytes);
  if (fresh == 0) return 0;
  uint32_t expected = 0;
  if (a.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return fresh;
  return expected;
}

double Sigma(double x) {
  if (x == 1.0) return std::numeric_limits<double>::infinity();
  double y = 1.0, z = x, prev;
  do {
    x *= x;
    prev = z;
    z += x * y;
    y += y;
  } while (z != prev);
  return z;
}

double Tau(double x) {
  if (x == 0.0 || x == 1.0) return 0.0;
  double y = 1.0, z = 1.0 - x, prev;
  do {
    x = std::sqrt(x);
    prev = z;
    y *= 0.5;
    z -= (1.0 - x) * (1.0 - x) * y;
  } while (z != prev);
  return z / 3.0;
}

constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int DigitValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

}  // namespace

uint32_t CodeOf(std::string_view value) {
  const uint64_t h = XXH3_64bits(value.data(), value.size());
  const uint32_t index = static_cast<uint32_t>(h >> kRankBits);
  const uint64_t rest = h & ((uint64_t{1} << kRankBits) - 1);
  // The rank: 1 + the leading zeros of the q bits, q + 1 when all are zero.
  const uint32_t rank = rest == 0 ? kRankBits + 1 : static_cast<uint32_t>(__builtin_clzll(rest)) - kPrecision + 1;
  return index << (32 - kPrecision) | rank << 11 | static_cast<uint32_t>(h & 0x7FF);
}

bool Insert(SketchHead* head, BlockSource* blocks, uint32_t code) {
  if (uint32_t dense = LoadCode(head->dense); dense != 0) {
    uint8_t* regs = blocks->At(dense, kRegisters);
    if (regs == nullptr) return false;
    DenseMax(regs, code);
    return true;
  }
  bool claimed = false;
  for (uint32_t& slot : head->inline_codes) {
    const uint32_t v = LoadCode(slot);
    if (v == code) return true;
    if (v == 0 && ClaimSlot(slot, code, &claimed)) return true;
  }
  const bool room = std::atomic_ref<uint32_t>(head->sparse_n).load(std::memory_order_relaxed) < kSparseLimit;
  // A full sparse set is still looked in: a value it holds stays counted
  // there (exactly), and only a new one makes the sketch go dense.
  const uint32_t sparse = room ? BlockOf(head->sparse, blocks, kSparseBytes) : LoadCode(head->sparse);
  if (room && sparse == 0) return false;
  if (sparse != 0) {
    auto* slots = reinterpret_cast<uint32_t*>(blocks->At(sparse, kSparseBytes));
    if (slots == nullptr) return false;
    const uint32_t start = SparseStart(code);
    for (uint32_t k = 0; k < kSparseSlots; ++k) {
      uint32_t& slot = slots[(start + k) & (kSparseSlots - 1)];
      const uint32_t v = LoadCode(slot);
      if (v == code) return true;
      if (v != 0) continue;
      if (!room) break;  // not in the set, and no room for it
      if (ClaimSlot(slot, code, &claimed)) {
        if (claimed) std::atomic_ref<uint32_t>(head->sparse_n).fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
  }
  const uint32_t dense = BlockOf(head->dense, blocks, kRegisters);
  uint8_t* regs = dense == 0 ? nullptr : blocks->At(dense, kRegisters);
  if (regs == nullptr) return false;
  DenseMax(regs, code);
  return true;
}

Sketch Sketch::Read(const SketchHead& head, const BlockSource& blocks) {
  Sketch s;
  for (const uint32_t& slot : head.inline_codes)
    if (uint32_t v = LoadCode(slot); v != 0) s.codes_.push_back(v);
  const uint32_t sparse = LoadCode(head.sparse);
  if (const auto* slots = sparse == 0 ? nullptr : reinterpret_cast<const uint32_t*>(blocks.At(sparse, kSparseBytes))) {
    for (uint32_t k = 0; k < kSparseSlots; ++k)
      if (uint32_t v = LoadCode(slots[k]); v != 0) s.codes_.push_back(v);
  }
  std::sort(s.codes_.begin(), s.codes_.end());
  s.codes_.erase(std::unique(s.codes_.begin(), s.codes_.end()), s.codes_.end());
  const uint32_t dense = LoadCode(head.dense);
  if (const uint8_t* regs = dense == 0 ? nullptr : blocks.At(dense, kRegisters)) {
    s.registers_.resize(kRegisters);
    for (uint32_t i = 0; i < kRegisters; ++i)
      s.registers_[i] = std::atomic_ref<uint8_t>(const_cast<uint8_t&>(regs[i])).load(std::memory_order_relaxed);
    for (uint32_t code : s.codes_)
      s.registers_[RegisterOf(code)] = std::max(s.registers_[RegisterOf(code)], RankOf(code));
    s.codes_.clear();
  }
  return s;
}

void Sketch::Densify() {
  registers_.assign(kRegisters, 0);
  for (uint32_t code : codes_) registers_[RegisterOf(code)] = std::max(registers_[RegisterOf(code)], RankOf(code));
  codes_.clear();
  codes_.shrink_to_fit();
}

void Sketch::AddCode(uint32_t code) {
  if (!exact()) {
    registers_[RegisterOf(code)] = std::max(registers_[RegisterOf(code)], RankOf(code));
    return;
  }
  auto it = std::lower_bound(codes_.begin(), codes_.end(), code);
  if (it == codes_.end() || *it != code) codes_.insert(it, code);
}

void Sketch::Merge(const Sketch& other) {
  if (exact() && other.exact()) {
    std::vector<uint32_t> both;
    both.reserve(codes_.size() + other.codes_.size());
    std::set_union(codes_.begin(), codes_.end(), other.codes_.begin(), other.codes_.end(), std::back_inserter(both));
    codes_ = std::move(both);
    // As one shared sketch would: exact while a sparse set could hold them all.
    if (codes_.size() > kSparseLimit + kInlineCodes) Densify();
    return;
  }
  if (exact()) Densify();
  if (other.exact()) {
    for (uint32_t code : other.codes_) AddCode(code);
  } else {
    for (uint32_t i = 0; i < kRegisters; ++i) registers_[i] = std::max(registers_[i], other.registers_[i]);
  }
}

bool Sketch::InsertInto(SketchHead* head, BlockSource* blocks) const {
  if (exact()) {
    for (uint32_t code : codes_)
      if (!Insert(head, blocks, code)) return false;
    return true;
  }
  const uint32_t dense = BlockOf(head->dense, blocks, kRegisters);
  uint8_t* regs = dense == 0 ? nullptr : blocks->At(dense, kRegisters);
  if (regs == nullptr) return false;
  // A register of rank r is what a code of that register and rank inserts.
  for (uint32_t i = 0; i < kRegisters; ++i)
    if (registers_[i] != 0) DenseMax(regs, i << (32 - kPrecision) | uint32_t{registers_[i]} << 11);
  return true;
}

uint64_t Sketch::Count() const {
  if (exact()) return codes_.size();
  return static_cast<uint64_t>(std::llround(EstimateRegisters(registers_)));
}

double EstimateRegisters(std::span<const uint8_t> registers) {
  const double m = static_cast<double>(registers.size());
  uint32_t c[kRankBits + 2] = {};
  for (uint8_t r : registers) ++c[std::min<uint32_t>(r, kRankBits + 1)];
  double z = m * Tau(1.0 - c[kRankBits + 1] / m);
  for (uint32_t k = kRankBits; k >= 1; --k) z = 0.5 * (z + c[k]);
  z += m * Sigma(c[0] / m);
  const double alpha_inf = 1.0 / (2.0 * std::log(2.0));
  return alpha_inf * m * m / z;
}

std::string Sketch::Encode() const {
  std::string out;
  if (exact()) {
    static constexpr char kHex[] = "0123456789abcdef";
    out.reserve(2 + codes_.size() * 8);
    out = "e:";
    for (uint32_t code : codes_)
      for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(code >> shift) & 15]);
    return out;
  }
  // One digit per register, runs of three or more zeros as ".N." (N decimal).
  out = "d:";
  for (uint32_t i = 0; i < kRegisters;) {
    uint32_t run = 0;
    while (i + run < kRegisters && registers_[i + run] == 0) ++run;
    if (run >= 3) {
      out += '.';
      out += std::to_string(run);
      out += '.';
      i += run;
      continue;
    }
    out.push_back(kDigits[registers_[i] & 63]);
    ++i;
  }
  return out;
}

bool Sketch::Decode(std::string_view text, Sketch* out) {
  Sketch s;
  if (text.starts_with("e:")) {
    text.remove_prefix(2);
    if (text.size() % 8 != 0) return false;
    for (size_t i = 0; i < text.size(); i += 8) {
      uint32_t code = 0;
      for (size_t j = 0; j < 8; ++j) {
        const char c = text[i + j];
        const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return false;
        code = code << 4 | static_cast<uint32_t>(v);
      }
      if (code == 0) return false;
      s.codes_.push_back(code);
    }
    std::sort(s.codes_.begin(), s.codes_.end());
    s.codes_.erase(std::unique(s.codes_.begin(), s.codes_.end()), s.codes_.end());
    *out = std::move(s);
    return true;
  }
  if (!text.starts_with("d:")) return false;
  text.remove_prefix(2);
  s.registers_.reserve(kRegisters);
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '.') {
      const size_t end = text.find('.', i + 1);
      if (end == std::string_view::npos || end == i + 1 || end - i > 6) return false;
      uint32_t run = 0;
      for (size_t j = i + 1; j < end; ++j) {
        if (text[j] < '0' || text[j] > '9') return false;
        run = run * 10 + static_cast<uint32_t>(text[j] - '0');
      }
      if (run > kRegisters - s.registers_.size()) return false;
      s.registers_.insert(s.registers_.end(), run, 0);
      i = end + 1;
      continue;
    }
    const int v = DigitValue(text[i]);
    if (v < 0 || v > static_cast<int>(kRankBits + 1) || s.registers_.size() == kRegisters) return false;
    s.registers_.push_back(static_cast<uint8_t>(v));
    ++i;
  }
  if (s.registers_.size() != kRegisters) return false;
  *out = std::move(s);
  return true;
}

}  // namespace frs::stats::sketch
