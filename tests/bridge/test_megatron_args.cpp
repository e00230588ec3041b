// Megatron-LM arguments in and out: export + import gives back the same plan (issue 16, "done when").
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>

#include "bridge/export.hpp"
#include "bridge/megatron_args.hpp"
#include "bridge/strategy_support.hpp"
#include "cli_run.hpp"
#include "common/config_reader.hpp"
#include "sim/plan.hpp"
#include "sim/strategy.hpp"

namespace {

sim::Target import_target(const std::string& script, const std::string& model = "", const std::string& cluster = "dgx-h100") {
  const auto imp = bridge::parse_megatron_args(script, "export");
  sim::TargetInput in;
  in.model = model;
  in.cluster = cluster;
  return bridge::resolve_imported(imp, in);
}

}  // namespace

namespace {

void check_same_model(const sim::ModelSpec& back, const sim::ModelSpec& m) {
  CHECK(back.layers == m.layers);
  CHECK(back.hidden == m.hidden);
  CHECK(back.heads == m.heads);
  CHECK(back.kv_heads == m.kv_heads);
  CHECK(back.ffn_hidden == m.ffn_hidden);
  CHECK(back.vocab == m.vocab);
  CHECK(back.norm == m.norm);
  CHECK(back.activation == m.activation);
  CHECK(back.position == m.position);
  CHECK(back.tied_embeddings == m.tied_embeddings);
}

}  // namespace

TEST_CASE("every plan field survives export to Megatron-LM arguments and import back, under every registered strategy") {
  const sim::ModelSpec llama = sim::load_model("meta-llama-3-8b/config.json");
  const hardware::ClusterSpec one = hardware::load_cluster("dgx-h100");
  hardware::ClusterSpec two = one;
  two.nodes = 2;
  int checked = 0, refused = 0;
  // the fields of sim::Plan outside the strategies' knobs: tp, dp, micro_batch, global_batch, seq_len, dtype,
  // sequence_parallel, dp_bucket_mb, stack (pp is 1: check_plan refuses more); each strategy at its knobs' defaults
  for (const hardware::ClusterSpec* cluster : {&one, static_cast<const hardware::ClusterSpec*>(&two)})
    for (int tp : {1, 2, 8})
      for (bool sp : {false, true})
        for (const sim::Strategy* strategy : sim::strategies())
          for (auto dtype : {common::DType::bf16, common::DType::fp8, common::DType::fp32})
            for (auto stack : {hardware::Stack::eager, hardware::Stack::cpp, hardware::Stack::cuda_graphs}) {
              sim::PlanInput in{.tp = tp, .micro_batch = 4, .global_batch = 4 * (cluster->total_gpus() / tp) * 2, .seq_len = 2048, .dtype = dtype,
                                .sequence_parallel = sp && tp > 1, .strategy = strategy, .dp_bucket_mb = tp == 2 ? 0.1234567 : tp == 8 ? 100.0 : 25.0,
                                .stack = stack};
              sim::Plan plan;
              try {
                plan = sim::resolve_plan(llama, *cluster, in);
              } catch (const common::ConfigError& e) {
                // none, domino and the toy run every one of these plans; a strategy registered later may refuse some
                const bool known = strategy == &sim::strategy_none() || strategy == &sim::strategy_domino() || strategy->name == "chunked";
                CHECK_MESSAGE(!known, strategy->name << " refused a plan: " << e.what());
                ++refused;
                continue;
              }
              const std::string script = bridge::export_plan(bridge::Framework::megatron, {.model = llama, .cluster = *cluster, .plan = plan});
              const sim::Target back = import_target(script);
              INFO(script);
              CHECK(back.plan == plan);
              CHECK(back.cluster.nodes == cluster->nodes);
              check_same_model(back.model, llama);
              ++checked;
            }
  CHECK(checked + refused == 2 * 3 * 2 * static_cast<int>(sim::strategies().size()) * 3 * 3);  // clusters x tp x sp x strategies x dtypes x stacks
  CHECK(checked >= 2 * 3 * 2 * 3 * 3 * 3);  // at least every plan of none, domino and the toy round-tripped
}

