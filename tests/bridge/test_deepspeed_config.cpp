// A DeepSpeed config JSON as a plan source (issue 16: import).
#include <doctest/doctest.h>

#include "bridge/deepspeed_config.hpp"
#include "common/config_reader.hpp"

TEST_CASE("a DeepSpeed config sets micro-batch, global batch, dp, dtype, the ZeRO stage and recompute") {
  const auto imp = bridge::parse_deepspeed_config(R"({
    "train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 1, "reduce_bucket_size": 5e7, "overlap_comm": true},
    "activation_checkpointing": {"partition_activations": true}, "gradient_clipping": 1.0, "steps_per_print": 10,
    "optimizer": {"type": "AdamW"}, "flux_capacitor": true})",
                                                  "ds.json");
  CHECK(imp.plan.micro_batch == 4);
  CHECK(imp.plan.global_batch == 64);
  CHECK(imp.plan.dp == 8);  // 64 / (4 x 2): DeepSpeed's train_batch_size = micro x accumulation x dp
  CHECK(imp.plan.dtype == common::DType::bf16);
  CHECK(imp.plan.dp_bucket_mb == doctest::Approx(200.0));  // 5e7 fp32 gradients x 4 bytes
  // ZeRO stage 1 and activation checkpointing (every layer, as Megatron-DeepSpeed wraps them) are modelled
  CHECK(imp.plan.zero == 1);
  CHECK(imp.plan.recompute == sim::Recompute::full);
  CHECK(imp.not_modelled.empty());
  REQUIRE(imp.unknown.size() == 1);
  CHECK(imp.unknown[0].name == "flux_capacitor");
}

TEST_CASE("DeepSpeed's own refusals are said with the key") {
  CHECK_THROWS_WITH_AS(bridge::parse_deepspeed_config(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})", "ds.json"),
                       "ds.json: bf16: fp16 and bf16 are both enabled (DeepSpeed refuses: \"bfloat16 and fp16 modes cannot be simultaneously enabled\")",
                       common::ConfigError);
  CHECK_THROWS_WITH_AS(bridge::parse_deepspeed_config(R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1})", "ds.json"),
                       "ds.json: train_batch_size: 10 is not micro 4 x accumulation 1 x a data-parallel size (DeepSpeed asserts "
                       "train_batch_size == micro_batch x gradient_accumulation_steps x world size)",
                       common::ConfigError);
  CHECK_THROWS_WITH_AS(bridge::parse_deepspeed_config(R"({"train_micro_batch_size_per_gpu": -2})", "ds.json"),
                       "ds.json: train_micro_batch_size_per_gpu: expected a positive integer below 2^31, got -2", common::ConfigError);
}
