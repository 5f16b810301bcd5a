#include "stats/distinct_sketch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace frs::stats::sketch {
namespace sketch_test {

// A BlockSource over one std::vector arena, reserved up front so that the
// addresses it hands out never move (threads may allocate at once). Offsets
// are bytes; the first 64 are never handed out, so no block is at 0.
class ArenaBlocks final : public BlockSource {
 public:
  explicit ArenaBlocks(size_t capacity = 1 << 20) : arena_(capacity, 0) {}
  uint32_t Allocate(uint32_t bytes) override {
    const uint64_t off = next_.fetch_add((bytes + 63) / 64 * 64, std::memory_order_relaxed);
    if (off + bytes > arena_.size()) return 0;
    handed_.fetch_add(bytes, std::memory_order_relaxed);
    allocations_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    sizes_.push_back(bytes);
    return static_cast<uint32_t>(off);
  }
  uint8_t* At(uint32_t offset, uint32_t bytes) const override {
    if (offset + uint64_t{bytes} > arena_.size()) return nullptr;
    return const_cast<uint8_t*>(arena_.data()) + offset;
  }

  uint64_t handed() const { return handed_.load(); }
  uint64_t allocations() const { return allocations_.load(); }
  std::vector<uint32_t> sizes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sizes_;
  }

 private:
  std::vector<uint8_t> arena_;
  std::atomic<uint64_t> next_{64};
  std::atomic<uint64_t> handed_{0};
  std::atomic<uint64_t> allocations_{0};
  mutable std::mutex mu_;
  std::vector<uint32_t> sizes_;
};

// One shared sketch: a head and its arena.
struct Shared {
  SketchHead head{};
  ArenaBlocks blocks;
  bool Add(std::string_view value) { return Insert(&head, &blocks, CodeOf(value)); }
  Sketch Read() const { return Sketch::Read(head, blocks); }
};

// prefix + decimal i, without allocating.
class Namer {
 public:
  explicit Namer(std::string_view prefix) : len_(prefix.size()) { std::memcpy(buf_, prefix.data(), len_); }
  std::string_view operator()(uint64_t i) {
    auto r = std::to_chars(buf_ + len_, buf_ + sizeof buf_, i);
    return std::string_view(buf_, static_cast<size_t>(r.ptr - buf_));
  }

 private:
  char buf_[64];
  size_t len_;
};

void AddRange(Shared* s, std::string_view prefix, uint64_t from, uint64_t to) {
  Namer name(prefix);
  for (uint64_t i = from; i < to; ++i) ASSERT_TRUE(s->Add(name(i)));
}

// The sketch of prefix + i for i in [from, to).
Sketch RangeSketch(std::string_view prefix, uint64_t from, uint64_t to) {
  Shared s;
  AddRange(&s, prefix, from, to);
  return s.Read();
}

// `a` merged with `b`.
Sketch Merged(Sketch a, const Sketch& b) {
  a.Merge(b);
  return a;
}

TEST(DistinctSketch, CountsExactlyUpToTheSparseLimitWhateverTheDuplicates) {
  ASSERT_EQ(kInlineCodes + kSparseLimit, 389u);
  for (uint32_t n = 1; n <= kInlineCodes + kSparseLimit; ++n) {
    Shared s;
    Namer name("user");
    // Every value three times, in three orders, with the sketch read between.
    for (uint32_t i = 0; i < n; ++i) ASSERT_TRUE(s.Add(name(i)));
    for (uint32_t i = n; i-- > 0;) ASSERT_TRUE(s.Add(name(i)));
    for (uint32_t i = 0; i < n; ++i) ASSERT_TRUE(s.Add(name((i * 7) % n)));
    const Sketch sk = s.Read();
    ASSERT_TRUE(sk.exact()) << n << " values, counted " << sk.Count();
    ASSERT_EQ(sk.Count(), n);
    EXPECT_EQ(s.head.dense, 0u) << n;
    EXPECT_EQ(s.head.sparse != 0, n > kInlineCodes) << n;
  }
  // One value inserted 10,000 times is one.
  Shared one;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(one.Add("same"));
  EXPECT_EQ(one.Read().Count(), 1u);
  EXPECT_EQ(one.blocks.allocations(), 0u);  // inline only
  // Nothing inserted: zero, exact.
  Shared none;
  EXPECT_TRUE(none.Read().exact());
  EXPECT_EQ(none.Read().Count(), 0u);
  // One past the exact tiers: the dense form, still close.
  Shared past;
  AddRange(&past, "user", 0, 390);
  EXPECT_FALSE(past.Read().exact());
  EXPECT_NE(past.head.dense, 0u);
  EXPECT_NEAR(static_cast<double>(past.Read().Count()), 390.0, 0.02 * 390);
}