TEST_CASE("every value of every registered strategy's knobs survives export to Megatron-LM and DeepSpeed-Domino and import back") {
  // Read from the registry: a strategy or knob added later is covered without editing this test. Each knob is tried
  // at its range ends, neutral and default values, every searched value and every choice; values that slicetune's
  // own check refuses for this base plan are skipped, and each knob must round-trip at least two values.
  const sim::ModelSpec llama = sim::load_model("meta-llama-3-8b/config.json");  // hidden 4096 = 2^12: divisible by every column count <= 64
  const hardware::ClusterSpec c = hardware::load_cluster("dgx-h100");
  int knobs = 0;
  for (const sim::Strategy* s : sim::strategies())
    for (const sim::Knob& k : s->knobs) {
      std::set<int> values{k.min, k.max, k.neutral, k.default_value};
      values.insert(k.searched.begin(), k.searched.end());
      for (int i = 0; i < static_cast<int>(k.choices.size()); ++i) values.insert(i);
      int round_tripped = 0;
      for (int v : values) {
        // with sequence parallelism: te-pipelined and async-tp refuse plans without it
        sim::PlanInput in{.tp = 8, .micro_batch = 64, .seq_len = 2048, .sequence_parallel = true, .strategy = s};
        k.set_input(in, v);
        sim::Plan plan;
        try {
          plan = sim::resolve_plan(llama, c, in);
        } catch (const common::ConfigError&) {
          continue;  // e.g. more row slices than sequences
        }
        REQUIRE(k.get(plan) == v);
        for (auto f : {bridge::Framework::megatron, bridge::Framework::deepspeed_domino}) {
          const std::string script = bridge::export_plan(f, {.model = llama, .cluster = c, .plan = plan});
          INFO(s->name << " " << k.key << " = " << k.format(v) << " via " << bridge::to_string(f) << ":\n" << script);
          const auto imp = bridge::parse_megatron_args(script, "export");
          // a script that names no strategy runs the default one (none)
          CHECK(imp.plan.strategy.value_or(&sim::default_strategy()) == s);
          // a knob at the framework's own default (KnobSupport::quiet_at_fixed: tp_channels 0, NCCL's
          // choice) is not carried: unset means that value
          const auto got = k.get_input(imp.plan);
          const bridge::FrameworkSupport* fs = bridge::find_support(*s, f);
          const bridge::KnobSupport* ks = nullptr;
          if (fs)
            for (const auto& x : fs->knobs)
              if (x.key == k.key) ks = &x;
          const bool quiet = ks && ks->quiet_at_fixed && ks->fixed == v;
          CHECK((got ? *got == v : quiet));
          if (f == bridge::Framework::megatron) CHECK(import_target(script).plan == plan);
        }
        ++round_tripped;
      }
      CHECK_MESSAGE(round_tripped >= 2, s->name << "'s " << k.key << " round-tripped " << round_tripped << " value(s)");
      ++knobs;
    }
  // at least domino's row_slices, row_axis, col_slices, and the bridge tests' toy strategy's col_slices (strategy_chunked.cpp);
  // a strategy registered later adds its own
  CHECK(knobs >= 4);
}

TEST_CASE("a GPT-3 plan with fp16 and a tied, learned-position model round-trips too") {
  const sim::ModelSpec gpt = sim::load_model("gpt3-13b");
  const hardware::ClusterSpec c = hardware::load_cluster("dgx-a100");
  const sim::Plan plan = sim::resolve_plan(gpt, c, {.tp = 8, .micro_batch = 16, .row_slices = 2, .seq_len = 1024, .dtype = common::DType::fp16, .strategy = &sim::strategy_domino()});
  const std::string script = bridge::export_plan(bridge::Framework::megatron, {.model = gpt, .cluster = c, .plan = plan});
  const sim::Target back = import_target(script, "", "dgx-a100");
  CHECK(back.plan == plan);
  CHECK(back.model.tied_embeddings);
  CHECK(back.model.position == sim::Position::learned);
  CHECK(back.model.seq_len == 2048);  // --max-position-embeddings: the model's 2048 positions (>= seq 1024)
}

