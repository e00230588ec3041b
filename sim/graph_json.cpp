#include "sim/graph_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>
#include <set>

#include "common/atomic_write.hpp"
#include "common/config_reader.hpp"
#include "common/limits.hpp"
#include "common/strict_json.hpp"
#include "sim/pipeline_schedule.hpp"
#include "sim/report_json.hpp"

namespace sim {

namespace {

using nlohmann::json;
constexpr int kFormatVersion = 1;
constexpr const char* kFormat = "slicetune-step-graph";
constexpr const char* kPipelineFormat = "slicetune-pipeline-step-graphs";  ///< one slicetune-step-graph per stage

json model_json(const ModelSpec& m) {
  return {{"name", m.name},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"ffn_hidden", m.ffn_hidden},
          {"vocab", m.vocab},
          {"seq_len", m.seq_len},
          {"norm", m.norm == Norm::layernorm ? "layernorm" : "rmsnorm"},
          {"activation", m.activation == Activation::gelu ? "gelu" : "swiglu"},
          {"position", m.position == Position::learned ? "learned" : "rope"},
          {"tied_embeddings", m.tied_embeddings}};
}

json kind_json(const TaskKind& k) {
  return std::visit(
      [](const auto& op) -> json {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, hardware::GemmOp>)
          return {{"m", op.m}, {"n", op.n}, {"k", op.k}, {"dtype", common::to_string(op.dtype)}, {"batch", op.batch}};
        else if constexpr (std::is_same_v<T, hardware::AttentionOp>)
          return {{"batch", op.batch},       {"heads", op.heads},
                  {"kv_heads", op.kv_heads}, {"s_q", op.s_q},
                  {"s_kv", op.s_kv},         {"head_dim", op.head_dim},
                  {"q_offset", op.q_offset}, {"causal", op.causal},
                  {"backward", op.backward}, {"dtype", common::to_string(op.dtype)},
                  {"kernel", hardware::to_string(op.kernel)}};
        else if constexpr (std::is_same_v<T, hardware::ElementwiseOp>)
          return {
              {"kind", hardware::to_string(op.kind)}, {"elements", op.elements}, {"bytes", op.bytes}, {"backward", op.backward}};
        else if constexpr (std::is_same_v<T, hardware::CollectiveOp>)
          return {{"collective", hardware::to_string(op.kind)},
                  {"bytes", op.bytes},
                  {"ranks", op.ranks},
                  {"nodes", op.nodes},
                  {"dtype", common::to_string(op.dtype)}};
        else
          return {{"params", op.params}};
      },
      k);
}

constexpr const char* kKindNames[] = {"gemm", "attention", "elementwise", "collective", "optimizer"};  // TaskKind order

