#include "sim/trace.hpp"

#include <fmt/format.h>

#include "common/atomic_write.hpp"
#include "sim/cost_table.hpp"

namespace sim {

namespace {
std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}
}  // namespace

ChromeTrace& ChromeTrace::add(const std::string& label, const StepGraph& g, const std::vector<TaskTiming>& timing) {
  const int pid = next_pid_++;
  events_.push_back(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"{}"}}}})", pid, escape(label)));
  events_.push_back(fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", pid, pid));
  for (std::size_t s = 0; s < g.streams.size(); ++s)
    events_.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", pid, s,
                                  escape(g.streams[s].name)));
  auto ran = [&](std::size_t i) { return i < timing.size() && !(timing[i].end <= timing[i].start && timing[i].start.ps == 0); };
  for (std::size_t i = 0; i < g.size() && i < timing.size(); ++i) {
    const auto& t = g.tasks[i];
    const auto& tm = timing[i];
    if (!ran(i)) continue;  // did not run
    // the resource the task occupies: the compute stream, or the communicator its collective runs on
    const std::string cat = t.group ? escape(g.groups[*t.group].name) : std::string("compute");
    std::string shape;
    double bytes = 0;
    for (TensorId o : g.outputs(i)) {
      const auto& ti = g.tensors[o];
      shape += fmt::format("{}{}x{} {}", shape.empty() ? "" : ", ", ti.rows, ti.cols, common::to_string(ti.dtype));
      bytes += ti.bytes();
    }
    std::string extra;
    if (const auto* c = std::get_if<hardware::CollectiveOp>(&t.kind)) {
      bytes = static_cast<double>(c->bytes);
      extra += fmt::format(R"(,"ranks":{},"nodes":{})", c->ranks, c->nodes);
      if (cost_) {
        // a fused kernel's transfer is no NCCL call: its own rate (algo "fused", proto the piece)
        const auto cc = t.fused != FusedPiece::none ? fused_transfer_cost(*cost_, t) : cost_->collective(*c);
        extra += fmt::format(R"(,"algo":"{}","proto":"{}","channels":{})", cc.algo, cc.proto, cc.channels);
      }
      // SMs a strategy gave it (TE's num_sm; 0: copy engines), instead of NCCL's channels
      if (t.comm_sms >= 0) extra += fmt::format(R"(,"comm_sms":{})", t.comm_sms);
    }
    // a piece of a fused kernel (strategy fused): which, and of how many
    if (t.fused != FusedPiece::none) {
      extra += fmt::format(R"(,"fused":"{}")", to_string(t.fused));
      if (t.fused_of > 0) extra += fmt::format(R"(,"fused_of":{})", t.fused_of);
    }
    events_.push_back(fmt::format(
        R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"task":{},"layer":{},"phase":"{}","op":"{}","slice":{},"chunk":{},"bytes":{:.0f},"flops":{:.6g},"shape":"{}"{}}}}})",
        escape(g.task_name(i)), cat, pid, static_cast<int>(t.stream), tm.start.us(), (tm.end - tm.start).us(), i, t.layer,
        to_string(t.phase), to_string(t.op), t.slice, t.chunk, bytes, t.flops(), shape, extra));
  }
  // flow arrows along dependencies that cross streams (an event wait in CUDA terms)
  for (std::size_t i = 0; i < g.size() && i < timing.size(); ++i) {
    if (!ran(i)) continue;
    const auto [first, last] = g.successors(i);
    for (auto it = first; it != last; ++it) {
      const std::size_t j = *it;
      if (!ran(j) || g.tasks[j].stream == g.tasks[i].stream) continue;
      const long long id = next_flow_++;
      events_.push_back(fmt::format(R"({{"name":"dependency","cat":"flow","ph":"s","id":{},"pid":{},"tid":{},"ts":{:.3f}}})", id, pid,
                                    static_cast<int>(g.tasks[i].stream), timing[i].end.us()));
      events_.push_back(fmt::format(R"({{"name":"dependency","cat":"flow","ph":"f","bp":"e","id":{},"pid":{},"tid":{},"ts":{:.3f}}})", id,
                                    pid, static_cast<int>(g.tasks[j].stream), timing[j].start.us()));
    }
  }
  return *this;
}

ChromeTrace& ChromeTrace::add(const std::string& prefix, const StepReport& report) {
  // one process per distinct rank graph; one that stands for others identical by symmetry says how many
  for (const auto& tl : report.timelines)
    add(tl.graph->represents > 1 ? fmt::format("{} rank {} (stands for {} ranks, identical by symmetry)", prefix, tl.graph->rank, tl.graph->represents)
                                 : fmt::format("{} rank {}", prefix, tl.graph->rank),
        *tl.graph, tl.timing);
  return *this;
}

std::string ChromeTrace::json() const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events_.size(); ++i) {
    out += events_[i];
    out += i + 1 < events_.size() ? ",\n" : "\n";
  }
  out += "]}\n";
  return out;
}

void ChromeTrace::write(const std::string& path) const { common::write_file_atomically(path, json()); }

}  // namespace sim
