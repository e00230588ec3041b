// One validation layer for numbers read from YAML, JSON and flags: finite, in range, integer width
// checked before narrowing, duplicate and non-string keys refused, the file / key / flag named.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "bridge/deepspeed_config.hpp"
#include "common/config_reader.hpp"
#include "common/embedded_configs.hpp"
#include "common/limits.hpp"
#include "hardware/cluster.hpp"
#include "hardware/profile.hpp"
#include "sim/hf_config.hpp"
#include "sim/model.hpp"
#include "sim/plan.hpp"
#include "tests/hardening/process.hpp"
#include "validate/calibration.hpp"
#include "validate/compare.hpp"
#include "validate/measured_trace.hpp"

using namespace hardening;

namespace {

/// Every leaf of `n` whose value reads as a number, as a key path.
void numeric_leaves(const common::YamlNode& n, const std::vector<std::string>& path, std::vector<std::vector<std::string>>& out) {
  for (const auto& [k, v] : n.entries()) {
    auto p = path;
    p.push_back(k.scalar());
    if (v.is_map()) {
      numeric_leaves(v, p, out);
    } else if (v.is_scalar()) {
      char* end = nullptr;
      std::strtod(v.scalar().c_str(), &end);
      if (end != v.scalar().c_str() && *end == '\0') out.push_back(p);
    }
  }
}

/// `root` with the leaf at `path` set to `value`, as YAML text.
std::string with_leaf(const common::YamlNode& root, const std::vector<std::string>& path, const std::string& value) {
  common::YamlNode copy = root.deep_copy();
  common::YamlNode n = copy;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) n = n[path[i]];
  n.set(path.back(), value);
  return common::emit_yaml_mapping(copy, "test");
}

std::string join(const std::vector<std::string>& p) {
  std::string s;
  for (const auto& k : p) s += (s.empty() ? "" : ".") + k;
  return s;
}

const std::string kTinyModel =
    "name: t\nlayers: 2\nhidden: 64\nheads: 4\nffn_hidden: 256\nvocab: 256\nseq_len: 32\nnorm: layernorm\nactivation: gelu\n"
    "position: learned\ntied_embeddings: true\n";

}  // namespace

TEST_CASE("every number in a cluster file: NaN, infinity, negative and huge values are refused, naming the key") {
  // dgx-h100.yaml has 43 numeric keys (gpu 15 with fused_rs_pull_gb_per_s, node 3, network 5 with nic_efficiency, host 12: launch_us,
  // op_overhead_us and gemm_efficiency of each of the 4 stacks, interference 3: hbm_amplification, sm_comm_slowdown and
  // copy_engine_bandwidth (comm_slowdown went with the fidelity work), nccl 3, memory 2: fragmentation_reserve and cuda_context_gb); each must
  // refuse .nan, .inf, -1 and 1e300 (every key is a rate,
  // count, time or fraction with a finite range: common/limits.hpp). Before: 16 keys took NaN and
  // kernel_latency_us took anything.
  const common::YamlNode root = common::parse_yaml(common::resolve_config("clusters", "dgx-h100").text, "dgx-h100");
  std::vector<std::vector<std::string>> leaves;
  numeric_leaves(root, {}, leaves);
  CHECK(leaves.size() == 43);
  for (const auto& leaf : leaves)
    for (const char* bad : {".nan", ".inf", "-.inf", "-1", "1e300"}) {
      const std::string key = join(leaf);
      CAPTURE(key);
      CAPTURE(bad);
      const std::string err = error_of([&] { hardware::parse_cluster(with_leaf(root, leaf, bad), "c.yaml"); });
      CHECK(err.rfind("c.yaml: " + key + ":", 0) == 0);
    }
  // and the file as it is still loads
  CHECK(error_of([&] { hardware::parse_cluster(common::emit_yaml_mapping(root, "test"), "c.yaml"); }).empty());
}