// The smallest case of the exact tiers' limit: 389 distinct values (5
// inline, 384 sparse), then one of them again.
TEST(DistinctSketch, ARepeatedValueAtTheSparseLimitStaysExact) {
  Shared s;
  AddRange(&s, "user", 0, 389);
  ASSERT_TRUE(s.Read().exact());
  ASSERT_EQ(s.Read().Count(), 389u);
  ASSERT_TRUE(s.Add("user100"));  // held in the sparse set already
  EXPECT_EQ(s.head.dense, 0u) << "a value already counted allocated the dense block";
  EXPECT_TRUE(s.Read().exact());
  EXPECT_EQ(s.Read().Count(), 389u);
}

TEST(DistinctSketch, EstimatesWithinTwoPercent) {
  struct Case {
    const char* prefix;
    uint64_t n;
  };
  const Case cases[] = {{"user", 1000},    {"user", 100000}, {"user", 1000000}, {"10.1.", 100000},
                        {"sess-", 100000}, {"", 100000},     {"app7|u", 5000},  {"device:", 20000}};
  for (const Case& c : cases) {
    Shared s;
    AddRange(&s, c.prefix, 0, c.n);
    const Sketch sk = s.Read();
    EXPECT_FALSE(sk.exact());
    EXPECT_NEAR(static_cast<double>(sk.Count()), static_cast<double>(c.n), 0.02 * static_cast<double>(c.n))
        << "prefix '" << c.prefix << "' n=" << c.n;
    // Inserting them all again changes nothing.
    const uint64_t before = sk.Count();
    AddRange(&s, c.prefix, 0, std::min<uint64_t>(c.n, 100000));
    EXPECT_EQ(s.Read().Count(), before) << c.prefix;
  }
  // Values that do not share a prefix: i scattered over a large space.
  Shared s;
  Namer name("k");
  for (uint64_t i = 0; i < 50000; ++i) ASSERT_TRUE(s.Add(name(i * 2654435761u % 1000000007u)));
  EXPECT_NEAR(static_cast<double>(s.Read().Count()), 50000.0, 0.02 * 50000);
}

TEST(DistinctSketch, EstimatorOfEmptyAndFullRegisters) {
  std::vector<uint8_t> regs(kRegisters, 0);
  EXPECT_DOUBLE_EQ(EstimateRegisters(regs), 0.0);
  // One register of rank 1 set: about one value.
  regs[5] = 1;
  EXPECT_NEAR(EstimateRegisters(regs), 1.0, 0.05);
}

TEST(DistinctSketch, MergeIsTheUnionNotTheSum) {
  const Sketch a = RangeSketch("user", 0, 60000), b = RangeSketch("user", 40000, 100000);
  const Sketch m = Merged(a, b);
  EXPECT_FALSE(m.exact());
  EXPECT_NEAR(static_cast<double>(m.Count()), 100000.0, 0.02 * 100000);
  // The union of the same inserts into one sketch has the very same registers.
  const Sketch both = RangeSketch("user", 0, 100000);
  EXPECT_EQ(m.Count(), both.Count());
  EXPECT_EQ(m.Encode(), both.Encode());
  // Merging is idempotent and commutative.
  EXPECT_EQ(Merged(m, a).Count(), m.Count());
  EXPECT_EQ(Merged(b, a).Count(), m.Count());
}

