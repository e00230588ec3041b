// The memory model (sim/memory.hpp) line by line against values derived by hand: parameters x
// bytes, Korthikanti et al. 2022's activation formulas per recompute mode, NCCL's buffer sizes.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>

#include "hardware/cluster.hpp"
#include "sim/memory.hpp"
#include "sim/plan.hpp"
#include "sim/recompute.hpp"
#include "sim/step_graph.hpp"
#include "sim/target.hpp"

namespace {

sim::Target gpt3_175b(const std::string& extra_yaml) {
  sim::TargetInput in;
  in.model = "gpt3-175b";
  in.cluster = "dgx-h100";
  in.nodes = 16;
  in.flags = sim::parse_plan_input("tp: 8\ndp: 16\nmicro_batch: 1\nglobal_batch: 256\nseq_len: 2048\n" + extra_yaml, "test");
  return sim::resolve_target(in);
}

}  // namespace

TEST_CASE("gpt3-175b, 16 x DGX-H100, tp 8, dp 16, ZeRO-1, full recompute, SP: every line derived by hand") {
  const auto t = gpt3_175b("zero: 1\nrecompute: full\nsequence_parallel: true\nattention: flash\n");
  const auto m = sim::estimate_memory(t.model, t.cluster, t.plan);
  // GPT-3 175B: h = 12288, L = 96, a = 96 heads, ffn 4h = 49152, V = 51200, learned positions
  // (2048 x h), tied embeddings, LayerNorm (2h per norm). One TP rank of 8 holds per layer
  // 2 x 2h norm parameters + (3h^2 + h^2 + 4h^2 + 4h^2) / 8 = 4h + 1.5 h^2 = 226,541,568; plus the
  // vocab-parallel embedding 6400 x h = 78,643,200, the positions 25,165,824 and the final norm
  // 24,576: N = 96 x 226,541,568 + 103,833,600 = 21,851,824,128 parameters.
  const double h = 12288, N = 96.0 * (4 * h + 1.5 * h * h) + 6400 * h + 2048 * h + 2 * h;
  CHECK(N == 21851824128.0);
  // Megatron-LM's mixed precision with the distributed optimizer (ZeRO-1): bf16 weights (2 B) and
  // fp32 main gradients (4 B) whole, fp32 master weights and Adam m, v (12 B) over dp = 16.
  CHECK(m.weights == doctest::Approx(2 * N));         // 43.70 GB
  CHECK(m.gathered_weights == 0);                     // ZeRO-3 only
  CHECK(m.gradients == doctest::Approx(4 * N));       // 87.41 GB
  CHECK(m.optimizer == doctest::Approx(12 * N / 16));  // 16.39 GB
  // Korthikanti et al. 2022, full recompute: each layer keeps only its input, 2 s b h / t bytes
  // with sequence parallelism (s = 2048, b = 1, t = 8): 6,291,456 B; plus the final norm's input
  // and output (the same size each): 98 x 6,291,456 = 616,562,688 B.
  const double sbh_t = 2048.0 * 1 * h / 8;
  CHECK(m.activations == doctest::Approx(98 * 2 * sbh_t));
  // While a layer's backward runs, its recomputed activations are alive: Korthikanti's
  // sequence-parallel layer, 34 s b h / t, less the two 1-byte hidden-dropout masks this model
  // does not have (no dropout): 32 s b h / t, plus flash attention's fp32 log-sum-exp per local
  // head and query, 4 x (96 / 8) x 2048; the layer input is the kept checkpoint, not recomputed.
  CHECK(m.recomputed == doctest::Approx(32 * sbh_t + 4.0 * 12 * 2048 - 2 * sbh_t));
  // The largest transient: the loss's fp32 logits and their gradient, 2 x 4 B x 2048 tokens x
  // 6400 vocabulary columns = 104,857,600 B (beats the MLP backward's 2 x 2048 x 2 x 6144 and
  // flash attention's fp32 dQ accumulator, 4 x 2048 x 1536).
  CHECK(m.temporaries == doctest::Approx(8.0 * 2048 * 6400));
  CHECK(m.dp_buckets == 0);  // ZeRO-1 reduce-scatters views of Megatron's gradient buffer
  // NCCL's defaults per channel and peer: LL 8 x 512 x 8 x 16 B + LL128 120 x 640 x 8 x 8 B +
  // Simple 4 MiB = 9,633,792 B. Channels as NCCL's logs on DGX-H100 show (hardware/nccl_topology.hpp):
  // "24 coll channels" inside a node, 16 across nodes, 16 NVLS channels. TP (8 GPUs, one node,
  // NVSwitch SHARP): a ring over 24 channels + NVLS's 16 channels x 2 x 4 MiB; DP (16 GPUs on 16
  // nodes): a ring and a tree (3 peers) over 16 channels.
  const double per_peer = 9633792.0;
  CHECK(m.nccl == doctest::Approx(24 * per_peer + 16 * 2 * 4194304.0 + 16 * per_peer * 4));  // 981,991,424 B
  CHECK(m.cuda_context == doctest::Approx(0.5e9));  // configs/clusters/dgx-h100.yaml memory.cuda_context_gb
  // 5 % of the 80 GB kept free: the plan may use 76 GB; it needs ~150 GB - ZeRO-1 at tp 8 keeps
  // 6 B per parameter whole, so it does not fit (ZeRO-2 or tp 32 would).
  CHECK(m.reserve() == doctest::Approx(4e9));
  CHECK(m.usable() == doctest::Approx(76e9));
  const double total = 2 * N + 4 * N + 12 * N / 16 + 98 * 2 * sbh_t + (30 * sbh_t + 4.0 * 12 * 2048) + 8.0 * 2048 * 6400 +
                       (24 * per_peer + 16 * per_peer * 4 + 16 * 2 * 4194304.0) + 0.5e9;
  CHECK(m.total() == doctest::Approx(total));
  CHECK_FALSE(m.fits());
  CHECK(m.over() == doctest::Approx(total - 76e9));
}

