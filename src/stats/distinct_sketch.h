// stats/distinct_sketch.h: counting the distinct values of a field (the
// distinct users of an app today) in bounded shared memory.
//
// A HyperLogLog of 2^15 registers (standard error 1.04 / 181 = 0.57 %: 2 % is
// 3.5 standard errors, so about one large group in 2,000 lands outside it)
// with two exact tiers in front of it, so small groups are counted exactly:
//
//   inline  kInlineCodes codes in the group's own record;
//   sparse  a block of kSparseSlots codes (an open-addressed set), used up to
//           kSparseLimit codes: up to there the count is exact;
//   dense   kRegisters one-byte registers, once the sparse set is full.
//
// A value is hashed (XXH3-64) to a 32-bit *code*: register index (15 bits),
// rank (6 bits: the position of the first 1 in the next 49 bits, 1..50) and
// 11 more hash bits. The code is never zero, carries what the dense form
// needs, and tells ~2^28 values apart, so the exact tiers count exactly up to
// collisions (for 389 values, about one chance in 3,500 of being one low).
//
// Every tier only ever grows by one atomic step (a compare-and-swap of a zero
// slot, an atomic max of a register), each idempotent. A writer killed at any
// instruction leaves a valid sketch, writers need no lock, and a value counted
// into two tiers by racing writers is counted once, because reading takes the
// union: the exact count of the distinct codes of inline and sparse, or, once
// a dense block exists, the estimate over dense merged with both.
// The estimate is Ertl's "improved raw estimator" (2017), which needs neither
// bias tables nor a switch to linear counting at small cardinalities.
//
// Thread safety: Insert may run concurrently from any thread or process over
// shared memory; Count and Merge read racing writers' values safely (each
// byte or word is read atomically) and see a union that only grows.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace frs::stats::sketch {

inline constexpr uint32_t kPrecision = 15;
inline constexpr uint32_t kRegisters = 1u << kPrecision;  // 32,768 bytes dense
inline constexpr uint32_t kInlineCodes = 5;
inline constexpr uint32_t kSparseSlots = 512;  // 2,048 bytes sparse
inline constexpr uint32_t kSparseLimit = 384;  // exact up to here

uint32_t CodeOf(std::string_view value);
inline uint32_t RegisterOf(uint32_t code) { return code >> (32 - kPrecision); }
inline uint8_t RankOf(uint32_t code) { return static_cast<uint8_t>((code >> 11) & 63); }

// The sketch's state as it lies in a group record (inline codes and the
// offsets of its blocks). Blocks are reached through the caller, which owns
// their allocation (an allocation may fail: a full disk).
struct SketchHead {
  uint32_t sparse;    // offset of the sparse block (caller's units); 0: none
  uint32_t dense;     // offset of the dense block; 0: none
  uint32_t sparse_n;  // codes claimed in the sparse block
  uint32_t inline_codes[kInlineCodes];
};
static_assert(sizeof(SketchHead) == 32);

// Allocates a zeroed block of `bytes` and returns its offset (never 0), or 0
// when it cannot.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  virtual uint32_t Allocate(uint32_t bytes) = 0;
  // The block of `bytes` at `offset`, or null when that is not one (a
  // damaged offset): the sketch then treats it as absent.
  virtual uint8_t* At(uint32_t offset, uint32_t bytes) const = 0;
};

// Adds `code`. Returns false only when a block it needed could not be
// allocated (the value is then not counted).
bool Insert(SketchHead* head, BlockSource* blocks, uint32_t code);

// A sketch read out of shared memory (or decoded from its text form): the
// exact codes while there is no dense part, else the registers.
class Sketch {
 public:
  static Sketch Read(const SketchHead& head, const BlockSource& blocks);
  // The union: what one sketch would hold after every insert of both.
  void Merge(const Sketch& other);
  // The distinct count: exact while exact(), else the estimate.
  uint64_t Count() const;
  bool exact() const { return registers_.empty(); }
  // Compact text for shipping between servers: "e:" + hex codes, or
  // "d:" + the registers run-length coded in hex. Decode refuses anything
  // else with false.
  std::string Encode() const;
  static bool Decode(std::string_view text, Sketch* out);
  // Adds every value this sketch holds to a shared one (a handoff's merge).
  // False when a block could not be allocated.
  bool InsertInto(SketchHead* head, BlockSource* blocks) const;
  // Bytes this sketch used in memory (documented bound: 32 + 2,048 + 32,768).
  static constexpr uint64_t kMaxBytes = sizeof(SketchHead) + kSparseSlots * 4 + kRegisters;

 private:
  void AddCode(uint32_t code);
  void Densify();
  std::vector<uint32_t> codes_;     // sorted, unique (exact form)
  std::vector<uint8_t> registers_;  // kRegisters (dense form), or empty
};

// The estimator alone, over kRegisters registers (tested on its own).
double EstimateRegisters(std::span<const uint8_t> registers);

}  // namespace frs::stats::sketch