/// A strict reader of one JSON object: every error names the source and the key path; finish()
/// refuses keys nobody read.
class Reader {
 public:
  Reader(const json& j, std::string source, std::string path) : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "expected an object");
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw common::ConfigError(source_, where(key), what);
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& get(const char* key) {
    if (!j_.contains(key)) fail(key, "missing");
    used_.insert(key);
    return j_.at(key);
  }
  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max) {
    const json& v = get(key);
    const bool fits =
        v.is_number_integer() && (!v.is_number_unsigned() ||
                                  v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!fits || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
      fail(key, fmt::format("expected an integer in {}..{}, got {}", min, max, v.dump()));
    return v.get<std::int64_t>();
  }
  double number(const char* key, double min, double max) {
    const json& v = get(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min || v.get<double>() > max)
      fail(key, fmt::format("expected a finite number in [{}, {:g}], got {}", min, max, v.dump()));
    return v.get<double>();
  }
  bool boolean(const char* key) {
    const json& v = get(key);
    if (!v.is_boolean()) fail(key, "expected true or false");
    return v.get<bool>();
  }
  std::string string(const char* key) {
    const json& v = get(key);
    if (!v.is_string()) fail(key, "expected a string");
    return v.get<std::string>();
  }
  const json& array(const char* key) {
    const json& v = get(key);
    if (!v.is_array()) fail(key, "expected an array");
    return v;
  }
  common::DType dtype(const char* key) {
    common::DType d;
    if (!common::parse_dtype(string(key), d)) fail(key, "expected bf16 | fp16 | fp8 | fp32");
    return d;
  }
  Reader child(const char* key) { return Reader(get(key), source_, where(key)); }
  Reader element(const json& array, std::size_t i, const char* key) const {
    return Reader(array[i], source_, fmt::format("{}[{}]", where(key), i));
  }
  void finish() const {
    for (const auto& [k, v] : j_.items())
      if (!used_.count(k)) fail(k, "unknown key");
  }
  std::string where(const std::string& key) const { return path_.empty() ? key : key.empty() ? path_ : path_ + "." + key; }
  const json& raw() const { return j_; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_, path_;
  std::set<std::string> used_;
};

TaskKind read_kind(Reader& t) {
  const std::string kind = t.string("kind");
  Reader s = t.child("shape");
  // every size bounded (common/limits.hpp) so that the cost models' products stay exact or finite
  constexpr std::int64_t kMax = common::limits::kMaxShapeDim;
  constexpr std::int64_t kMaxElements = common::limits::kMaxShapeElements;
  TaskKind k;
  if (kind == "gemm") {
    k = hardware::GemmOp{.m = s.integer("m", 1, kMax),
                         .n = s.integer("n", 1, kMax),
                         .k = s.integer("k", 1, kMax),
                         .dtype = s.dtype("dtype"),
                         .batch = s.integer("batch", 1, kMax)};
  } else if (kind == "attention") {
    hardware::AttentionOp a;
    a.batch = s.integer("batch", 1, kMax);
    a.heads = s.integer("heads", 1, kMax);
    a.kv_heads = s.integer("kv_heads", 1, kMax);
    a.s_q = s.integer("s_q", 1, kMax);
    a.s_kv = s.integer("s_kv", 1, kMax);
    a.head_dim = s.integer("head_dim", 1, kMax);
    a.q_offset = s.integer("q_offset", 0, kMax);
    a.causal = s.boolean("causal");
    a.backward = s.boolean("backward");
    a.dtype = s.dtype("dtype");
    if (!hardware::parse_attention_kernel(s.string("kernel"), a.kernel)) s.fail("kernel", "expected flash | unfused | unfused_compiled");
    if (a.heads % a.kv_heads) s.fail("kv_heads", fmt::format("heads={} is not divisible by kv_heads={}", a.heads, a.kv_heads));
    k = a;
  } else if (kind == "elementwise") {
    hardware::ElementwiseOp e;
    const std::string name = s.string("kind");
    bool found = false;
    for (int i = 0; i <= static_cast<int>(hardware::ElementwiseKind::accumulate); ++i)
      if (hardware::to_string(static_cast<hardware::ElementwiseKind>(i)) == name) {
        e.kind = static_cast<hardware::ElementwiseKind>(i);
        found = true;
      }
    if (!found) s.fail("kind", fmt::format("unknown element-wise kind '{}'", name));
    e.elements = s.integer("elements", 0, kMaxElements);
    e.bytes = s.number("bytes", 0.0, 16.0 * static_cast<double>(kMaxElements));
    e.backward = s.boolean("backward");
    k = e;
  } else if (kind == "collective") {
    hardware::CollectiveOp c;
    if (!hardware::parse_collective_kind(s.string("collective"), c.kind)) s.fail("collective", "unknown collective");
    c.bytes = s.integer("bytes", 0, common::limits::kMaxCollectiveBytes);
    c.ranks = static_cast<int>(s.integer("ranks", 1, common::limits::kMaxGpus));
    c.nodes = static_cast<int>(s.integer("nodes", 1, common::limits::kMaxNodes));
    c.dtype = s.dtype("dtype");
    if (c.ranks % c.nodes) s.fail("nodes", fmt::format("ranks={} are not spread evenly over nodes={}", c.ranks, c.nodes));
    k = c;
  } else if (kind == "optimizer") {
    k = hardware::OptimizerOp{.params = s.integer("params", 0, kMaxElements)};
  } else {
    t.fail("kind", fmt::format("expected gemm | attention | elementwise | collective | optimizer, got '{}'", kind));
  }
  s.finish();
  return k;
}

}  // namespace

