#include "tuner/space.hpp"

namespace tuner {

int default_global_batch(const hardware::ClusterSpec& c) { return 8 * c.total_gpus(); }

std::vector<sim::Plan> enumerate_plans(const sim::ModelSpec& m, const hardware::ClusterSpec& c, const SearchSpace& s) {
  const int gpus = c.total_gpus();
  const int gb = s.global_batch > 0 ? s.global_batch : default_global_batch(c);
  std::vector<int> tps = s.tp;
  if (tps.empty())
    for (int t = 1; t <= gpus; ++t)
      if (gpus % t == 0) tps.push_back(t);
  std::vector<sim::Plan> out;
  for (int tp : tps) {
    const int dp = std::max(1, gpus / tp);
    std::vector<int> mbs = s.micro_batch;
    if (mbs.empty())
      for (int mb = 1; mb <= s.max_micro_batch && mb <= std::max(1, gb / dp); mb *= 2) mbs.push_back(mb);
    for (int mb : mbs)
      for (bool sp : s.sequence_parallel) {
        if (sp && tp == 1) continue;
        for (sim::Strategy st : s.strategies) {
          const std::vector<int> one{1};
          const auto& rss = st == sim::Strategy::none ? one : s.row_slices;
          const auto& css = st == sim::Strategy::none ? one : s.col_slices;
          for (int rs : rss)
            for (sim::RowAxis ax : s.row_axes) {
              if (rs == 1 && ax != s.row_axes.front()) continue;
              for (int cs : css)
                for (std::size_t b = 0; b < s.dp_bucket_mb.size(); ++b) {
                  if (dp == 1 && b > 0) continue;
                  sim::Plan p;
                  p.tp = tp;
                  p.dp = dp;
                  p.micro_batch = mb;
                  p.global_batch = gb;
                  p.seq_len = s.seq_len > 0 ? s.seq_len : m.seq_len;
                  p.dtype = s.dtype;
                  p.sequence_parallel = sp;
                  p.strategy = st;
                  p.row_slices = rs;
                  p.row_axis = rs == 1 ? sim::RowAxis::batch : ax;
                  p.col_slices = cs;
                  p.dp_bucket_mb = s.dp_bucket_mb[b];
                  p.stack = s.stack;
                  out.push_back(p);
                }
            }
        }
      }
  }
  return out;
}

}  // namespace tuner
