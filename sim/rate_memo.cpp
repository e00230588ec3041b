#include "sim/rate_memo.hpp"

#include <algorithm>

namespace sim {

void RateMemo::insert(std::span<const std::uint64_t> key, std::span<const double> rates) {
  if (2 * (entries_.size() + 1) > slots_.size()) {  // keep the load at most one half
    slots_.assign(std::max<std::size_t>(64, 2 * slots_.size()), 0);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      const std::size_t mask = slots_.size() - 1;
      std::size_t j = e.hash & mask;
      while (slots_[j] != 0) j = (j + 1) & mask;
      slots_[j] = static_cast<std::uint32_t>(i + 1);
    }
  }
  const std::uint64_t h = hash(key);
  const std::size_t at = slot(h, key);
  if (slots_[at] != 0) return;  // already known
  entries_.push_back({h, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(key.size()),
                      static_cast<std::uint32_t>(rates_.size())});
  keys_.insert(keys_.end(), key.begin(), key.end());
  rates_.insert(rates_.end(), rates.begin(), rates.end());
  slots_[at] = static_cast<std::uint32_t>(entries_.size());
}

}  // namespace sim