TEST_CASE("integers wider than the field are refused at load, not truncated") {
  // 4294967297 = 2^32 + 1 became 1 layer through static_cast<int>; 4294967304 = 2^32 + 8 became tp 8
  CHECK(error_of([] {
          std::string m = kTinyModel;
          m.replace(m.find("layers: 2"), 9, "layers: 4294967297");
          sim::parse_model(m, "m.yaml");
        }) == "m.yaml: layers: expected an integer in [1, 4096], got 4294967297");
  CHECK(error_of([] { sim::parse_plan_input("tp: 4294967304\n", "p.yaml"); }) == "p.yaml: tp: expected an integer in [1, 1048576], got 4294967304");
  CHECK(error_of([] { sim::parse_plan_input("tp: 99999999999999999999\n", "p.yaml"); }).rfind("p.yaml: tp: expected an integer", 0) == 0);
  CHECK(error_of([] { sim::parse_plan_input("dp_bucket_mb: .inf\n", "p.yaml"); }) == "p.yaml: dp_bucket_mb: expected a finite number, got '.inf'");
  CHECK(error_of([] { sim::parse_plan_input("seq_len: 1000000000\n", "p.yaml"); }) ==
        "p.yaml: seq_len: expected an integer in [1, 4194304], got 1000000000");
  // the memory savers' keys: 2^32 + 1 must not become recompute_layers 1 or ZeRO stage 1
  CHECK(error_of([] { sim::parse_plan_input("recompute_layers: 4294967297\n", "p.yaml"); }) ==
        "p.yaml: recompute_layers: expected an integer in [1, 4096], got 4294967297");
  CHECK(error_of([] { sim::parse_plan_input("zero: 4294967297\n", "p.yaml"); }) == "p.yaml: zero: expected an integer in [0, 3], got 4294967297");
  CHECK(error_of([] { sim::parse_plan_input("zero: -1\n", "p.yaml"); }) == "p.yaml: zero: expected an integer in [0, 3], got -1");
  CHECK(error_of([] { sim::parse_plan_input("zero: 1.5\n", "p.yaml"); }).rfind("p.yaml: zero: expected an integer", 0) == 0);
  CHECK(error_of([] { sim::parse_plan_input("recompute: full\nzero: 1\nzero: 2\n", "p.yaml"); }) == "p.yaml: zero: duplicate key (line 3, column 1)");
  CHECK(error_of([] { sim::parse_plan_input("overlap_grad_reduce: 2\n", "p.yaml"); }).rfind("p.yaml: overlap_grad_reduce:", 0) == 0);
  // and they still read where they are right
  const sim::PlanInput in = sim::parse_plan_input("recompute: full\nrecompute_layers: 4096\nzero: 3\n", "p.yaml");
  CHECK(in.recompute_layers.value_or(0) == 4096);
  CHECK(in.zero.value_or(0) == 3);
}

TEST_CASE("duplicate keys, keys that are not names and alias bombs are refused, naming the file") {
  // a YAML parser keeps the first (yaml-cpp) or the last of two equal keys silently; the second must be an error
  CHECK(error_of([] { sim::parse_plan_input("tp: 8\ntp: 2\n", "p.yaml"); }) == "p.yaml: tp: duplicate key (line 2, column 1)");
  CHECK(error_of([] { sim::parse_plan_input("tp: 8\nnested: {a: 1, a: 2}\n", "p.yaml"); }) ==
        "p.yaml: nested.a: duplicate key (line 2, column 16)");
  // a mapping as a key: yaml-cpp's own message was "bad conversion" without the file (when it parsed the configs)
  CHECK(error_of([] { sim::parse_plan_input("{a: 1}: 2\n", "p.yaml"); }) ==
        "p.yaml: a key (line 1, column 1) is not a plain name (a mapping used as a key)");
  CHECK(error_of([] { sim::parse_plan_input("[1, 2]: 2\n", "p.yaml"); }).rfind("p.yaml: a key", 0) == 0);
  // 9 levels of 10 aliases expand to 10^9 nodes: refused after limits::kMaxYamlNodes
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += fmt::format("a{}: &a{} [", i, i);
    for (int k = 0; k < 10; ++k) bomb += fmt::format("{}*a{}", k ? ", " : "", i - 1);
    bomb += "]\n";
  }
  CHECK(error_of([&] { common::parse_yaml(bomb, "bomb.yaml"); }).find("more than 1000000 YAML nodes") != std::string::npos);
}