TEST(DistinctSketch, MergeOfExactSketchesStaysExactWhileSmall) {
  struct Case {
    const char* prefix;
    uint64_t a_from, a_to, b_from, b_to;
    bool exact;
    uint64_t count;  // exactly when exact, within 2% otherwise
  };
  const Case cases[] = {
      {"u", 0, 200, 100, 300, true, 300},
      {"v", 0, 3, 2, 5, true, 5},           // two inline-only sketches
      {"w", 0, 300, 89, 389, true, 389},    // exact up to 389 after a merge ...
      {"w", 0, 300, 200, 500, false, 500},  // ... past it, dense and close
  };
  for (const Case& c : cases) {
    const Sketch m = Merged(RangeSketch(c.prefix, c.a_from, c.a_to), RangeSketch(c.prefix, c.b_from, c.b_to));
    EXPECT_EQ(m.exact(), c.exact) << c.prefix << " " << c.b_to;
    const double want = static_cast<double>(c.count);
    if (c.exact) {
      EXPECT_EQ(m.Count(), c.count);
    } else {
      EXPECT_NEAR(static_cast<double>(m.Count()), want, 0.02 * want);
    }
  }
  // Merged with an empty one: unchanged.
  EXPECT_EQ(Merged(Merged(RangeSketch("v", 0, 3), RangeSketch("v", 2, 5)), Sketch{}).Count(), 5u);
}

TEST(DistinctSketch, MergeOfExactAndDense) {
  const Sketch small = RangeSketch("user", 0, 100), big = RangeSketch("user", 50, 5050);
  ASSERT_TRUE(small.exact());
  ASSERT_FALSE(big.exact());
  const Sketch m1 = Merged(small, big), m2 = Merged(big, small);
  EXPECT_FALSE(m1.exact());
  EXPECT_FALSE(m2.exact());
  EXPECT_EQ(m1.Count(), m2.Count());
  EXPECT_NEAR(static_cast<double>(m1.Count()), 5050.0, 0.02 * 5050);
  // Small values all new to the dense one: the count grows by about 100.
  const Sketch m3 = Merged(big, RangeSketch("other", 0, 100));
  EXPECT_NEAR(static_cast<double>(m3.Count()), 5100.0, 0.02 * 5100);
}

TEST(DistinctSketch, EncodeDecodeRoundTrips) {
  for (uint64_t n : {0u, 3u, 200u, 389u, 390u, 10000u, 300000u}) {
    Shared s;
    AddRange(&s, "user", 0, n);
    const Sketch sk = s.Read();
    const std::string text = sk.Encode();
    EXPECT_TRUE(text.starts_with(sk.exact() ? "e:" : "d:")) << n;
    Sketch back;
    ASSERT_TRUE(Sketch::Decode(text, &back)) << n << ": " << text.substr(0, 40);
    EXPECT_EQ(back.exact(), sk.exact()) << n;
    EXPECT_EQ(back.Count(), sk.Count()) << n;
    EXPECT_EQ(back.Encode(), text) << n;
    if (n > 0 && n <= 389) {
      EXPECT_EQ(back.Count(), n);
    }
    // A decoded sketch merges like the original.
    Sketch m = back;
    m.Merge(sk);
    EXPECT_EQ(m.Count(), sk.Count()) << n;
  }
}

TEST(DistinctSketch, DecodeRefusesGarbage) {
  Shared dense;
  AddRange(&dense, "user", 0, 20000);
  const std::string good = dense.Read().Encode();
  ASSERT_TRUE(good.starts_with("d:"));
  Sketch out;
  ASSERT_TRUE(Sketch::Decode(good, &out));

  const std::string all_a = "d:" + std::string(kRegisters, 'A');
  ASSERT_TRUE(Sketch::Decode(all_a, &out));  // every zero register spelled out

  const std::vector<std::string> bad = {
      "",
      "x:",
      "e",
      "E:00000001",
      "e:123",        // not a multiple of 8 digits
      "e:0000000g",   // not hex
      "e:0000000A",   // upper case is not ours
      "e:00000000",   // code 0 is never a code
      "e:00000001 ",  // trailing byte
      "d:",           // no registers
      "d:AAA",        // too few
      "d:" + std::string(kRegisters - 1, 'A'),
      "d:" + std::string(kRegisters + 1, 'A'),        // too many
      "d:" + std::string(kRegisters - 1, 'A') + "!",  // not a digit
      "d:" + std::string(kRegisters - 1, 'A') + "9",  // rank 61, more than a code can have
      "d:." + std::to_string(kRegisters + 1) + ".",   // a run past the end
      "d:." + std::to_string(kRegisters) + ".A",      // one past
      "d:..",                                         // empty run
      "d:.12",                                        // unterminated run
      "d:.1x.",                                       // not decimal
      "d:.00000" + std::to_string(kRegisters) + ".",  // too many digits
      good.substr(0, good.size() - 1),                // truncated
      good + "A",                                     // one register too many
  };
  for (const std::string& b : bad) {
    Sketch s;
    EXPECT_FALSE(Sketch::Decode(b, &s)) << "'" << b.substr(0, 60) << "' (" << b.size() << " bytes)";
  }
}

