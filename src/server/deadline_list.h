// server/deadline_list.h: an intrusive FIFO of connections ordered by deadline.
//
// Every node in one list gets the same timeout added to a monotonic "now"
// when it is (re)appended, so appending keeps the list sorted and the
// expired nodes are always at the front: insert, move and expire are O(1)
// with no allocation and no per-connection timer.
//
// Thread safety: none (one worker thread).
#pragma once

#include <cstdint>

namespace frs::server {

class DeadlineList;

class DeadlineNode {
 public:
  int64_t deadline_ns() const { return deadline_ns_; }
  DeadlineList* list() const { return list_; }

 private:
  friend class DeadlineList;
  DeadlineNode* prev_ = nullptr;
  DeadlineNode* next_ = nullptr;
  DeadlineList* list_ = nullptr;
  int64_t deadline_ns_ = 0;
};

class DeadlineList {
 public:
  explicit DeadlineList(int64_t timeout_ns) : timeout_ns_(timeout_ns) {}
  // A reload changed the timeout: nodes queued before keep their deadlines
  // (the list stays ordered enough: an entry due earlier behind them waits
  // at most one old timeout).
  void set_timeout(int64_t timeout_ns) { timeout_ns_ = timeout_ns; }
  DeadlineList(const DeadlineList&) = delete;
  DeadlineList& operator=(const DeadlineList&) = delete;

  // Moves `n` (from whichever list holds it) to the back, due at now + timeout.
  void Append(DeadlineNode* n, int64_t now_ns) {
    if (n->list_) n->list_->Remove(n);
    n->deadline_ns_ = now_ns + timeout_ns_;
    n->list_ = this;
    n->prev_ = tail_;
    n->next_ = nullptr;
    if (tail_) tail_->next_ = n;
    else head_ = n;
    tail_ = n;
  }
  // Moves `n` to its place for a deadline of since_ns + timeout, since_ns
  // <= now (a gRPC connection's oldest unanswered stream began then). The
  // place is sought back from the tail over at most kMaxScan nodes: past
  // them `n` waits behind nodes due later, expiring late by at most one
  // timeout, never early.
  static constexpr int kMaxScan = 64;
  void AppendSince(DeadlineNode* n, int64_t since_ns) {
    if (n->list_) n->list_->Remove(n);
    n->deadline_ns_ = since_ns + timeout_ns_;
    n->list_ = this;
    DeadlineNode* after = tail_;
    for (int i = 0; after && after->deadline_ns_ > n->deadline_ns_ && i < kMaxScan; ++i) after = after->prev_;
    n->prev_ = after;
    n->next_ = after ? after->next_ : head_;
    if (n->next_) n->next_->prev_ = n;
    else tail_ = n;
    if (after) after->next_ = n;
    else head_ = n;
  }
  int64_t timeout_ns() const { return timeout_ns_; }
  void Remove(DeadlineNode* n) {
    if (n->list_ != this) return;
    if (n->prev_) n->prev_->next_ = n->next_;
    else head_ = n->next_;
    if (n->next_) n->next_->prev_ = n->prev_;
    else tail_ = n->prev_;
    n->prev_ = n->next_ = nullptr;
    n->list_ = nullptr;
  }
  // The earliest node whose deadline has passed, or null.
  DeadlineNode* Expired(int64_t now_ns) const { return head_ && head_->deadline_ns_ <= now_ns ? head_ : nullptr; }
  // Nanoseconds until the front node is due (-1: empty).
  int64_t NextDueIn(int64_t now_ns) const {
    if (!head_) return -1;
    return head_->deadline_ns_ > now_ns ? head_->deadline_ns_ - now_ns : 0;
  }

 private:
  int64_t timeout_ns_;
  DeadlineNode* head_ = nullptr;
  DeadlineNode* tail_ = nullptr;
};

}  // namespace frs::server