json graph_to_json(const StepGraph& g, const hardware::ClusterSpec& cluster) {
  json streams = json::array(), groups = json::array(), tensors = json::array(), tasks = json::array(), edges = json::array();
  for (const auto& s : g.streams) streams.push_back({{"name", s.name}, {"kind", to_string(s.kind)}});
  for (const auto& gr : g.groups)
    groups.push_back({{"name", gr.name}, {"size", gr.size}, {"nodes", gr.nodes}, {"instance", gr.instance}});
  for (const auto& t : g.tensors)
    tensors.push_back({{"rows", t.rows},
                       {"cols", t.cols},
                       {"dtype", common::to_string(t.dtype)},
                       {"role", to_string(t.role)},
                       {"op", to_string(t.op)},
                       {"backward", t.backward},
                       {"layer", t.layer},
                       {"slice", t.slice},
                       {"chunk", t.chunk},
                       {"variant", t.variant}});
  if (g.plan.pp > 1)  // pipelined graphs tag tensors with their model chunk and micro-batch
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      tensors[i]["model_chunk"] = g.tensors[i].model_chunk;
      tensors[i]["micro"] = g.tensors[i].micro;
    }
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Task& t = g.tasks[i];
    json row = {{"name", g.task_name(i)},
                {"kind", kKindNames[t.kind.index()]},
                {"shape", kind_json(t.kind)},
                {"stream", g.streams[t.stream].name},
                {"op", to_string(t.op)},
                {"phase", to_string(t.phase)},
                {"layer", t.layer},
                {"slice", t.slice},
                {"chunk", t.chunk},
                {"once_per_step", t.once_per_step},
                {"step_start", t.step_start},
                {"recompute", t.recompute},
                {"launches", t.launches},
                {"inputs", std::vector<TensorId>(g.inputs(i).begin(), g.inputs(i).end())},
                {"outputs", std::vector<TensorId>(g.outputs(i).begin(), g.outputs(i).end())}};
    if (t.group) {
      const GroupSpec& gr = g.groups[*t.group];
      row["group"] = gr.name;
      // two groups of one name (a pipeline stage's neighbours both ways round the ring): which one
      if (std::count_if(g.groups.begin(), g.groups.end(), [&](const GroupSpec& o) { return o.name == gr.name; }) > 1)
        row["group_instance"] = gr.instance;
      row["seq"] = t.seq;
    }
    if (t.comm_sms >= 0) row["comm_sms"] = t.comm_sms;  // a strategy's SMs for this collective (0: copy engines)
    if (t.fused != FusedPiece::none) {  // a piece of a fused kernel (strategy fused), priced as its share
      row["fused"] = to_string(t.fused);
      row["fused_of"] = t.fused_of;
    }
    if (g.plan.pp > 1) {
      row["model_chunk"] = t.model_chunk;
      row["micro"] = t.micro;
    }
    tasks.push_back(std::move(row));
    for (auto v : boost::make_iterator_range(g.successors(i))) edges.push_back({i, v});
  }
  json out = {{"format", kFormat},  {"version", kFormatVersion},  {"cluster", cluster.name},      {"nodes", cluster.nodes},
              {"rank", g.rank},     {"represents", g.represents}, {"model", model_json(g.model)}, {"plan", plan_json(g.plan)},
              {"streams", streams}, {"groups", groups},           {"tensors", tensors},           {"tasks", tasks},
              {"edges", edges}};
  if (g.plan.pp > 1) out["micro_batches"] = g.micro_batches;
  return out;
}

