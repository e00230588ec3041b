#include "validate/calibration.hpp"

#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "common/config_reader.hpp"

namespace validate {

using common::ConfigError;

int Csv::col(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  throw ConfigError(path, name, "column missing from the header");
}

const std::string& Csv::cell(const std::vector<std::string>& row, const std::string& name) const {
  const auto i = static_cast<std::size_t>(col(name));
  if (i >= row.size()) throw ConfigError(path, name, fmt::format("a row has {} cells, the header {}", row.size(), header.size()));
  return row[i];
}

namespace {
std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}
}  // namespace

Csv read_csv(const std::string& path) {
  Csv csv;
  csv.path = path;
  std::istringstream in(common::read_text_file(path));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (csv.header.empty()) csv.header = split(line);
    else csv.rows.push_back(split(line));
  }
  return csv;
}

double csv_number(const Csv& csv, const std::vector<std::string>& row, const std::string& col) {
  const auto& c = csv.cell(row, col);
  try {
    std::size_t used = 0;
    const double v = std::stod(c, &used);
    if (used == 0 || !std::isfinite(v)) throw std::invalid_argument(c);
    return v;
  } catch (const std::exception&) {
    throw ConfigError(csv.path, col, fmt::format("'{}' is not a finite number", c));
  }
}

namespace {
std::int64_t csv_whole(const Csv& csv, const std::vector<std::string>& row, const std::string& col, double hi) {
  const double v = csv_number(csv, row, col);
  if (!(v >= 0 && v <= hi && v == std::floor(v)))
    throw ConfigError(csv.path, col, fmt::format("expected a whole number in [0, {}], got '{}'", hi, csv.cell(row, col)));
  return static_cast<std::int64_t>(v);
}
}  // namespace

int csv_int(const Csv& csv, const std::vector<std::string>& row, const std::string& col) {
  return static_cast<int>(csv_whole(csv, row, col, 2147483647.0));
}

std::int64_t csv_int64(const Csv& csv, const std::vector<std::string>& row, const std::string& col) {
  return csv_whole(csv, row, col, 9007199254740992.0);
}

std::vector<NcclMeasurement> read_nccl_measurements(const std::string& dir) {
  using hardware::CollectiveKind;
  std::vector<NcclMeasurement> out;
  {
    const std::string file = "data/calibration/nccl-allreduce-busbw.csv";
    const Csv csv = read_csv(dir + "/nccl-allreduce-busbw.csv");
    for (const auto& row : csv.rows) {
      NcclMeasurement m;
      m.set = NcclSet::nvls_one_node;
      m.cluster = csv.cell(row, "system");
      m.gpus = csv_int(csv, row, "gpus");
      m.bytes = csv_int64(csv, row, "bytes");
      m.busbw_GBps = csv_number(csv, row, "busbw_GBps");
      const bool ring = csv.cell(row, "algo") == "ring";
      if (ring) m.forced = hardware::CollectiveAlgo::ring;  // measured with NCCL_ALGO=Ring
      m.label = fmt::format("{} {} GPUs {} B ({})", m.cluster, m.gpus, m.bytes, ring ? "NCCL_ALGO=Ring" : "NVLS enabled");
      m.file = file;
      out.push_back(m);
    }
  }
  {
    const std::string file = "data/calibration/nccl-h100-busbw-1and4node.csv";
    const Csv csv = read_csv(dir + "/nccl-h100-busbw-1and4node.csv");
    for (const auto& row : csv.rows) {
      if (csv.cell(row, "gpu") != "H100-SXM") continue;                        // B200: a shape reference
      if (csv.cell(row, "busbw_GBps").empty() || csv.cell(row, "time_us").empty()) continue;  // README summary
      NcclMeasurement m;
      m.bytes = csv_int64(csv, row, "msg_bytes");
      m.busbw_GBps = csv_number(csv, row, "busbw_GBps");
      if (m.busbw_GBps <= 0) continue;  // the small-message latency floors (busbw 0)
      m.cluster = "dgx-h100";
      m.nodes = csv_int(csv, row, "nodes");
      m.gpus = csv_int(csv, row, "gpus");
      const std::string coll = csv.cell(row, "collective"), algo = csv.cell(row, "algo");
      if (coll == "all_reduce") m.kind = CollectiveKind::all_reduce;
      else if (coll == "all_gather") m.kind = CollectiveKind::all_gather;
      else if (coll == "reduce_scatter") m.kind = CollectiveKind::reduce_scatter;
      else throw ConfigError(csv.path, "collective", fmt::format("'{}' is not all_reduce, all_gather or reduce_scatter", coll));
      if (algo.rfind("Ring", 0) == 0) m.forced = hardware::CollectiveAlgo::ring;  // TOG ran NCCL_ALGO=Ring (the all-reduce says "forced")
      m.set = m.nodes > 1 ? NcclSet::four_node : NcclSet::ring_one_node;
      m.label = fmt::format("{} node{} {} GPUs {} {} B", m.nodes, m.nodes > 1 ? "s" : "", m.gpus, to_string(m.kind), m.bytes);
      m.file = file;
      out.push_back(m);
    }
  }
  return out;
}