TEST_CASE("profile files: version 2^32 + 1 is not version 1; infinite and NaN times are refused") {
  const std::string good = common::resolve_config("profiles", "cpu-epyc-2x").text;
  CHECK(error_of([&] { hardware::parse_profile(good, "p.yaml"); }).empty());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  CHECK(error_of([&] { hardware::parse_profile(replaced("version: 1", "version: 4294967297"), "p.yaml"); })
            .rfind("p.yaml: version: profile format version 4294967297", 0) == 0);
  // the first GEMM row's time
  const auto us = good.find("us: ", good.find("points:"));
  const auto us_end = good.find('}', us);
  for (const char* bad : {".inf", ".nan", "-3", "0"}) {
    std::string t = good;
    t.replace(us + 4, us_end - us - 4, bad);
    CAPTURE(bad);
    CHECK(error_of([&] { hardware::parse_profile(t, "p.yaml"); }).rfind("p.yaml: gemm.points[0].us:", 0) == 0);
  }
}

TEST_CASE("a cluster inside a profile round-trips keys and values that need quoting") {
  // cluster_from_node writes the profile's cluster mapping as YAML and reads it back; a value with
  // a quote, a colon or a newline, and one that reads "null", must come back as the same string
  common::YamlNode n = common::parse_yaml(common::resolve_config("clusters", "dgx-h100").text, "dgx-h100");
  n["gpu"].set("name", "H100 \"special\": edition\nline two");
  n.set("name", "null");
  const auto c = hardware::cluster_from_node(n, "profile: cluster");
  CHECK(c.gpu.name == "H100 \"special\": edition\nline two");
  CHECK(c.name == "null");
  // lists of names (a stack's fused ops: dgx-h100.yaml's megatron-core fuses gelu, not layernorm) come back too
  CHECK(c.host.stack(hardware::Stack::megatron_core).fuses(hardware::ElementwiseKind::gelu));
  CHECK_FALSE(c.host.stack(hardware::Stack::megatron_core).fuses(hardware::ElementwiseKind::layernorm));
  // a list where a value belongs is refused instead of read as ""; a list of lists is not written at all
  common::YamlNode bad = n.deep_copy();
  bad["gpu"].set("name", common::parse_yaml("[a, b]", "t"));
  CHECK(error_of([&] { hardware::cluster_from_node(bad, "profile: cluster"); }) == "profile: cluster: gpu.name: expected a scalar value");
  bad["gpu"].set("name", common::parse_yaml("[[a], b]", "t"));
  CHECK(error_of([&] { hardware::cluster_from_node(bad, "profile: cluster"); }) == "profile: cluster: gpu.name[0]: expected a value");
}