TEST_CASE("saved activations per layer follow Korthikanti et al. 2022 for each recompute mode") {
  // Korthikanti et al. 2022, Table 2 (bytes per layer, 16-bit activations, with dropout):
  //   tensor parallel:            s b h (10 + 24/t + 5 a s / (h t))
  //   + sequence parallel:        s b h / t (34 + 5 a s / h)
  //   + selective recompute:      s b h / t x 34
  //   full recompute:             2 s b h (/ t with sequence parallelism)
  // The modelled transformer has no dropout: its two 1-byte hidden-dropout masks (2 s b h) and the
  // attention-dropout mask and output (3 a s^2 b) are not kept, so 10 -> 8, 34 -> 32, 5 -> 2 (the
  // unfused kernel keeps only its softmax output, 2 a s^2 b / t); flash attention keeps the fp32
  // log-sum-exp instead (4 a s b / t). Per layer = (total - the final norm's 2 x 2 s b h) / L.
  const double s = 2048, b = 2, h = 12288, a = 96, t = 8, L = 96;
  struct Case {
    std::string yaml;
    double per_layer;
    const char* what;
  };
  const std::vector<Case> cases{
      {"attention: unfused\n", s * b * h * (8 + 24 / t) + 2 * a * s * s * b / t, "TP, unfused"},
      {"attention: flash\n", s * b * h * (8 + 24 / t) + 4 * a * s * b / t, "TP, flash"},
      {"attention: unfused\nsequence_parallel: true\n", s * b * h / t * 32 + 2 * a * s * s * b / t, "TP + SP, unfused"},
      {"attention: unfused\nsequence_parallel: true\nrecompute: selective\n", s * b * h / t * 32, "TP + SP, selective"},
      {"attention: flash\nsequence_parallel: true\nrecompute: selective\n", s * b * h / t * 32, "TP + SP, flash, selective"},
      {"attention: unfused\nrecompute: full\n", 2 * s * b * h, "TP, full"},
      {"attention: flash\nsequence_parallel: true\nrecompute: full\n", 2 * s * b * h / t, "TP + SP, full"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    sim::TargetInput in;
    in.model = "gpt3-175b";
    in.cluster = "dgx-h100";
    in.nodes = 16;
    in.flags = sim::parse_plan_input("tp: 8\ndp: 16\nmicro_batch: 2\nglobal_batch: 256\n" + c.yaml, "test");
    const auto tg = sim::resolve_target(in);
    const auto m = sim::estimate_memory(tg.model, tg.cluster, tg.plan);
    const double final_norm = 2 * (2 * s * b * h / (tg.plan.sequence_parallel ? t : 1));
    CHECK((m.activations - final_norm) / L == doctest::Approx(c.per_layer));
  }
}

TEST_CASE("ZeRO stages: what each shards (parameters x bytes / dp)") {
  // gpt3-175b at tp 8 (N = 21,851,824,128 per TP rank), dp 16, bf16: stage 0 keeps 2 + 4 + 12 B
  // per parameter; 1 shards the 12 B of optimizer state; 2 also the 4 B of gradients (and keeps
  // two full-size 25 MB gradient buckets in flight); 3 also the 2 B of weights, gathering the root
  // unit (embedding, positions, final norm: 103,833,600 parameters) and two layers
  // (2 x 226,541,568) in bf16.
  const double N = 21851824128.0, layer = 226541568.0, root = 6400.0 * 12288 + 2048.0 * 12288 + 2 * 12288;
  for (int z = 0; z <= 3; ++z) {
    CAPTURE(z);
    sim::TargetInput in;
    in.model = "gpt3-175b";
    in.cluster = "dgx-h100";
    in.nodes = 16;
    in.flags = sim::parse_plan_input(fmt::format("tp: 8\ndp: 16\nzero: {}\n", z), "test");
    const auto tg = sim::resolve_target(in);
    const auto m = sim::estimate_memory(tg.model, tg.cluster, tg.plan);
    CHECK(m.weights == doctest::Approx(2 * N / (z >= 3 ? 16 : 1)));
    CHECK(m.gathered_weights == doctest::Approx(z >= 3 ? 2 * (root + 2 * layer) : 0.0));
    CHECK(m.gradients == doctest::Approx(4 * N / (z >= 2 ? 16 : 1)));
    CHECK(m.optimizer == doctest::Approx(12 * N / (z >= 1 ? 16 : 1)));
    CHECK(m.dp_buckets == doctest::Approx(z == 2 ? 2 * 25e6 : z == 3 ? 2 * 4 * layer : 0.0));
  }
}

TEST_CASE("fp32 weights need no master copy: Adam m and v only") {
  // Megatron-LM's table of bytes per parameter: fp32 parameters and gradients, 16 B (4 + 4 + 8).
  sim::TargetInput in;
  in.model = "gpt3-2.7b";
  in.cluster = "dgx-a100";
  in.flags = sim::parse_plan_input("tp: 8\ndtype: fp32\nattention: unfused\n", "test");
  const auto tg = sim::resolve_target(in);
  const auto m = sim::estimate_memory(tg.model, tg.cluster, tg.plan);
  CHECK(m.optimizer == doctest::Approx(2 * m.gradients));
  CHECK(m.weights == doctest::Approx(m.gradients));
}

TEST_CASE("recompute_chunk_count: the count and largest chunk of recompute_chunks, without building them") {
  // The memory model reads only how many checkpointed chunks a stage has and the layers of the
  // largest; recompute_chunks builds them (the builder needs each). Both methods, every chunk size
  // 1..layers + 2 and stage sizes 0..13, against the built chunks.
  std::size_t checked = 0;
  for (auto method : {sim::RecomputeMethod::uniform, sim::RecomputeMethod::block})
    for (int layers = 0; layers <= 13; ++layers)
      for (int k = 1; k <= layers + 2; ++k)
        for (auto rc : {sim::Recompute::none, sim::Recompute::selective, sim::Recompute::full}) {
          sim::Plan p;
          p.recompute = rc;
          p.recompute_method = method;
          p.recompute_layers = k;
          const auto chunks = sim::recompute_chunks(p, layers);
          int largest = 0;
          for (const auto& c : chunks) largest = std::max(largest, c.layers());
          const auto n = sim::recompute_chunk_count(p, layers);
          CAPTURE(layers);
          CAPTURE(k);
          CHECK(n.count == static_cast<int>(chunks.size()));
          CHECK(n.largest == largest);
          ++checked;
        }
  CHECK(checked == 2 * 3 * 119);  // sum over layers 0..13 of its (layers + 2) chunk sizes = 91 + 28
}
