#include "sim/recompute.hpp"

#include <algorithm>

#include "sim/plan.hpp"

namespace sim {

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string_view to_string(RecomputeMethod m) { return m == RecomputeMethod::uniform ? "uniform" : "block"; }

bool parse_recompute(std::string_view s, Recompute& out) {
  for (auto r : {Recompute::none, Recompute::selective, Recompute::full})
    if (to_string(r) == s) {
      out = r;
      return true;
    }
  return false;
}

bool parse_recompute_method(std::string_view s, RecomputeMethod& out) {
  for (auto m : {RecomputeMethod::uniform, RecomputeMethod::block})
    if (to_string(m) == s) {
      out = m;
      return true;
    }
  return false;
}

std::vector<RecomputeChunk> recompute_chunks(const Plan& p, int layers) {
  std::vector<RecomputeChunk> out;
  if (p.recompute != Recompute::full || layers <= 0) return out;
  const int k = std::max(1, p.recompute_layers);
  if (p.recompute_method == RecomputeMethod::uniform) {
    for (int l = 0; l < layers; l += k) out.push_back({l, std::min(layers, l + k)});
  } else {
    for (int l = 0; l < std::min(k, layers); ++l) out.push_back({l, l + 1});
  }
  return out;
}

RecomputeChunks recompute_chunk_count(const Plan& p, int layers) {
  if (p.recompute != Recompute::full || layers <= 0) return {};
  const int k = std::max(1, p.recompute_layers);
  if (p.recompute_method == RecomputeMethod::uniform) return {(layers + k - 1) / k, std::min(k, layers)};
  return {std::min(k, layers), 1};
}

int recomputed_layers(const Plan& p, int layers) {
  if (p.recompute != Recompute::full) return 0;
  return p.recompute_method == RecomputeMethod::uniform ? layers : std::min(std::max(1, p.recompute_layers), layers);
}

}  // namespace sim
