// tuner::PricingCache: the search's one cache of GEMM and attention prices answers as the model
// behind it does, for every field of the op (a field left out of its key would hand one shape
// another's price).
#include <doctest/doctest.h>

#include <functional>
#include <vector>

#include "hardware/cost_model.hpp"
#include "tuner/pricing_cache.hpp"

TEST_CASE("the pricing cache gives the base model's price for ops that differ in any one field") {
  const auto c = hardware::load_cluster("dgx-h100");
  const auto base = hardware::make_analytic_cost_model(c, hardware::Stack::eager);
  const tuner::PricingCache cache(*base);
  const hardware::GemmOp g{.m = 4096, .n = 5120, .k = 1280, .dtype = common::DType::bf16, .batch = 1};
  std::vector<hardware::GemmOp> gemms{g};
  for (const std::function<void(hardware::GemmOp&)>& change :
       std::vector<std::function<void(hardware::GemmOp&)>>{[](auto& o) { o.m = 512; }, [](auto& o) { o.n = 640; }, [](auto& o) { o.k = 160; },
                                                            [](auto& o) { o.dtype = common::DType::fp32; }, [](auto& o) { o.batch = 8; }}) {
    hardware::GemmOp o = g;
    change(o);
    gemms.push_back(o);
  }
  for (int pass = 0; pass < 2; ++pass)  // the first prices, the second reads the cache
    for (const auto& o : gemms) {
      CHECK(cache.gemm(o).time == base->gemm(o).time);
      CHECK(cache.gemm(o).hbm_bytes == base->gemm(o).hbm_bytes);
    }
  // the six variants have six different prices (so the checks above compare distinct answers)
  for (std::size_t i = 1; i < gemms.size(); ++i) CHECK(base->gemm(gemms[i]).time != base->gemm(gemms[0]).time);

  const hardware::AttentionOp a{.batch = 2, .heads = 20, .kv_heads = 20, .s_q = 2048, .s_kv = 2048, .head_dim = 128};
  std::vector<hardware::AttentionOp> atts{a};
  for (const std::function<void(hardware::AttentionOp&)>& change : std::vector<std::function<void(hardware::AttentionOp&)>>{
           [](auto& o) { o.batch = 4; }, [](auto& o) { o.heads = 40; o.kv_heads = 40; }, [](auto& o) { o.kv_heads = 4; },
           [](auto& o) { o.s_q = 1024; o.q_offset = 1024; }, [](auto& o) { o.s_kv = 4096; o.s_q = 4096; }, [](auto& o) { o.head_dim = 64; },
           [](auto& o) { o.causal = false; }, [](auto& o) { o.backward = true; }, [](auto& o) { o.dtype = common::DType::fp32; },
           [](auto& o) { o.kernel = hardware::AttentionKernel::unfused; }}) {
    hardware::AttentionOp o = a;
    change(o);
    atts.push_back(o);
  }
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& o : atts) {
      CHECK(cache.attention(o).time == base->attention(o).time);
      CHECK(cache.attention(o).hbm_bytes == base->attention(o).hbm_bytes);
    }
  CHECK(cache.stack() == base->stack());
  CHECK(cache.describe() == base->describe());
}