json graphs_to_json(const std::vector<StepGraph>& graphs, const hardware::ClusterSpec& cluster) {
  if (graphs.size() == 1 && graphs[0].plan.pp == 1) return graph_to_json(graphs[0], cluster);
  json stages = json::array();
  for (const auto& g : graphs) stages.push_back(graph_to_json(g, cluster));
  return {{"format", kPipelineFormat}, {"version", kFormatVersion}, {"cluster", cluster.name}, {"nodes", cluster.nodes}, {"stages", stages}};
}

void save_graph(const std::string& path, const StepGraph& g, const hardware::ClusterSpec& cluster) {
  common::write_file_atomically(path, graph_to_json(g, cluster).dump(1) + "\n");
}

void save_graphs(const std::string& path, const std::vector<StepGraph>& graphs, const hardware::ClusterSpec& cluster) {
  common::write_file_atomically(path, graphs_to_json(graphs, cluster).dump(1) + "\n");
}

json read_graph_file(const std::string& path) {
  // regular files up to limits::kMaxInputFileBytes; duplicate keys and deep nesting refused
  return common::parse_json_strict(common::read_text_file(path), path, "a step graph JSON file (simulate --save-graph)");
}

std::pair<std::string, int> saved_cluster(const json& j, const std::string& source) {
  Reader r(j, source, "");
  return {r.string("cluster"), static_cast<int>(r.integer("nodes", 1, common::limits::kMaxNodes))};
}