TEST_CASE("run JSON (validate --measured): step time 0, wrong types and wide integers are refused naming the key") {
  const std::string tasks = R"("tasks": [{"name": "a", "median_us": 5.0, "start_us": 1.0, "end_us": 6.0}])";
  auto parse = [](const std::string& text) { return error_of([&] { validate::parse_run_json(text, "run.json"); }); };
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 2, )" + tasks + "}").empty());
  // 0 ms made the error +0.0 % (a division guarded to 0)
  CHECK(parse(R"({"step_time_ms": 0, "ranks": 2, )" + tasks + "}") == "run.json: step_time_ms: expected a positive step time, got 0");
  // a string where the step time belongs was blamed on "tasks"
  CHECK(parse(R"({"step_time_ms": "fast", "ranks": 2, )" + tasks + "}") == "run.json: step_time_ms: expected a number, got string");
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 4294967298, )" + tasks + "}") ==
        "run.json: ranks: expected an integer in [1, 1048576], got 4294967298");
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 2, "ranks": 4, )" + tasks + "}") == "run.json: ranks: duplicate key");
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 2, "tasks": [{"name": "a", "median_us": 1e999}]})").rfind("run.json: ", 0) == 0);
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 2, "tasks": [{"name": "a", "median_us": 5, "start_us": 1e300, "end_us": 1e300}]})") ==
        "run.json: tasks[0].start_us: expected a number in [0, 1000000000000], got 1e+300");
  CHECK(parse(R"({"step_time_ms": 3.5, "ranks": 2, "tasks": [{"name": 7, "median_us": 5}]})") ==
        "run.json: tasks[0].name: expected a string, got number");
}

TEST_CASE("input files: only regular files up to the size limit are read") {
  Scratch s;
  CHECK(error_of([] { common::read_text_file("/dev/zero"); }) == "/dev/zero: not a regular file (a device); only regular files are read");
  CHECK(error_of([&] { common::read_text_file(s.dir.string()); }).find("not a regular file (a folder)") != std::string::npos);
  // a FIFO without a writer: opening it must not wait
  REQUIRE(::mkfifo((s / "fifo").c_str(), 0600) == 0);
  CHECK(error_of([&] { common::read_text_file(s / "fifo"); }).find("not a regular file (a FIFO)") != std::string::npos);
  // one byte over the limit (a sparse file: no disk used)
  write_text(s / "big.yaml", "");
  std::filesystem::resize_file(s / "big.yaml", common::limits::kMaxInputFileBytes + 1);
  CHECK(error_of([&] { common::read_text_file(s / "big.yaml"); }).find("more than the 64 MiB an input file may have") != std::string::npos);
}

