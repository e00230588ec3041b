#include "bridge/deepspeed_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "common/config_reader.hpp"
#include "common/strict_json.hpp"

namespace bridge {

namespace {
using Json = nlohmann::json;

struct DsReader {
  const std::string& source;
  ImportedPlan& out;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { throw common::ConfigError(source, key, what); }
  int positive_int(const std::string& key, const Json& v) const {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() != std::floor(v.get<double>()) || v.get<double>() < 1 ||
        v.get<double>() > std::numeric_limits<int>::max())
      fail(key, fmt::format("expected a positive integer below 2^31, got {}", v.dump()));
    return static_cast<int>(v.get<double>());
  }
  bool enabled(const std::string& key, const Json& section) const {
    if (!section.is_object()) fail(key, fmt::format("expected an object with \"enabled\", got {}", section.dump()));
    if (!section.contains("enabled")) return false;
    const Json& e = section.at("enabled");
    if (e.is_boolean()) return e.get<bool>();
    if (e.is_string() && e.get<std::string>() == "auto") return false;
    fail(key + ".enabled", fmt::format("expected true or false, got {}", e.dump()));
  }
};

const std::set<std::string> kIgnoredTop{"optimizer", "scheduler", "steps_per_print", "wall_clock_breakdown", "gradient_clipping",
                                        "prescale_gradients", "gradient_predivide_factor", "dump_state", "tensorboard", "wandb",
                                        "csv_monitor", "flops_profiler", "comms_logger", "memory_breakdown", "seed", "checkpoint",
                                        "data_types", "zero_allow_untested_optimizer", "sparse_gradients", "amp"};
}  // namespace