hardware::CollectiveRow predict_nccl(hardware::ClusterSpec c, const NcclMeasurement& m) {
  c.nodes = m.nodes;
  hardware::CollectiveOptions opt;
  opt.algo = m.forced;
  const hardware::CollectiveOp op{.kind = m.kind, .bytes = m.bytes, .ranks = m.gpus, .nodes = m.nodes, .dtype = common::DType::fp32};
  return hardware::collective_row(c, op, opt);
}

NcclScaling read_rs_node_scaling(const std::string& dir) {
  const std::string path = dir + "/nccl-notes.md";
  const std::string text = common::read_text_file(path);
  const std::regex line(R"(Reduce-scatter busbw[^|]*?([0-9/]+) nodes -> ~([0-9/]+) GB/s)");
  std::smatch m;
  if (!std::regex_search(text, m, line)) throw ConfigError(path, "row 11", "line 'Reduce-scatter busbw ... N/N/.. nodes -> ~N/N/.. GB/s' not found");
  NcclScaling s;
  auto numbers = [&path](const std::string& t) {
    std::vector<double> v;
    std::stringstream ss(t);
    for (std::string x; std::getline(ss, x, '/');) {
      if (x.empty()) throw ConfigError(path, "row 11", fmt::format("'{}': expected numbers separated by /", t));
      v.push_back(std::stod(x));  // [0-9]+ (the regex): a finite number
    }
    return v;
  };
  for (double n : numbers(m[1])) {
    if (!(n >= 1 && n <= 131072)) throw ConfigError(path, "row 11", fmt::format("{} nodes: expected a node count in [1, 131072]", n));
    s.nodes.push_back(static_cast<int>(n));
  }
  s.busbw_GBps = numbers(m[2]);
  if (s.nodes.size() != s.busbw_GBps.size() || s.nodes.size() < 2)
    throw ConfigError(path, "row 11", fmt::format("{} node counts but {} bandwidths", s.nodes.size(), s.busbw_GBps.size()));
  return s;
}

NicRate read_nic_rate(const std::string& dir) {
  const std::string path = dir + "/nccl-notes.md";
  const std::string text = common::read_text_file(path);
  const std::regex line(R"(NDR 400 Gb/s CX-7 NIC: expect ([0-9.]+)-([0-9.]+) GB/s per NIC)");
  std::smatch m;
  if (!std::regex_search(text, m, line)) throw ConfigError(path, "row 3", "line 'NDR 400 Gb/s CX-7 NIC: expect N-N GB/s per NIC' not found");
  return {std::stod(m[1]), std::stod(m[2])};
}

}  // namespace validate
