#include "tuner/pricing_cache.hpp"

#include <mutex>
#include <shared_mutex>

#include "common/thread_front.hpp"

namespace tuner {

namespace {
// each thread reads the prices it asked for before from its own copy (common::ThreadFront), not
// through a shard's lock
struct GemmFront;
struct AttentionFront;

template <class Shards, class Key, class Price>
hardware::ComputeCost cached(Shards& shards, const Key& key, std::size_t hash, Price&& price) {
  auto& s = shards[hash % shards.size()];
  {
    std::shared_lock lock(s.mu);  // lookups do not exclude each other
    if (auto it = s.prices.find(key); it != s.prices.end()) return it->second;
  }
  const hardware::ComputeCost c = price();  // outside the lock: two threads may price the same shape, alike
  std::unique_lock lock(s.mu);
  s.prices.emplace(key, c);
  return c;
}
}  // namespace

hardware::ComputeCost PricingCache::gemm(const hardware::GemmOp& op) const {
  const GemmKey key{op.m, op.n, op.k, static_cast<std::int64_t>(op.dtype), op.batch};
  return common::ThreadFront<GemmKey, hardware::ComputeCost, KeyHash, GemmFront>::get(
      id_, key, [&] { return cached(gemm_, key, KeyHash{}(key), [&] { return base_.gemm(op); }); });
}

hardware::ComputeCost PricingCache::attention(const hardware::AttentionOp& op) const {
  const AttentionKey key{op.batch, op.heads,  op.kv_heads, op.s_q, op.s_kv, op.head_dim, op.q_offset, op.causal, op.backward,
                         static_cast<std::int64_t>(op.dtype), static_cast<std::int64_t>(op.kernel)};
  return common::ThreadFront<AttentionKey, hardware::ComputeCost, KeyHash, AttentionFront>::get(
      id_, key, [&] { return cached(attention_, key, KeyHash{}(key), [&] { return base_.attention(op); }); });
}

}  // namespace tuner