TEST_CASE("bad flags and files through the command: one line naming the flag or file, non-zero exit, no output") {
  Scratch s;
  write_text(s / "dup.yaml", "tp: 8\ntp: 2\n");
  write_text(s / "inf.yaml", "dp_bucket_mb: .inf\n");
  write_text(s / "nonstring.yaml", "{a: 1}: 2\n");
  {
    std::string c = common::resolve_config("clusters", "dgx-h100").text;
    c.replace(c.find("memory_efficiency: 0.85"), 23, "memory_efficiency: .nan");
    write_text(s / "nan-cluster.yaml", c);
    std::string m = kTinyModel;
    m.replace(m.find("layers: 2"), 9, "layers: 4294967297");
    write_text(s / "wide-model.yaml", m);
    std::string p = common::resolve_config("profiles", "cpu-epyc-2x").text;
    p.replace(p.find("version: 1"), 10, "version: 4294967297");
    write_text(s / "wide-profile.yaml", p);
  }
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      // --nodes 268435456 printed "gpus": -2147483648; --global-batch 2^31 - 1 a negative step time;
      // --seq-len 1e9 an MFU of 605533
      {{"simulate", "--nodes", "268435456"}, "slicetune: error: --nodes: expected a number of nodes in [1, 131072], got 268435456"},
      {{"simulate", "--global-batch", "2147483647"}, "slicetune: error: --global-batch: expected an integer in [1, 16777216], got 2147483647"},
      {{"tune", "--global-batch", "2147483647"}, "slicetune: error: --global-batch: expected an integer in [1, 16777216]"},
      {{"simulate", "--seq-len", "1000000000"}, "slicetune: error: --seq-len: expected an integer in [1, 4194304], got 1000000000"},
      {{"simulate", "--tp", "4294967304"}, "slicetune: error: --tp: expected an integer in [1, 1048576], got 4294967304"},
      {{"simulate", "--zero", "4294967297"}, "slicetune: error: --zero: expected a ZeRO stage 0 | 1 | 2 | 3, got 4294967297"},
      {{"simulate", "--recompute", "full", "--recompute-layers", "4294967297"},
       "slicetune: error: --recompute-layers: expected an integer in [1, 4096], got 4294967297"},
      {{"simulate", "--dp-bucket-mb", "inf"}, "slicetune: error: --dp-bucket-mb: expected a finite number in (0, 1000000], got inf"},
      {{"simulate", "--dp-bucket-mb", "nan"}, "slicetune: error: --dp-bucket-mb: expected a finite number"},
      {{"simulate", "--plan", s / "dup.yaml"}, "dup.yaml: tp: duplicate key (line 2, column 1)"},
      {{"simulate", "--plan", s / "inf.yaml"}, "inf.yaml: dp_bucket_mb: expected a finite number, got '.inf'"},
      {{"simulate", "--plan", s / "nonstring.yaml"}, "nonstring.yaml: a key (line 1, column 1) is not a plain name"},
      // NaN in a cluster file made the step 68 ms instead of 205; 2^32 + 1 layers simulated 1 layer
      {{"simulate", "--cluster", s / "nan-cluster.yaml"}, "nan-cluster.yaml: gpu.memory_efficiency: expected a finite number, got '.nan'"},
      {{"simulate", "--model", s / "wide-model.yaml"}, "wide-model.yaml: layers: expected an integer in [1, 4096], got 4294967297"},
      {{"simulate", "--model", "tiny", "--profile", s / "wide-profile.yaml"}, "wide-profile.yaml: version: profile format version 4294967297"},
      {{"simulate", "--tp", "abc"}, "slicetune: error: Could not convert: --tp = abc"},
      // collective --nodes -2 was ignored; --max-bytes 2^62 looped forever; 10^20 said "error: stoll"
      {{"collective", "--nodes", "-2"}, "slicetune: error: --nodes: expected an integer in [1, 131072], got -2"},
      {{"collective", "--max-bytes", "4611686018427387904"}, "slicetune: error: --max-bytes: '4611686018427387904': more than the"},
      {{"collective", "--max-bytes", "99999999999999999999"}, "slicetune: error: --max-bytes: '99999999999999999999': more than the"},
      {{"collective", "--max-bytes", "2T"}, "slicetune: error: --max-bytes: '2T': more than the 1099511627776 bytes"},
      {{"collective", "--gpus", "0"}, "slicetune: error: --gpus: expected an integer in [2, 1048576], got 0"},
      // the same key swept twice labelled rows 1 and 2 but computed 4
      {{"whatif", "--sweep", "nodes=1,2", "--sweep", "nodes=4"}, "slicetune: error: --sweep: nodes: given twice"},
      {{"whatif", "--sweep", "nic_gbit_per_s=inf"}, "slicetune: error: --sweep: nic_gbit_per_s: expected a positive number up to"},
      {{"whatif", "--sweep", "latency_us=nan"}, "slicetune: error: --sweep: latency_us: expected a positive number up to"},
      {{"simulate", "--model", "/dev/zero"}, "slicetune: error: /dev/zero: not a regular file (a device)"},
      {{"tune", "--top", "0"}, "slicetune: error: --top: expected an integer in [1, 10000], got 0"},
      // 16,384 row slices built 17 M tasks (3.6 GB) without a word
      {{"simulate", "--model", "gpt3-175b", "--strategy", "domino", "--row-axis", "sequence", "--row-slices", "16384"},
       "slicetune: error: --row-slices: expected an integer in 1..64, got '16384'"},
      {{"simulate", "--model", "gpt3-175b", "--strategy", "domino", "--row-axis", "sequence", "--row-slices", "64", "--col-slices", "64"},
       "slicetune: error: flags: row_slices: 96 layers x 64 row slices x 64 column chunks make up to 1746438 tasks per rank, more than "
       "the 1000000"},
#ifdef SLICETUNE_HAVE_EXECUTOR
      {{"run", "--model", "tiny", "--lr", "inf"}, "slicetune: error: --lr: expected a finite number in (0, 1], got inf"},
      {{"run", "--model", "tiny", "--steps", "0"}, "slicetune: error: --steps: expected an integer in [1, 1000000], got 0"},
      {{"profile", "--out", s / "p.yaml", "--model", "tiny", "--tp", "0"}, "slicetune: error: --tp: expected an integer in [1, 4096], got 0"},
#endif
  };
  for (const auto& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    CAPTURE(joined);
    const auto r = slicetune(c.args, 20);
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.out.empty());
    CHECK(r.seconds < 10);  // refused at once, not after a loop or a long build
  }
  CHECK_FALSE(std::filesystem::exists(s / "p.yaml"));
}