namespace {

StepGraph load_one(const json& j, const std::string& source, const hardware::ClusterSpec& cluster, bool stage_of_pipeline) {
  Reader r(j, source, "");
  if (r.string("format") != kFormat) r.fail("format", fmt::format("expected \"{}\"", kFormat));
  if (r.integer("version", 0, 1 << 20) != kFormatVersion) r.fail("version", fmt::format("expected {}", kFormatVersion));
  r.get("cluster");
  r.get("nodes");
  StepGraph g;
  namespace lim = common::limits;
  const std::int64_t gpus = cluster.total_gpus();  // bounded by lim::kMaxGpus (hardware::set_nodes)
  g.rank = static_cast<int>(r.integer("rank", 0, gpus - 1));
  g.represents = static_cast<int>(r.integer("represents", 1, gpus));
  // model and plan: the same strict readers as model and plan files (JSON is YAML)
  g.model = parse_model(r.child("model").raw().dump(), fmt::format("{}: model", source));
  json plan = r.child("plan").raw();
  plan.erase("grad_accum_steps");  // derived; plan_json writes it for readers
  g.plan = resolve_plan(g.model, cluster, parse_plan_input(plan.dump(), fmt::format("{}: plan", source)),
                        fmt::format("{}: plan", source));
  if (g.plan.pp > 1 && !stage_of_pipeline)
    throw common::ConfigError(source, "plan.pp",
                              fmt::format("pp={}: a pipelined step has one graph per stage; this file holds one graph (pp 1), a pipelined "
                                          "plan's file has \"format\": \"{}\" and its \"stages\"",
                                          g.plan.pp, kPipelineFormat));
  if (g.plan.pp == 1 && stage_of_pipeline) r.fail("plan.pp", "expected pp > 1 in a stage of a pipelined step");
  g.micro_batches = 1;
  if (g.plan.pp > 1) {
    g.micro_batches = static_cast<int>(r.integer("micro_batches", 1, std::numeric_limits<int>::max()));
    if (g.micro_batches != g.plan.grad_accum_steps())
      r.fail("micro_batches", fmt::format("expected the plan's {} micro-batches per pipeline, got {}", g.plan.grad_accum_steps(), g.micro_batches));
  }
  const bool pipelined = g.plan.pp > 1;
  const int max_chunk = g.plan.vp - 1, max_micro = g.micro_batches - 1;

  const json& streams = r.array("streams");
  if (streams.empty() || streams.size() > 255) r.fail("streams", "expected 1..255 streams");
  for (std::size_t i = 0; i < streams.size(); ++i) {
    Reader s = r.element(streams, i, "streams");
    StreamSpec spec{.name = s.string("name"), .kind = StreamKind::compute};
    if (!parse_stream_kind(s.string("kind"), spec.kind)) s.fail("kind", "expected compute | comm");
    for (const auto& o : g.streams)
      if (o.name == spec.name) s.fail("name", fmt::format("stream '{}' is declared twice", spec.name));
    s.finish();
    g.streams.push_back(std::move(spec));
  }
  const json& groups = r.array("groups");
  if (groups.size() > 255) r.fail("groups", "expected at most 255 groups");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    Reader s = r.element(groups, i, "groups");
    GroupSpec spec{.name = s.string("name"),
                   .size = static_cast<int>(s.integer("size", 1, gpus)),
                   .nodes = static_cast<int>(s.integer("nodes", 1, cluster.nodes)),
                   .instance = static_cast<int>(s.integer("instance", 0, gpus - 1))};
    for (const auto& o : g.groups)
      if (o.name == spec.name && o.instance == spec.instance)
        s.fail("name", fmt::format("group '{}' instance {} is declared twice", spec.name, spec.instance));
    s.finish();
    g.groups.push_back(std::move(spec));
  }
  const json& tensors = r.array("tensors");
  if (static_cast<std::int64_t>(tensors.size()) > lim::kMaxGraphTensors)
    r.fail("tensors", fmt::format("{} tensors: at most {} are read", tensors.size(), lim::kMaxGraphTensors));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Reader s = r.element(tensors, i, "tensors");
    TensorInfo t;
    t.rows = s.integer("rows", 0, lim::kMaxTensorDim);
    t.cols = s.integer("cols", 0, lim::kMaxTensorDim);
    t.dtype = s.dtype("dtype");
    if (!parse_tensor_role(s.string("role"), t.role))
      s.fail("role", "expected input | activation | gradient | weight | weight_grad");
    if (!parse_op(s.string("op"), t.op)) s.fail("op", "unknown op");
    t.backward = s.boolean("backward");
    t.layer = static_cast<std::int16_t>(s.integer("layer", -1, std::numeric_limits<std::int16_t>::max()));
    t.slice = static_cast<std::int8_t>(s.integer("slice", -1, std::numeric_limits<std::int8_t>::max()));
    t.chunk = static_cast<std::int8_t>(s.integer("chunk", -1, std::numeric_limits<std::int8_t>::max()));
    t.variant = static_cast<std::uint8_t>(s.integer("variant", 0, 255));
    if (pipelined) {
      t.model_chunk = static_cast<std::int8_t>(s.integer("model_chunk", -1, max_chunk));
      t.micro = static_cast<std::int16_t>(s.integer("micro", -1, max_micro));
    }
    s.finish();
    g.tensors.push_back(t);
  }
  const json& tasks = r.array("tasks");
  if (static_cast<std::int64_t>(tasks.size()) > lim::kMaxTasks)
    r.fail("tasks", fmt::format("{} tasks: at most {} are simulated (common/limits.hpp)", tasks.size(), lim::kMaxTasks));
  std::vector<Task> list;
  list.reserve(tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    Reader s = r.element(tasks, i, "tasks");
    if (s.has("name")) s.string("name");  // informational; the graph names tasks from their tags
    Task t;
    t.kind = read_kind(s);
    const std::string stream = s.string("stream");
    bool found = false;
    for (std::size_t k = 0; k < g.streams.size(); ++k)
      if (g.streams[k].name == stream) {
        t.stream = static_cast<StreamId>(k);
        found = true;
      }
    if (!found) s.fail("stream", fmt::format("no stream named '{}' in \"streams\"", stream));
    if (s.has("group")) {
      const auto id = [&] {
        const std::string name = s.string("group");
        const int named = static_cast<int>(std::count_if(g.groups.begin(), g.groups.end(), [&](const GroupSpec& o) { return o.name == name; }));
        if (named == 0) s.fail("group", fmt::format("no group named '{}' in \"groups\"", name));
        if (named > 1 && !s.has("group_instance"))
          s.fail("group_instance", fmt::format("{} groups are named '{}': expected the instance of the one meant", named, name));
        const auto instance = s.has("group_instance") ? std::optional<std::int64_t>(s.integer("group_instance", 0, 1 << 30)) : std::nullopt;
        for (std::size_t k = 0; k < g.groups.size(); ++k)
          if (g.groups[k].name == name && (!instance || g.groups[k].instance == *instance)) return static_cast<GroupId>(k);
        s.fail("group_instance", fmt::format("no group '{}' with instance {} in \"groups\"", name, instance.value_or(-1)));
      }();
      t.group = id;
      // a group's sequence numbers count its collectives: below the task count (the engine indexes by them)
      t.seq = static_cast<std::uint32_t>(s.integer("seq", 0, static_cast<std::int64_t>(tasks.size()) - 1));
    } else if (t.is_collective()) {
      s.fail("group", "a collective needs the group it runs on");
    }
    if (!parse_op(s.string("op"), t.op)) s.fail("op", "unknown op");
    if (!parse_phase(s.string("phase"), t.phase)) s.fail("phase", "expected fwd | bwd-dgrad | bwd-wgrad | dp | optimizer");
    t.layer = static_cast<std::int16_t>(s.integer("layer", -1, std::numeric_limits<std::int16_t>::max()));
    t.slice = static_cast<std::int8_t>(s.integer("slice", -1, std::numeric_limits<std::int8_t>::max()));
    t.chunk = static_cast<std::int8_t>(s.integer("chunk", -1, std::numeric_limits<std::int8_t>::max()));
    t.once_per_step = s.boolean("once_per_step");
    t.step_start = s.boolean("step_start");
    t.recompute = s.boolean("recompute");
    t.launches = static_cast<std::uint16_t>(s.integer("launches", 0, std::numeric_limits<std::uint16_t>::max()));
    if (s.has("comm_sms")) {
      if (!t.is_collective()) s.fail("comm_sms", "only a collective has SMs of its own");
      t.comm_sms = static_cast<std::int16_t>(
          s.integer("comm_sms", 0, std::min<std::int64_t>(common::limits::kMaxSms, std::numeric_limits<std::int16_t>::max())));
    }
    if (s.has("fused")) {
      if (!parse_fused_piece(s.string("fused"), t.fused))
        s.fail("fused", "expected none | gemm | ag_copy | ag_copy_first | rs_store | rs_pull");
      const bool gemm = t.fused == FusedPiece::gemm;
      if (t.fused != FusedPiece::none && gemm != std::holds_alternative<hardware::GemmOp>(t.kind))
        s.fail("fused", "a gemm piece must be a GEMM, a transfer piece a collective");
      t.fused_of = static_cast<std::uint16_t>(s.integer("fused_of", 0, std::numeric_limits<std::uint16_t>::max()));
      if ((gemm || t.fused == FusedPiece::ag_copy || t.fused == FusedPiece::ag_copy_first) && t.fused_of < (gemm ? 1 : 2))
        s.fail("fused_of", gemm ? "a GEMM piece needs the kernel's chunk count (>= 1)" : "an all-gather copy needs tp (>= 2)");
    }
    if (pipelined) {
      t.model_chunk = static_cast<std::int8_t>(s.integer("model_chunk", -1, max_chunk));
      t.micro = static_cast<std::int16_t>(s.integer("micro", -1, max_micro));
    }
    t.operand_begin = static_cast<std::uint32_t>(g.operands.size());
    for (const char* key : {"inputs", "outputs"}) {
      const json& ids = s.array(key);
      if (ids.size() > std::numeric_limits<std::uint16_t>::max()) s.fail(key, "too many operands");
      if (static_cast<std::int64_t>(g.operands.size() + ids.size()) > lim::kMaxGraphOperands)
        s.fail(key, fmt::format("more than {} operands in all", lim::kMaxGraphOperands));
      for (std::size_t k = 0; k < ids.size(); ++k) {
        if (!ids[k].is_number_unsigned() || ids[k].get<std::uint64_t>() >= g.tensors.size())
          s.fail(fmt::format("{}[{}]", key, k), fmt::format("expected a tensor index below {}", g.tensors.size()));
        g.operands.push_back(ids[k].get<TensorId>());
      }
      (key[0] == 'i' ? t.n_inputs : t.n_outputs) = static_cast<std::uint16_t>(ids.size());
    }
    s.finish();
    list.push_back(std::move(t));
  }
  const json& edges = r.array("edges");
  if (static_cast<std::int64_t>(edges.size()) > lim::kMaxGraphEdges)
    r.fail("edges", fmt::format("{} edges: at most {} are read", edges.size(), lim::kMaxGraphEdges));
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const json& e = edges[i];
    const bool ok = e.is_array() && e.size() == 2 && e[0].is_number_unsigned() && e[1].is_number_unsigned() &&
                    e[1].get<std::uint64_t>() < list.size() && e[0].get<std::uint64_t>() < e[1].get<std::uint64_t>();
    if (!ok)
      r.fail(fmt::format("edges[{}]", i), fmt::format("expected [from, to] task indices with from < to < {}", list.size()));
    pairs.emplace_back(e[0].get<std::uint32_t>(), e[1].get<std::uint32_t>());
  }
  r.finish();
  StepGraph out = StepGraph::assemble(std::move(list), pairs, g.plan, std::move(g.streams), std::move(g.groups));
  out.tensors = std::move(g.tensors);
  out.operands = std::move(g.operands);
  out.model = std::move(g.model);
  out.rank = g.rank;
  out.represents = g.represents;
  out.micro_batches = g.micro_batches;
  return out;
}

}  // namespace