TEST_CASE("slicetune tune --model meta-llama-3-8b/config.json --export megatron prints the tuned plan as arguments") {
  const CliRun json = run_cli("tune --model meta-llama-3-8b/config.json --cluster dgx-h100 --json");
  REQUIRE(json.rc == 0);
  const auto j = nlohmann::json::parse(json.out);
  const sim::ModelSpec llama = sim::load_model("meta-llama-3-8b/config.json");
  const sim::Plan best = sim::resolve_plan(llama, hardware::load_cluster("dgx-h100"),
                                           sim::parse_plan_input(j.at("best_plan_yaml").get<std::string>(), "best_plan_yaml"));
  const CliRun exp = run_cli("tune --model meta-llama-3-8b/config.json --cluster dgx-h100 --export megatron");
  REQUIRE(exp.rc == 0);
  CHECK(exp.out.find("torchrun --nproc-per-node 8 --nnodes 1 pretrain_gpt.py") != std::string::npos);
  if (best.tp > 1) CHECK(exp.out.find("export CUDA_DEVICE_MAX_CONNECTIONS=1") != std::string::npos);
  // Megatron-LM's distributed optimizer is ZeRO-1; a tuned ZeRO-2/3 plan is exported with a
  // "Not expressible" note and reads back as plain data parallelism
  sim::Plan expressible = best;
  if (best.zero >= 2) {
    CHECK(exp.out.find(fmt::format("# Not expressible in Megatron-LM's distributed optimizer: ZeRO-{}", best.zero)) != std::string::npos);
    expressible.zero = 0;
  }
  const sim::Target back = import_target(exp.out);
  CHECK(back.plan == expressible);
  CHECK(back.model.params(back.model.seq_len) == llama.params(llama.seq_len));
  // and the CLI reads its own export back: slicetune import --megatron-args-file
  const auto path = std::filesystem::temp_directory_path() / ("slicetune-llama-export-" + std::to_string(::getpid()) + ".sh");
  std::ofstream(path) << exp.out;
  const CliRun imp = run_cli("import --megatron-args-file '" + path.string() + "' --json");
  std::filesystem::remove(path);
  REQUIRE(imp.rc == 0);
  const auto ij = nlohmann::json::parse(imp.out);
  CHECK(ij.at("plan").at("tp") == best.tp);
  CHECK(ij.at("arguments").at("unknown").empty());
}

TEST_CASE("Megatron-LM flags slicetune cannot model are listed as such, unknown ones as unknown, none dropped") {
  const auto imp = bridge::parse_megatron_args(
      "torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 "
      "--micro-batch-size 1 --global-batch-size 64 --recompute-granularity full --recompute-method uniform --use-distributed-optimizer "
      "--overlap-grad-reduce --overlap-param-gather --lr 3e-4 --frobnicate 7 --bf16",
      "args");
  CHECK(imp.plan.tp == 8);
  CHECK(imp.pp == 2);
  CHECK(imp.plan.pp == 2);
  CHECK(imp.world_size == 16);
  CHECK(imp.plan.dp == 1);  // 16 GPUs / (tp 8 x pp 2)
  auto names = [](const std::vector<bridge::ImportedFlag>& v) {
    std::string s;
    for (const auto& f : v) s += f.name + " ";
    return s;
  };
  const std::string nm = names(imp.not_modelled);
  // the memory savers are modelled (issue 12): full recompute, uniform; the distributed optimizer is ZeRO-1
  const std::string md = names(imp.modelled);
  for (const char* f : {"--recompute-granularity", "--recompute-method", "--use-distributed-optimizer", "--overlap-param-gather"})
    CHECK_MESSAGE(md.find(f) != std::string::npos, f << " not listed as modelled: " << md);
  CHECK(imp.plan.recompute == sim::Recompute::full);
  CHECK(imp.plan.recompute_method == sim::RecomputeMethod::uniform);
  CHECK(imp.plan.zero == 1);
  CHECK(imp.plan.overlap_param_gather == true);
  CHECK(names(imp.unknown) == "--frobnicate ");
  CHECK(names(imp.ignored).find("--lr") != std::string::npos);
  CHECK(names(imp.modelled).find("--pipeline-model-parallel-size") != std::string::npos);
  // pp 2 resolves to a pipelined plan: Megatron-LM's 1F1B with blocking transfers (no --overlap-p2p-communication)
  sim::TargetInput in;
  in.model = "gpt3-13b";
  in.cluster = "dgx-h100";
  const auto t = bridge::resolve_imported(imp, in);
  CHECK(t.plan.pp == 2);
  CHECK(t.plan.vp == 1);
  CHECK(t.plan.schedule == sim::PipelineSchedule::one_f_one_b);
  CHECK_FALSE(t.plan.p2p_overlap);
  CHECK(t.cluster.nodes == 2);
}