#ifdef SLICETUNE_HAVE_EXECUTOR
TEST_CASE("validate --measured refuses a run file with a zero step time, naming the key") {
  Scratch s;
  write_text(s / "run.json", R"({"step_time_ms": 0, "ranks": 1, "tasks": []})");
  const auto r = slicetune({"validate", "--model", "tiny", "--measured", s / "run.json"}, 20);
  CHECK(r.code == 2);
  CHECK(r.err == "slicetune: error: " + (s / "run.json") + ": step_time_ms: expected a positive step time, got 0\n");
  write_text(s / "run.json", R"({"step_time_ms": [1], "ranks": 1, "tasks": []})");
  CHECK(slicetune({"validate", "--model", "tiny", "--measured", s / "run.json"}, 20).err ==
        "slicetune: error: " + (s / "run.json") + ": step_time_ms: expected a number, got array\n");
}
#endif

TEST_CASE("simulate --graph: deep nesting, a key twice and sizes beyond the limits end in one line naming the file") {
  Scratch s;
  const std::string saved = s / "g.json";
  auto r = slicetune({"simulate", "--model", "tiny", "--cluster", "cpu-host", "--tp", "2", "--dtype", "fp32", "--save-graph", saved});
  REQUIRE(r.code == 0);
  const std::string good = slurp(saved);
  auto refused = [&](const std::string& text, const std::string& expected) {
    const std::string path = s / "bad.json";
    write_text(path, text);
    const auto b = slicetune({"simulate", "--graph", path});
    CAPTURE(b.err);
    CHECK(b.code == 2);  // bad input, not a signal
    CHECK(b.out.empty());
    CHECK(b.err == "slicetune: error: " + path + ": " + expected + "\n");
  };
  // 300,000 nested arrays inside the model object: load_graph dumps it (recursively) to read it
  // as a model file; before, that overflowed the stack (SIGSEGV, exit 139)
  const auto at = good.find("\"model\": {");
  REQUIRE(at != std::string::npos);
  std::string deep = good;
  deep.insert(at + std::string("\"model\": {").size(), "\"deep\": " + std::string(300000, '[') + std::string(300000, ']') + ",");
  refused(deep, "nested deeper than 64 arrays/objects");
  // nlohmann keeps the second of two equal keys; the reader refuses it
  refused("{\"format\": \"slicetune-step-graph\", \"format\": \"x\"}", "format: duplicate key");
  // more nodes than --nodes may give (131,072, common/limits.hpp): saved_cluster allowed 2^20 before
  auto many = nlohmann::json::parse(good);
  many["nodes"] = 200000;
  refused(many.dump(), "nodes: expected an integer in 1..131072, got 200000");
}

