// defines: sim::RateMemo (the engine's memory of the rates its models set for each running set: a
//          flat open-addressing table, no allocation per entry)
#pragma once
#include <cstdint>
#include <algorithm>
#include <optional>
#include <span>
#include <vector>

namespace sim {

/// @brief Maps a running set (a key of 64-bit words, one per activity) to the rates of its
/// activities. Deterministic (no dependence on addresses beyond the key's own words). Not thread-safe.
class RateMemo {
 public:
  /// The rates remembered for `key`, one per word, if any.
  std::optional<std::span<const double>> find(std::span<const std::uint64_t> key) const {
    if (slots_.empty()) return std::nullopt;
    const std::uint32_t s = slots_[slot(hash(key), key)];
    if (s == 0) return std::nullopt;
    return std::span<const double>(rates_.data() + entries_[s - 1].rates_at, key.size());
  }
  void insert(std::span<const std::uint64_t> key, std::span<const double> rates);
  /// Forgets every entry and keeps the storage (a thread's simulations reuse one memo's buffers).
  void clear() {
    entries_.clear();
    keys_.clear();
    rates_.clear();
    std::fill(slots_.begin(), slots_.end(), 0u);
  }

 private:
  struct Entry {
    std::uint64_t hash;
    std::uint32_t key_at, key_words, rates_at;
  };
  static std::uint64_t hash(std::span<const std::uint64_t> key) {
    std::uint64_t h = key.size();
    for (auto w : key) h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
  }
  /// The slot holding `key`, or the empty slot where it would go.
  std::size_t slot(std::uint64_t h, std::span<const std::uint64_t> key) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint32_t s = slots_[i];
      if (s == 0) return i;
      const Entry& e = entries_[s - 1];
      if (e.hash == h && e.key_words == key.size() && std::equal(key.begin(), key.end(), keys_.begin() + e.key_at)) return i;
    }
  }

  std::vector<Entry> entries_;
  std::vector<std::uint32_t> slots_;  // entry index + 1; 0 = empty
  std::vector<std::uint64_t> keys_;
  std::vector<double> rates_;
};

}  // namespace sim