TEST(DistinctSketch, MemoryStaysWithinOneSparseAndOneDenseBlock) {
  // 300,000 values: hundreds of times the sparse limit, long past the switch
  // to dense registers (EstimatesWithinTwoPercent counts a million).
  Shared s;
  AddRange(&s, "user", 0, 300000);
  EXPECT_NEAR(static_cast<double>(s.Read().Count()), 3e5, 0.02 * 3e5);
  EXPECT_EQ(s.blocks.allocations(), 2u);
  const std::vector<uint32_t> sizes = s.blocks.sizes();
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0], kSparseSlots * 4);  // 2,048
  EXPECT_EQ(sizes[1], kRegisters);
  EXPECT_LE(s.blocks.handed() + sizeof(SketchHead), Sketch::kMaxBytes);
  EXPECT_EQ(Sketch::kMaxBytes, 32u + 2048u + kRegisters);
}

TEST(DistinctSketch, InsertWithoutBlocksReportsFailure) {
  // An arena with no room: the inline codes still work, the sixth value fails.
  SketchHead head{};
  ArenaBlocks full(64);
  Namer name("user");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Insert(&head, &full, CodeOf(name(i))));
  EXPECT_FALSE(Insert(&head, &full, CodeOf(name(5))));
  EXPECT_EQ(Sketch::Read(head, full).Count(), 5u);
}

TEST(DistinctSketch, InsertIntoASharedSketchIsAMerge) {
  Shared a, target;
  AddRange(&a, "user", 0, 30000);
  AddRange(&target, "user", 20000, 50000);
  ASSERT_TRUE(a.Read().InsertInto(&target.head, &target.blocks));
  EXPECT_EQ(target.Read().Count(), RangeSketch("user", 0, 50000).Count());
  EXPECT_NEAR(static_cast<double>(target.Read().Count()), 50000.0, 0.02 * 50000);
  // An exact one into an exact one stays exact.
  Shared e, f;
  AddRange(&e, "x", 0, 150);
  AddRange(&f, "x", 100, 250);
  ASSERT_TRUE(e.Read().InsertInto(&f.head, &f.blocks));
  EXPECT_TRUE(f.Read().exact());
  EXPECT_EQ(f.Read().Count(), 250u);
}

// Four threads inserting overlapping ranges into one sketch: the same
// count as one thread inserting their union.
void RaceInto(Shared* s, std::string_view prefix, uint64_t total, uint64_t span, uint64_t step) {
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Namer name(prefix);
      ready.fetch_add(1);
      while (ready.load() < 4) {
      }
      // Thread t: span values from t*step, wrapping around `total`.
      for (uint64_t k = 0; k < span; ++k)
        if (!s->Add(name((t * step + k) % total))) std::abort();
    });
  }
  for (auto& th : threads) th.join();
}

TEST(DistinctSketch, ConcurrentInsertsCountAsOneThreadWould) {
  // 4 x 200 over n values, wrapping: all covered (for 389: 0..199, 97..296,
  // 194..393, 291..490), most of them by two threads.
  for (uint64_t n : {100u, 388u, 389u}) {
    for (int round = 0; round < 50; ++round) {
      Shared s;
      RaceInto(&s, "user", n, 200, n / 4);
      const Sketch sk = s.Read();
      EXPECT_TRUE(sk.exact()) << n << " values, round " << round << ", counted " << sk.Count();
      EXPECT_EQ(sk.Count(), n) << round;
      if (!sk.exact() || sk.Count() != n) break;
    }
  }
  for (int round = 0; round < 3; ++round) {
    Shared s;
    RaceInto(&s, "user", 120000, 60000, 20000);  // 0..60000, 20000..80000, ... 60000..120000
    const Sketch one = RangeSketch("user", 0, 120000);
    const Sketch sk = s.Read();
    EXPECT_FALSE(sk.exact());
    EXPECT_EQ(sk.Count(), one.Count()) << round;
    EXPECT_EQ(sk.Encode(), one.Encode()) << round;
    EXPECT_NEAR(static_cast<double>(sk.Count()), 120000.0, 0.02 * 120000);
  }
}

}  // namespace sketch_test
}  // namespace frs::stats::sketch