TEST_CASE("imports (Hugging Face config, DeepSpeed config, Kineto trace): the same limits and strict JSON as slicetune's own files") {
  // a config.json with 2^31 - 1 layers passed the importer's int range and overflowed the
  // parameter count (layers x per-layer params) - the model limits now apply to every ModelSpec
  const std::string llama =
      R"({"model_type":"llama","hidden_size":4096,"num_attention_heads":32,"intermediate_size":11008,"vocab_size":32000,)"
      R"("max_position_embeddings":4096,"hidden_act":"silu","num_hidden_layers":LAYERS})";
  auto with_layers = [&](const std::string& n) { return std::string(llama).replace(llama.find("LAYERS"), 6, n); };
  CHECK(error_of([&] { sim::parse_hf_config(with_layers("2147483647"), "c.json", "m"); }) ==
        "c.json: layers: expected an integer in [1, 4096], got 2147483647");
  CHECK(error_of([&] { sim::parse_hf_config(with_layers("32"), "c.json", "m"); }).empty());
  // duplicate keys: nlohmann kept the last one silently
  CHECK(error_of([&] { sim::parse_hf_config(R"({"model_type":"llama","model_type":"gpt2"})", "c.json", "m"); }) ==
        "c.json: model_type: duplicate key");
  CHECK(error_of([] { bridge::parse_deepspeed_config(R"({"train_batch_size": 8, "train_batch_size": 16})", "ds.json"); }) ==
        "ds.json: train_batch_size: duplicate key");
  // ZeRO stage 1e300: cast to int before the check (float-cast-overflow under UBSan)
  CHECK(error_of([] { bridge::parse_deepspeed_config(R"({"zero_optimization": {"stage": 1e300}})", "ds.json"); }) ==
        "ds.json: zero_optimization.stage: expected 0, 1, 2 or 3, got 1e+300");
  // a Kineto trace nested 100,000 deep is refused before anything walks it
  const std::string deep = R"({"traceEvents": [], "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK(error_of([&] { validate::parse_kineto_trace(deep, "t.json"); }) == "t.json: nested deeper than 64 arrays/objects");
}

TEST_CASE("calibration CSV cells (collective --calibration, accuracy): NaN, infinity, fractions and huge counts are refused") {
  // The counts were static_cast<int>(double): 1e300 GPUs is undefined behaviour (UBSan float-cast-overflow),
  // 8.5 GPUs became 8, and nan / inf passed std::stod.
  Scratch s;
  write_text(s / "m.csv", "# a comment\ngpus,bytes,busbw_GBps\n8,1048576,120.5\n1e300,8,1\n8.5,8,1\n8,nan,1\n8,8,inf\n8,100000000000000000,1\n");
  const validate::Csv csv = validate::read_csv(s / "m.csv");
  REQUIRE(csv.rows.size() == 6);
  CHECK(validate::csv_int(csv, csv.rows[0], "gpus") == 8);
  CHECK(validate::csv_int64(csv, csv.rows[0], "bytes") == 1048576);
  CHECK(validate::csv_number(csv, csv.rows[0], "busbw_GBps") == 120.5);
  CHECK(error_of([&] { validate::csv_int(csv, csv.rows[1], "gpus"); }) ==
        s / "m.csv" + ": gpus: expected a whole number in [0, 2147483647], got '1e300'");
  CHECK(error_of([&] { validate::csv_int(csv, csv.rows[2], "gpus"); }).find("got '8.5'") != std::string::npos);
  CHECK(error_of([&] { validate::csv_int64(csv, csv.rows[3], "bytes"); }) == s / "m.csv" + ": bytes: 'nan' is not a finite number");
  CHECK(error_of([&] { validate::csv_number(csv, csv.rows[4], "busbw_GBps"); }) == s / "m.csv" + ": busbw_GBps: 'inf' is not a finite number");
  // 1e17: past 2^53, where a double no longer holds every whole number
  CHECK(error_of([&] { validate::csv_int64(csv, csv.rows[5], "bytes"); }).find("expected a whole number in [0,") != std::string::npos);
}
