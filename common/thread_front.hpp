// defines: common::ThreadFront (a thread's own copy of the entries it read from a cache its
//          threads share), common::unique_id
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace common {

/// A fresh non-zero id, unique in the process (never reused): names a cache instance for
/// ThreadFront.
inline std::uint64_t unique_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

/// @brief A thread's own copy of the entries it has read from a cache its threads share, in front
/// of it: a lookup the thread made before takes no lock and writes no shared memory. A reader lock
/// is an atomic write to the lock's cache line; two threads looking up tens of thousands of times
/// (a search's memory, bounds and prices) passed that line from core to core on every lookup
/// (docs/benchmarks.md). Answers are those of the shared cache (copies of its values), so it only
/// fronts caches whose entries never change once added.
///
/// `owner`: the shared cache's unique_id. A thread keeps the entries of its kSlots most recent
/// owners; a slot taken for another owner is emptied first (an id is never reused, so an entry is
/// never read for a cache other than its own). `Tag` separates fronts of one key and value type.
template <class Key, class Value, class Hash, class Tag>
class ThreadFront {
 public:
  static constexpr std::size_t kSlots = 4;
  /// The value of `key` in the cache `owner`: the thread's copy, or shared() (which looks it up,
  /// or computes it, in the shared cache), copied for the next lookup.
  template <class Shared>
  static Value get(std::uint64_t owner, const Key& key, Shared&& shared) {
    auto& map = slot(owner);
    if (auto it = map.find(key); it != map.end()) return it->second;
    Value v = shared();
    map.emplace(key, v);
    return v;
  }

 private:
  struct Slot {
    std::uint64_t owner = 0;
    std::unordered_map<Key, Value, Hash> map;
  };
  static std::unordered_map<Key, Value, Hash>& slot(std::uint64_t owner) {
    thread_local std::array<Slot, kSlots> slots;
    thread_local std::size_t last = 0;     // the slot found last (a thread asks one cache many times in a row)
    thread_local std::size_t victim = 0;  // the next slot to empty, round robin
    if (slots[last].owner == owner) return slots[last].map;
    for (std::size_t i = 0; i < kSlots; ++i)
      if (slots[i].owner == owner) {
        last = i;
        return slots[i].map;
      }
    last = victim;
    victim = (victim + 1) % kSlots;
    Slot& s = slots[last];
    s.owner = owner;
    s.map.clear();
    return s.map;
  }
};

}  // namespace common
