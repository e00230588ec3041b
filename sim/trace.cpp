#include "sim/trace.hpp"

#include <fmt/format.h>

#include "common/atomic_write.hpp"

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
  for (std::size_t i = 0; i < g.size() && i < timing.size(); ++i) {
    const auto& t = g.tasks[i];
    const auto& tm = timing[i];
    if (tm.end <= tm.start && tm.start.ps == 0) continue;  // did not run
    events_.push_back(fmt::format(
        R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"task":{},"layer":{},"phase":"{}","op":"{}","slice":{},"chunk":{}}}}})",
        escape(g.task_name(i)), to_string(t.phase), pid, static_cast<int>(t.stream), tm.start.us(), (tm.end - tm.start).us(), i,
        t.layer, to_string(t.phase), to_string(t.op), t.slice, t.chunk));
  }
  return *this;
}

ChromeTrace& ChromeTrace::add(const std::string& prefix, const StepReport& report) {
  for (const auto& tl : report.timelines) add(fmt::format("{} rank {}", prefix, tl.graph->rank), *tl.graph, tl.timing);
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