TEST_CASE("Megatron-LM's interleaved pipeline flags import as vp, and an export of a pipelined plan reads back to the same plan") {
  // --num-layers-per-virtual-pipeline-stage 5 with 40 layers and pp 4: vp = 40 / (4 x 5) = 2
  // (Megatron-LM's arguments.py derives virtual_pipeline_model_parallel_size the same way).
  sim::TargetInput in;
  in.model = "gpt3-13b";
  in.cluster = "dgx-h100";
  in.nodes = 2;
  auto imp = bridge::parse_megatron_args(
      "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 5 --overlap-p2p-communication "
      "--micro-batch-size 1 --global-batch-size 16 --bf16",
      "args");
  auto t = bridge::resolve_imported(imp, in);
  CHECK(t.plan.pp == 4);
  CHECK(t.plan.vp == 2);
  CHECK(t.plan.schedule == sim::PipelineSchedule::interleaved);
  CHECK(t.plan.p2p_overlap);
  // 40 layers over pp 4 x 3 per virtual stage does not divide: the flag is named
  imp = bridge::parse_megatron_args("--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 3", "args");
  CHECK_THROWS_WITH_AS(bridge::resolve_imported(imp, in),
                       "args: --num-layers-per-virtual-pipeline-stage: 40 layers are not divisible by pp x 3 = 4 x 3", common::ConfigError);
  // export -> import round trip of pipelined plans (1F1B blocking, interleaved overlapped)
  for (const char* yaml : {"tp: 4\npp: 4\nmicro_batch: 1\nglobal_batch: 16\n", "tp: 2\npp: 4\nvp: 2\nmicro_batch: 1\nglobal_batch: 32\n"}) {
    CAPTURE(yaml);
    sim::TargetInput pin = in;
    pin.flags = sim::parse_plan_input(yaml, "test");
    const auto orig = sim::resolve_target(pin);
    const std::string script = bridge::export_plan(bridge::Framework::megatron, {.model = orig.model, .cluster = orig.cluster, .plan = orig.plan, .headline = "test"});
    const auto back = bridge::resolve_imported(bridge::parse_megatron_args(script, "launch.sh"), in);
    CHECK(back.plan.pp == orig.plan.pp);
    CHECK(back.plan.vp == orig.plan.vp);
    CHECK(back.plan.schedule == orig.plan.schedule);
    CHECK(back.plan.p2p_overlap == orig.plan.p2p_overlap);
    CHECK(back.plan.dp == orig.plan.dp);
    CHECK(back.plan.global_batch == orig.plan.global_batch);
  }
}

TEST_CASE("Megatron-LM defaults apply where a flag is absent, and bad values name the flag") {
  // no --bf16 / --fp16: Megatron-LM trains in fp32; shape flags without --swiglu / --normalization: GeLU, LayerNorm, tied
  const auto imp = bridge::parse_megatron_args("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 256 --seq-length 32", "a");
  CHECK(imp.plan.dtype == common::DType::fp32);
  CHECK(imp.model.activation == sim::Activation::gelu);
  CHECK(imp.model.norm == sim::Norm::layernorm);
  CHECK(imp.model.tied_embeddings == true);
  CHECK(imp.model.ffn_hidden == 256);  // 4 x hidden
  CHECK_THROWS_WITH_AS(bridge::parse_megatron_args("--tensor-model-parallel-size eight", "a"),
                       "a: --tensor-model-parallel-size: expected an integer >= 1 below 2^31, got 'eight'", common::ConfigError);
  CHECK_THROWS_WITH_AS(bridge::parse_megatron_args("--bf16 --fp16", "a"), "a: --bf16: --bf16 and --fp16 are both given (Megatron-LM refuses the pair)",
                       common::ConfigError);
  CHECK_THROWS_WITH_AS(bridge::parse_megatron_args("--seq-length '1024", "a"), "a: line 1: unclosed ' quote", common::ConfigError);
}

TEST_CASE("simulate --megatron-args takes the plan in Megatron-LM's names; the Domino and NeMo exports say what they cannot express") {
  const CliRun r = run_cli("simulate --model gpt3-13b --megatron-args \"--tensor-model-parallel-size 8 --micro-batch-size 16 --seq-length 1024 "
                           "--bf16 --sequence-parallel\" --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("plan").at("tp") == 8);
  CHECK(j.at("plan").at("micro_batch") == 16);
  CHECK(j.at("plan").at("sequence_parallel") == true);
  const CliRun d = run_cli("simulate --model llama2-7b --tp 8 --micro-batch 4 --sequence-parallel --strategy domino --row-slices 4 --export deepspeed-domino");
  REQUIRE(d.rc == 0);
  CHECK(d.out.find("deepspeed --num_gpus 8 --num_nodes 1 pretrain_llama.py") != std::string::npos);
  CHECK(d.out.find("# Not expressible in DeepSpeed-Domino: row_slices 4") != std::string::npos);
  CHECK(d.out.find("# Not expressible in DeepSpeed-Domino: sequence parallelism") != std::string::npos);
  const CliRun n = run_cli("simulate --model llama2-7b --tp 8 --micro-batch 4 --strategy domino --export nemo");
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("model.tensor_model_parallel_size=8") != std::string::npos);
  CHECK(n.out.find("# Not expressible in NeMo: strategy domino (domino 2x1): NeMo runs each layer unsliced") != std::string::npos);
  CHECK(run_cli("simulate --export mxnet").rc == 2);
}