ImportedPlan parse_deepspeed_config(const std::string& json_text, const std::string& source) {
  ImportedPlan out;
  out.source = source;
  DsReader r{source, out};
  Json j;
  try {
    j = common::parse_json_strict(json_text, source, "a DeepSpeed config JSON");  // duplicate keys, deep nesting refused
  } catch (const Json::exception& e) {
    throw common::ConfigError(source, "", fmt::format("not a DeepSpeed config JSON: {}", e.what()));
  }
  if (!j.is_object()) r.fail("", "expected a JSON object (a DeepSpeed config)");
  std::optional<int> train_batch, micro, accum;
  bool fp16 = false, bf16 = false;
  for (const auto& [k, v] : j.items()) {
    out.flags[k] = v.dump();
    if (k == "train_batch_size") {
      train_batch = r.positive_int(k, v);
    } else if (k == "train_micro_batch_size_per_gpu") {
      micro = r.positive_int(k, v);
      out.plan.micro_batch = *micro;
      out.modelled.push_back({k, v.dump(), "micro_batch"});
    } else if (k == "gradient_accumulation_steps") {
      accum = r.positive_int(k, v);
    } else if (k == "fp16") {
      fp16 = r.enabled(k, v);
      for (const auto& [sk, sv] : v.items())
        if (sk != "enabled") out.ignored.push_back({k + "." + sk, sv.dump(), "loss scaling does not change one step's cost"});
    } else if (k == "bf16" || k == "bfloat16") {
      bf16 = r.enabled(k, v);
    } else if (k == "zero_optimization") {
      if (!v.is_object()) r.fail(k, "expected an object");
      for (const auto& [sk, sv] : v.items()) {
        const std::string key = k + "." + sk;
        out.flags[key] = sv.dump();
        if (sk == "stage") {
          // an integer first: a cast of a huge double to int is undefined behaviour
          const int stage = sv.is_number_integer() && sv.get<std::int64_t>() >= 0 && sv.get<std::int64_t>() <= 3
                                ? static_cast<int>(sv.get<std::int64_t>())
                                : -1;
          if (stage < 0) r.fail(key, fmt::format("expected 0, 1, 2 or 3, got {}", sv.dump()));
          else {
            out.plan.zero = stage;
            out.modelled.push_back({key, sv.dump(), stage == 0 ? std::string("no ZeRO partitioning") : fmt::format("zero {}", stage)});
          }
        } else if (sk == "reduce_bucket_size") {
          if (!sv.is_number() || !(sv.get<double>() > 0) || !std::isfinite(sv.get<double>())) r.fail(key, fmt::format("expected a positive number of elements, got {}", sv.dump()));
          out.plan.dp_bucket_mb = sv.get<double>() * 4.0 / 1e6;
          out.modelled.push_back({key, sv.dump(), fmt::format("dp_bucket_mb {} (elements x 4 bytes of fp32 gradients)", *out.plan.dp_bucket_mb)});
        } else if (sk == "overlap_comm" || sk == "contiguous_gradients" || sk == "allgather_partitions" || sk == "allgather_bucket_size" ||
                   sk == "reduce_scatter" || sk == "round_robin_gradients") {
          out.ignored.push_back({key, sv.dump(), "a ZeRO detail; slicetune overlaps DP buckets with backward"});
        } else if (sk.starts_with("offload")) {
          out.not_modelled.push_back({key, sv.dump(), "CPU / NVMe offload is not modelled"});
        } else {
          out.unknown.push_back({key, sv.dump(), "not a ZeRO key slicetune knows"});
        }
      }
    } else if (k == "activation_checkpointing") {
      // DeepSpeed checkpoints what the model's code wraps in checkpoint(); Megatron-DeepSpeed wraps
      // every layer (its --checkpoint-activations): full recompute, one layer per chunk
      out.plan.recompute = sim::Recompute::full;
      out.modelled.push_back({k, v.dump(), "recompute full (every layer checkpointed, as Megatron-DeepSpeed's --checkpoint-activations)"});
    } else if (k == "pipeline") {
      out.not_modelled.push_back({k, v.dump(), "pipeline parallelism is not modelled yet"});
    } else if (k == "tensor_parallel") {
      if (!v.is_object()) r.fail(k, "expected an object");
      for (const auto& [sk, sv] : v.items()) {
        if (sk == "autotp_size" || sk == "tp_size") {
          out.plan.tp = r.positive_int(k + "." + sk, sv);
          out.modelled.push_back({k + "." + sk, sv.dump(), "tp"});
        } else {
          out.unknown.push_back({k + "." + sk, sv.dump(), "not read"});
        }
      }
    } else if (kIgnoredTop.count(k)) {
      out.ignored.push_back({k, v.dump(), "does not change one step's cost"});
    } else {
      out.unknown.push_back({k, v.dump(), "not a DeepSpeed key slicetune knows"});
    }
  }
  if (fp16 && bf16) r.fail("bf16", "fp16 and bf16 are both enabled (DeepSpeed refuses: \"bfloat16 and fp16 modes cannot be simultaneously enabled\")");
  if (fp16 || bf16) {
    out.plan.dtype = fp16 ? common::DType::fp16 : common::DType::bf16;
    out.modelled.push_back({fp16 ? "fp16.enabled" : "bf16.enabled", "true", fmt::format("dtype {}", common::to_string(*out.plan.dtype))});
  }
  // DeepSpeed's batch identity: train_batch_size = micro x accumulation x data-parallel world size
  if (train_batch) {
    out.plan.global_batch = *train_batch;
    out.modelled.push_back({"train_batch_size", std::to_string(*train_batch), "global_batch"});
    if (micro && accum) {
      if (*train_batch % (*micro * *accum) != 0)
        r.fail("train_batch_size", fmt::format("{} is not micro {} x accumulation {} x a data-parallel size (DeepSpeed asserts "
                                               "train_batch_size == micro_batch x gradient_accumulation_steps x world size)",
                                               *train_batch, *micro, *accum));
      out.plan.dp = *train_batch / (*micro * *accum);
      out.modelled.push_back({"train_batch_size / (micro x accumulation)", std::to_string(*out.plan.dp), "dp"});
    }
  } else if (micro && accum) {
    out.modelled.push_back({"gradient_accumulation_steps", std::to_string(*accum), "global_batch = micro x accumulation x dp (dp from the world size)"});
  }
  if (accum && !train_batch) out.flags["gradient_accumulation_steps"] = std::to_string(*accum);
  return out;
}

}  // namespace bridge
