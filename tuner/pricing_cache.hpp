// defines: tuner::PricingCache (a CostModel that prices each distinct GEMM and attention shape once
//          for a whole search, in front of another CostModel)
#pragma once
#include <array>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "hardware/cost_model.hpp"

namespace tuner {

/// @brief The cost model a search prices through: GEMM and attention prices are kept per distinct
/// shape for the whole search (the class bounds, the screening simulations and the whole ones ask
/// for the same few thousand shapes hundreds of thousands of times); everything else goes to `base`
/// as it is. The same answers as `base` (it is a pure function of the op). Thread-safe: one reader-writer lock
/// per shard.
class PricingCache final : public hardware::CostModel {
 public:
  explicit PricingCache(const hardware::CostModel& base) : base_(base) {}
  hardware::ComputeCost gemm(const hardware::GemmOp& op) const override;
  hardware::ComputeCost attention(const hardware::AttentionOp& op) const override;
  hardware::ComputeCost elementwise(const hardware::ElementwiseOp& op) const override { return base_.elementwise(op); }
  hardware::ComputeCost optimizer(const hardware::OptimizerOp& op) const override { return base_.optimizer(op); }
  hardware::CollectiveCost collective(const hardware::CollectiveOp& op) const override { return base_.collective(op); }
  const hardware::ClusterSpec& cluster() const override { return base_.cluster(); }
  hardware::Stack stack() const override { return base_.stack(); }
  std::string describe() const override { return base_.describe(); }
  std::vector<hardware::LinkSpec> links() const override { return base_.links(); }
  /// Its prices are base's, which a search takes to be a pure function of the op (as it caches them).
  std::uint64_t pricing_id() const override { return id_; }
  /// The cost model it caches.
  const hardware::CostModel& base() const { return base_; }

 private:
  using GemmKey = std::array<std::int64_t, 5>;
  using AttentionKey = std::array<std::int64_t, 11>;
  struct KeyHash {
    template <std::size_t N>
    std::size_t operator()(const std::array<std::int64_t, N>& k) const {
      std::size_t h = 1469598103934665603ull;
      for (std::int64_t v : k) h = (h ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
      return h;
    }
  };
  static constexpr std::size_t kShards = 16;
  template <class Key>
  struct Shard {
    std::shared_mutex mu;  // lookups shared, inserts exclusive
    std::unordered_map<Key, hardware::ComputeCost, KeyHash> prices;
  };
  const hardware::CostModel& base_;
  const std::uint64_t id_ = next_pricing_id();
  mutable std::array<Shard<GemmKey>, kShards> gemm_;
  mutable std::array<Shard<AttentionKey>, kShards> attention_;
};

}  // namespace tuner