StepGraph load_graph(const json& j, const std::string& source, const hardware::ClusterSpec& cluster) {
  return load_one(j, source, cluster, false);
}

std::vector<StepGraph> load_graphs(const json& j, const std::string& source, const hardware::ClusterSpec& cluster) {
  Reader r(j, source, "");
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kPipelineFormat) {
    std::vector<StepGraph> one;
    one.push_back(load_one(j, source, cluster, false));
    return one;
  }
  r.string("format");
  if (r.integer("version", 0, 1 << 20) != kFormatVersion) r.fail("version", fmt::format("expected {}", kFormatVersion));
  r.get("cluster");
  r.get("nodes");
  const json& stages = r.array("stages");
  std::vector<StepGraph> out;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    out.push_back(load_one(stages[i], fmt::format("{}: stages[{}]", source, i), cluster, true));
    const Plan& p = out.front().plan;
    if (!(out.back().plan == p) || !(out.back().model.name == out.front().model.name && out.back().model.layers == out.front().model.layers))
      r.fail(fmt::format("stages[{}].plan", i), "expected the model and plan of stages[0]: a pipelined step is one plan");
    if (out.back().rank != world_rank_of(p, 0, 0, static_cast<int>(i)))
      r.fail(fmt::format("stages[{}].rank", i),
             fmt::format("expected {} (stage {}'s first rank: tp rank 0, dp rank 0), got {}", world_rank_of(p, 0, 0, static_cast<int>(i)), i,
                         out.back().rank));
  }
  if (out.empty()) r.fail("stages", "expected one graph per pipeline stage");
  if (static_cast<int>(out.size()) != out.front().plan.pp)
    r.fail("stages", fmt::format("expected pp={} graphs (one per stage), got {}", out.front().plan.pp, out.size()));
  r.finish();
  return out;
}

}  // namespace sim
