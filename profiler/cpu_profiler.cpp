// The CPU backend of the profiler: OpenBLAS GEMMs, the CPU kernels, MPI collectives.
#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "hardware/collective_model.hpp"
#include "common/config_reader.hpp"
#include "executor/cpu/flash_attention.hpp"
#include "executor/cpu/kernels.hpp"
#include "executor/cpu/openblas.hpp"
#include "executor/cpu/wait_polling.hpp"
#include "profiler/cuda_profiler.hpp"
#include "profiler/profiler.hpp"


#include "common/check.hpp"

namespace profiler {

namespace {

using Clock = std::chrono::steady_clock;
using hardware::CollectiveKind;
using common::DType;
namespace ex = executor::cpu;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Four significant digits: the file stays readable and the noise is far above the rounding.
double round_sig(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

struct Budget {
  double target_s;  ///< timed span per measurement
  int warmup;
  int min_iters, max_iters;
};

class CpuProfiler {
 public:
  explicit CpuProfiler(const Options& o) : o_(o), out_(o.progress ? o.progress : &std::cerr) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    budget_ = o.quick ? Budget{0.004, 1, 5, 200} : Budget{0.03, 2, 5, 2000};
    ex::openblas().set_num_threads(1);  // one rank per core, as the CPU executor runs
  }

  hardware::Profile run() {
    const auto t0 = Clock::now();
    hardware::Profile p;
    p.info = info();
    p.gemm_tile_m = 4;  // OpenBLAS sgemm micro-kernel 16x4 (column-major M x N) = 4 rows x 16 columns row-major
    p.gemm_tile_n = 16;
    p.runs_as = {{DType::bf16, DType::fp32}, {DType::fp16, DType::fp32}, {DType::fp8, DType::fp32}};
    gemms(p);
    say("gemm", t0);
    attention(p);
    say("attention", t0);
    elementwise(p);
    optimizer(p);
    say("element-wise and optimizer", t0);
    collectives(p);
    say("collectives", t0);
    collectives_beside_compute(p);
    say("collectives beside compute", t0);
    interference(p);
    host(p);
    say("interference and host dispatch", t0);
    p.cluster_node = cluster_node(p);
    p.cluster = hardware::cluster_from_node(p.cluster_node, "profile: cluster");
    return p;
  }

 private:
  void say(const char* what, Clock::time_point t0) const {
    if (rank_ == 0) *out_ << fmt::format("profile: {} done ({:.1f} s)\n", what, seconds_since(t0)) << std::flush;
  }

  /// Median seconds of `iters` calls of f, each timed on its own. The median, not the mean: on a
  /// shared machine a descheduled call costs milliseconds and would dominate a mean, and the
  /// executor reports per-task medians too.
  static double median_call(const std::function<void()>& f, int iters) {
    std::vector<double> t(static_cast<std::size_t>(iters));
    for (auto& x : t) {
      const auto t0 = Clock::now();
      f();
      x = seconds_since(t0);
    }
    std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
    return t[static_cast<std::size_t>(iters / 2)];
  }

  /// Seconds per call of f: warm-up, iteration count agreed across ranks (so ranks run side by
  /// side as in a real step), timed calls, median per rank, mean over ranks.
  double time_compute(const std::function<void()>& f) {
    for (int i = 0; i < budget_.warmup; ++i) f();
    auto t = Clock::now();
    f();
    double one = std::max(seconds_since(t), 1e-8);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    const int iters = std::clamp(static_cast<int>(budget_.target_s / one), budget_.min_iters, budget_.max_iters);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double med = median_call(f, iters);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return med / size_;
  }

  static std::vector<float> random(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
  }

  void gemms(hardware::Profile& p) {
    if (o_.quick) p.grid_m = p.grid_n = p.grid_k = {16, 32, 64, 128, 256, 512};
    else p.grid_m = p.grid_n = p.grid_k = {16, 32, 64, 128, 256, 512, 1024, 2048};
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
    for (auto m : p.grid_m)
      for (auto n : p.grid_n)
        for (auto k : p.grid_k) shapes.insert({m, n, k});
    for (const auto& g : o_.gemm_shapes) shapes.insert({g.m, g.n, g.k});
    std::size_t done = 0;
    for (const auto& shape : shapes) {
      const auto [m, n, k] = shape;
      // plain copies for the lambda below (capturing structured bindings needs clang >= 16)
      const std::int64_t mm = m, nn = n, kk = k;
      auto a = random(static_cast<std::size_t>(m * k), 1), b = random(static_cast<std::size_t>(k * n), 2);
      std::vector<float> c(static_cast<std::size_t>(m * n));
      const double s = time_compute([&] { ex::gemm(false, false, mm, nn, kk, 1.0f, a.data(), kk, b.data(), nn, 0.0f, c.data(), nn); });
      // correctness: a few entries against a direct dot product
      ex::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
      for (std::int64_t probe : {std::int64_t{0}, m * n / 2, m * n - 1}) {
        const std::int64_t i = probe / n, j = probe % n;
        double ref = 0;
        for (std::int64_t x = 0; x < k; ++x) ref += static_cast<double>(a[i * k + x]) * b[x * n + j];
        if (std::abs(ref - c[probe]) > 1e-3 * std::sqrt(static_cast<double>(k)))
          throw std::runtime_error(fmt::format("profile: GEMM {}x{}x{} gives {} at ({}, {}), expected {}", m, n, k, c[probe], i, j, ref));
      }
      p.gemm.push_back({.dtype = DType::fp32, .m = m, .n = n, .k = k, .us = round_sig(s * 1e6)});
      if (rank_ == 0 && ++done % 64 == 0) *out_ << fmt::format("profile: gemm {}/{}\n", done, shapes.size()) << std::flush;
    }
  }

  void attention(hardware::Profile& p) {
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;  // batch, heads, s, d
    const std::vector<std::int64_t> seqs = o_.quick ? std::vector<std::int64_t>{16, 32, 64, 128, 256}
                                                    : std::vector<std::int64_t>{16, 32, 64, 128, 256, 512, 1024, 2048};
    for (std::int64_t d : {16, 64, 128})
      for (auto s : seqs) shapes.insert({1, 2, s, d});
    for (const auto& a : o_.attention_shapes)
      if (a.s_q == a.s_kv && a.q_offset == 0 && a.causal && a.heads == a.kv_heads) shapes.insert({a.batch, a.heads, a.s_q, a.head_dim});
    for (const auto& [batch, heads, s, d] : shapes) {
      // the executor's layout: one QKV tensor (batch * s, [Q heads x D | K | V])
      const std::int64_t rows = batch * s, cols = 3 * heads * d;
      auto qkv = random(static_cast<std::size_t>(rows * cols), 3), dctx = random(static_cast<std::size_t>(rows * heads * d), 6);
      std::vector<float> ctx(static_cast<std::size_t>(rows * heads * d)), dqkv(qkv.size()), lse(static_cast<std::size_t>(rows * heads));
      const ex::AttentionShape shape{.batch = batch, .heads = heads, .kv_heads = heads, .head_dim = d, .s_q = s, .q_offset = 0,
                                     .kv_block = s, .rope = false};
      const float* in[1] = {qkv.data()};
      float* din[1] = {dqkv.data()};
      // the CPU backend's flash kernel (cpu-host's host.stacks.<stack>.attention; the profiled model prices either kernel from it)
      auto fwd = [&] { ex::flash_attention_forward(shape, in, ctx.data(), lse.data()); };
      auto bwd = [&] { ex::flash_attention_backward(shape, in, ctx.data(), lse.data(), dctx.data(), din); };
      const double tf = time_compute(fwd);
      const double tb = time_compute(bwd);
      // correctness: the first query of each sequence sees only key 0, so its output is V's row 0
      fwd();
      for (std::int64_t c = 0; c < heads * d; ++c) {
        const float v0 = qkv[static_cast<std::size_t>(2 * heads * d + c)];
        if (std::abs(ctx[static_cast<std::size_t>(c)] - v0) > 1e-5f)
          throw std::runtime_error(fmt::format("profile: attention output row 0 column {} is {}, expected V's {}", c, ctx[c], v0));
      }
      p.attention.push_back({.dtype = DType::fp32, .backward = false, .batch = batch, .heads = heads, .s = s, .head_dim = d, .us = round_sig(tf * 1e6)});
      p.attention.push_back({.dtype = DType::fp32, .backward = true, .batch = batch, .heads = heads, .s = s, .head_dim = d, .us = round_sig(tb * 1e6)});
    }
  }

  /// The executor's element-wise kernels (executor/cpu/kernels.hpp; residual, accumulate and concat
  /// are plain loops in its backend, reproduced here), over `elements` output elements.
  void elementwise(hardware::Profile& p) {
    std::vector<std::int64_t> sizes;
    for (std::int64_t e = 64; e <= (o_.quick ? (1 << 20) : (1 << 24)); e *= 4) sizes.push_back(e);
    struct Kernel {
      std::string kind;
      bool backward;
      std::function<void()> run;
    };
    std::vector<float> x, y, z, w, dw, stats, loss, pos_grad;
    std::vector<std::int32_t> ids;
    std::int64_t rows = 0, cols = 0;
    auto prepare = [&](std::int64_t e) {
      cols = std::min<std::int64_t>(e, 256);
      rows = e / cols;
      const auto n = static_cast<std::size_t>(rows * cols);
      x = random(n, 7);
      y = random(n, 8);
      z.assign(n, 0.0f);
      w.assign(static_cast<std::size_t>(2 * cols), 1.0f);
      dw.assign(w.size(), 0.0f);
      stats.assign(static_cast<std::size_t>(3 * rows), 0.0f);
      loss.assign(static_cast<std::size_t>(rows), 0.0f);
      pos_grad.assign(n, 0.0f);
      ids.assign(static_cast<std::size_t>(rows), 0);
      // token ids and positions: valid rows of the (rows, cols) tables and valid vocab columns
      for (std::size_t r = 0; r < ids.size(); ++r) ids[r] = static_cast<std::int32_t>((r * 7) % static_cast<std::size_t>(std::min(rows, cols)));
    };
    const std::vector<Kernel> kernels{
        {"stream", false, [&] { for (std::int64_t i = 0; i < rows * cols; ++i) z[i] += x[i]; }},
        {"layernorm", false, [&] { ex::norm_forward(false, x.data(), w.data(), z.data(), rows, cols); }},
        {"layernorm", true, [&] { ex::norm_backward(false, y.data(), x.data(), w.data(), nullptr, z.data(), dw.data(), rows, cols); }},
        {"rmsnorm", false, [&] { ex::norm_forward(true, x.data(), w.data(), z.data(), rows, cols); }},
        {"rmsnorm", true, [&] { ex::norm_backward(true, y.data(), x.data(), w.data(), nullptr, z.data(), dw.data(), rows, cols); }},
        {"gelu", false, [&] { ex::gelu_forward(x.data(), z.data(), rows * cols); }},
        {"gelu", true, [&] { ex::gelu_backward(x.data(), y.data(), z.data(), rows * cols); }},
        {"swiglu", false, [&] { ex::swiglu_forward(x.data(), z.data(), rows, cols / 2); }},
        {"swiglu", true, [&] { ex::swiglu_backward(x.data(), y.data(), z.data(), rows, cols / 2); }},
        {"residual", false, [&] { for (std::int64_t i = 0; i < rows * cols; ++i) z[i] = x[i] + y[i]; }},
        {"accumulate", false, [&] { for (std::int64_t i = 0; i < rows * cols; ++i) z[i] += x[i]; }},
        {"concat", false, [&] { std::copy(x.begin(), x.end(), z.begin()); }},
        // the graph's two cross-entropy tasks (local statistics, then loss and gradient) share the kind;
        // their table is the mean of the two kernels, so the step's sum is right
        {"cross_entropy", false, [&] {
           ex::cross_entropy_stats(x.data(), ids.data(), 0, cols, stats.data(), rows);
           ex::cross_entropy_backward(x.data(), stats.data(), ids.data(), 0, cols, 1.0f, z.data(), loss.data(), rows);
         }},
        {"embedding", false, [&] { ex::embedding_forward(ids.data(), ids.data(), x.data(), x.data(), 0, rows, z.data(), rows, cols); }},
        {"embedding", true, [&] { ex::embedding_backward(ids.data(), ids.data(), y.data(), z.data(), pos_grad.data(), 0, rows, rows, cols); }},
    };
    std::set<std::tuple<std::string, bool, std::int64_t>> todo;
    for (const auto& k : kernels)
      for (auto e : sizes) todo.insert({k.kind, k.backward, e});
    for (const auto& shape : o_.elementwise_shapes)
      for (const auto& k : kernels)
        if (k.kind == hardware::to_string(shape.op.kind) && k.backward == shape.op.backward) todo.insert({k.kind, k.backward, shape.op.elements});
    for (const auto& [kind, backward, e] : todo) {
      if (e < 16) continue;
      prepare(e);
      const std::string want_kind = kind;  // plain copies for the lambda (clang < 16 cannot capture structured bindings)
      const bool want_backward = backward;
      const auto& k = *std::find_if(kernels.begin(), kernels.end(),
                                    [&](const Kernel& x) { return x.kind == want_kind && x.backward == want_backward; });
      double s = time_compute(k.run);
      if (kind == "cross_entropy") s /= 2;
      p.elementwise.push_back({.kind = kind, .backward = backward, .elements = rows * cols, .us = round_sig(s * 1e6)});
    }
    // correctness: residual add, and LayerNorm output rows with mean 0 (weight 1, bias 1 -> mean 1)
    kernels[9].run();
    for (std::int64_t i = 0; i < rows * cols; i += 97)
      if (z[i] != x[i] + y[i]) throw std::runtime_error("profile: residual add is wrong");
    kernels[1].run();
    double m = 0;
    for (std::int64_t c = 0; c < cols; ++c) m += z[c];
    if (std::abs(m / cols - 1.0) > 1e-4) throw std::runtime_error(fmt::format("profile: LayerNorm row mean is {}, expected 1 (bias 1)", m / cols));
  }

  void optimizer(hardware::Profile& p) {
    std::set<std::int64_t> sizes(o_.optimizer_params.begin(), o_.optimizer_params.end());
    for (std::int64_t n = 1024; n <= (o_.quick ? (1 << 20) : (1 << 24)); n *= 4) sizes.insert(n);
    for (auto n : sizes) {
      auto w = random(static_cast<std::size_t>(n), 9), g = random(static_cast<std::size_t>(n), 10);
      std::vector<float> m(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
      int t = 0;
      const double s = time_compute([&] { ex::adamw(ex::AdamW{}, ++t, w.data(), g.data(), m.data(), v.data(), n, true); });
      p.optimizer.push_back({.params = n, .us = round_sig(s * 1e6)});
    }
  }

  /// Seconds per collective: warm-up, timed calls, median per rank, max over ranks (the slowest rank bounds it).
  double time_collective(MPI_Comm comm, const std::function<void()>& f, double target_s, bool large = false) {
    for (int i = 0; i < (large ? 1 : budget_.warmup); ++i) f();
    MPI_CHECK(MPI_Barrier(comm));
    auto t = Clock::now();
    f();
    double one = seconds_since(t);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm));
    const int iters = std::clamp(static_cast<int>(target_s / std::max(one, 1e-8)), budget_.min_iters, budget_.max_iters);
    MPI_CHECK(MPI_Barrier(comm));
    double med = median_call(f, iters);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, comm));
    return med;
  }

  /// Runs collective `kind` over `bytes` (nccl-tests counting) on `comm` once.
  static void run_collective(MPI_Comm comm, CollectiveKind kind, std::vector<float>& send, std::vector<float>& recv, int ranks) {
    const int count = static_cast<int>(recv.size());
    switch (kind) {
      case CollectiveKind::all_reduce: MPI_CHECK(MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm)); break;
      case CollectiveKind::all_gather:
        MPI_CHECK(MPI_Allgather(send.data(), count / ranks, MPI_FLOAT, recv.data(), count / ranks, MPI_FLOAT, comm));
        break;
      case CollectiveKind::reduce_scatter:
        MPI_CHECK(MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(send.size()) / ranks, MPI_FLOAT, MPI_SUM, comm));
        break;
      default: throw std::logic_error("profile: collective not measured");
    }
  }

  void collectives(hardware::Profile& p) {
    int nodes = 1;
    {
      MPI_Comm local;
      MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
      int local_size = 0;
      MPI_Comm_size(local, &local_size);
      MPI_Comm_free(&local);
      nodes = size_ / local_size;
    }
    const std::int64_t max_bytes = o_.quick ? (std::int64_t{1} << 24) : (std::int64_t{1} << 30);
    const std::int64_t step = o_.quick ? 4 : 2;
    for (int g = 2; g <= size_; g *= 2) {
      MPI_Comm comm;
      MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank_ / g, rank_, &comm));
      int grank = 0;
      MPI_Comm_rank(comm, &grank);
      const int gnodes = std::max(1, nodes * g / size_);
      for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
        for (std::int64_t bytes = 64 * g; bytes <= max_bytes; bytes *= step) {
          const std::int64_t count = bytes / 4;
          // AllGather: the output is `bytes`; ReduceScatter: the input is `bytes`
          std::vector<float> send(static_cast<std::size_t>(kind == CollectiveKind::all_gather ? count / g : count));
          std::vector<float> recv(static_cast<std::size_t>(kind == CollectiveKind::reduce_scatter ? count / g : count));
          // AllGather passes the per-rank count through recv.size() / ranks
          auto fill = [&] {
            for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(grank + 1 + static_cast<int>(i % 7));
          };
          fill();
          const double target = budget_.target_s * (o_.quick ? 1 : 2);
          const double s = time_collective(comm, [&] { run_collective(comm, kind, send, recv, g); }, target, bytes >= (1 << 26));
          // correctness pass on fresh data: small integers, so the float sums are exact
          fill();
          run_collective(comm, kind, send, recv, g);
          const double rank_sum = g * (g + 1) / 2.0;
          for (std::size_t i = 0; i < recv.size(); i += std::max<std::size_t>(1, recv.size() / 64)) {
            double expect = 0;
            if (kind == CollectiveKind::all_reduce) expect = rank_sum + g * static_cast<double>(i % 7);
            else if (kind == CollectiveKind::all_gather) {
              const std::size_t chunk = send.size(), src = i / chunk;
              expect = static_cast<double>(src + 1 + (i % chunk) % 7);
            } else {
              const std::size_t idx = static_cast<std::size_t>(grank) * recv.size() + i;
              expect = rank_sum + g * static_cast<double>(idx % 7);
            }
            if (recv[i] != expect)
              throw std::runtime_error(fmt::format("profile: {} of {} bytes over {} ranks: element {} is {}, expected {}",
                                                   hardware::to_string(kind), bytes, g, i, recv[i], expect));
          }
          p.collectives.push_back({.kind = kind, .ranks = g, .nodes = gnodes, .bytes = bytes, .us = round_sig(s * 1e6)});
        }
        if (rank_ == 0) *out_ << fmt::format("profile: {} over {} ranks done\n", hardware::to_string(kind), g) << std::flush;
      }
      MPI_Comm_free(&comm);
    }
  }

  /// Starts collective `kind` non-blocking, as the CPU executor's communication thread does.
  static MPI_Request start_collective(MPI_Comm comm, CollectiveKind kind, std::vector<float>& send, std::vector<float>& recv, int ranks) {
    MPI_Request r = MPI_REQUEST_NULL;
    const int count = static_cast<int>(recv.size());
    switch (kind) {
      case CollectiveKind::all_reduce: MPI_CHECK(MPI_Iallreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, comm, &r)); break;
      case CollectiveKind::all_gather:
        MPI_CHECK(MPI_Iallgather(send.data(), count / ranks, MPI_FLOAT, recv.data(), count / ranks, MPI_FLOAT, comm, &r));
        break;
      case CollectiveKind::reduce_scatter:
        MPI_CHECK(MPI_Ireduce_scatter_block(send.data(), recv.data(), static_cast<int>(send.size()) / ranks, MPI_FLOAT, MPI_SUM, comm, &r));
        break;
      default: throw std::logic_error("profile: collective not measured");
    }
    return r;
  }

  /// Collectives the way the CPU executor runs them: on their own thread, started non-blocking and
  /// completed by the executor's sleeping poll loop (executor::cpu::wait_polling), while the rank's
  /// other thread keeps computing (64^3 GEMMs, a step's small kernels). On a machine with as many
  /// ranks as cores the two threads share a core, so a collective's time is set by how soon its
  /// polls get the core back, which the direct table above (a blocking call on an idle rank) does
  /// not see. Timed start to end on the communicating thread, as the executor times a task; median
  /// per rank, max over ranks. Sizes up to 4 MB (16 MB full): a step's tensor-parallel collectives.
  void collectives_beside_compute(hardware::Profile& p) {
    if (size_ < 2) return;
    const std::int64_t max_bytes = o_.quick ? (std::int64_t{1} << 22) : (std::int64_t{1} << 24);
    auto a = random(64 * 64, 15), b = random(64 * 64, 16);
    std::vector<float> c(64 * 64);
    for (int g = 2; g <= size_; g *= 2) {
      MPI_Comm comm;
      MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank_ / g, rank_, &comm));
      const int nodes = [&] {
        for (const auto& q : p.collectives)
          if (q.ranks == g) return q.nodes;
        return 1;
      }();
      for (CollectiveKind kind : {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
        for (std::int64_t bytes = 64 * g; bytes <= max_bytes; bytes *= 4) {
          const std::int64_t count = bytes / 4;
          std::vector<float> send(static_cast<std::size_t>(kind == CollectiveKind::all_gather ? count / g : count), 1.0f);
          std::vector<float> recv(static_cast<std::size_t>(kind == CollectiveKind::reduce_scatter ? count / g : count));
          auto once = [&] {
            MPI_Request r = start_collective(comm, kind, send, recv, g);
            ex::wait_polling(1, &r);
          };
          once();  // warm-up
          MPI_CHECK(MPI_Barrier(comm));
          std::atomic<bool> stop{false};
          std::thread compute([&] {
            while (!stop.load(std::memory_order_relaxed))
              ex::gemm(false, false, 64, 64, 64, 1.0f, a.data(), 64, b.data(), 64, 0.0f, c.data(), 64);
          });
          auto t = Clock::now();
          once();
          double one = seconds_since(t);
          MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, comm));
          const int iters = std::clamp(static_cast<int>(budget_.target_s * 2 / std::max(one, 1e-8)), 9, 200);
          double med = median_call(once, iters);
          stop = true;
          compute.join();
          MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, comm));
          p.collectives_beside_compute.push_back({.kind = kind, .ranks = g, .nodes = nodes, .bytes = bytes, .us = round_sig(med * 1e6)});
        }
      }
      if (rank_ == 0) *out_ << fmt::format("profile: collectives beside compute over {} ranks done\n", g) << std::flush;
      MPI_Comm_free(&comm);
    }
  }

  void interference(hardware::Profile& p) {
    if (size_ < 2) return;
    const std::int64_t n = o_.quick ? 256 : 512;
    const std::int64_t bytes = o_.quick ? (1 << 22) : (1 << 24);
    auto a = random(static_cast<std::size_t>(n * n), 11), b = random(static_cast<std::size_t>(n * n), 12);
    std::vector<float> c(static_cast<std::size_t>(n * n));
    std::vector<float> send(static_cast<std::size_t>(bytes / 4), 1.0f), recv(send.size());
    MPI_Comm comm;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    auto gemm = [&] { ex::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); };
    // the AllReduce as the CPU executor runs it: non-blocking, completed by its sleeping poll loop
    auto coll = [&] {
      MPI_Request r = start_collective(comm, CollectiveKind::all_reduce, send, recv, size_);
      ex::wait_polling(1, &r);
    };
    const double gemm_alone = time_compute(gemm);
    const double coll_alone = time_collective(comm, coll, budget_.target_s * 4);
    const int span_calls = std::max(8, static_cast<int>(budget_.target_s * 8 / coll_alone));

    // GEMM beside a running collective: a thread runs `span_calls` AllReduces; this thread counts
    // the GEMMs that finish while it runs.
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    std::atomic<bool> comm_running{true};
    std::thread comm_thread([&] {
      for (int i = 0; i < span_calls; ++i) coll();
      comm_running = false;
    });
    int gemms = 0;
    auto t = Clock::now();
    double gemm_span = 0;
    while (comm_running) {
      gemm();
      if (comm_running) {
        ++gemms;
        gemm_span = seconds_since(t);
      }
    }
    comm_thread.join();
    double gemm_beside = gemms > 0 ? gemm_span / gemms : gemm_alone;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &gemm_beside, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    gemm_beside /= size_;

    // The collective beside a running GEMM: a thread runs GEMMs until told to stop.
    std::atomic<bool> stop{false};
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    std::thread compute_thread([&] {
      while (!stop) gemm();
    });
    t = Clock::now();
    for (int i = 0; i < span_calls; ++i) coll();
    double coll_beside = seconds_since(t) / span_calls;
    stop = true;
    compute_thread.join();
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &coll_beside, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    MPI_Comm_free(&comm);

    hardware::InterferenceMeasurement m;
    m.gemm = {.dtype = DType::fp32, .m = n, .n = n, .k = n, .us = round_sig(gemm_alone * 1e6)};
    m.collective = {.kind = CollectiveKind::all_reduce, .ranks = size_, .nodes = 1, .bytes = bytes, .us = round_sig(coll_alone * 1e6)};
    m.gemm_beside_us = round_sig(gemm_beside * 1e6);
    m.collective_beside_us = round_sig(coll_beside * 1e6);
    p.interference = m;
  }

  /// Host cost of issuing one task on the CPU backend: what an executor loop does per task besides
  /// the kernel itself (two clock reads for the timeline, an indirect call, an MPI progress poll).
  void host(hardware::Profile& p) {
    std::vector<double> timeline;
    timeline.reserve(1 << 16);
    std::function<void()> task = [] {};
    int flag = 0;
    MPI_Status status;
    const double s = time_compute([&] {
      const auto a = Clock::now();
      task();
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
      const auto b = Clock::now();
      if (timeline.size() < (1 << 16)) timeline.push_back(std::chrono::duration<double>(b - a).count());
    });
    p.host = hardware::HostMeasurement{
        .launch_us = round_sig(s * 1e6),
        .method = "per task: two steady_clock reads, an indirect call and an MPI_Iprobe progress poll (stand-in for the CPU "
                  "executor's dispatch loop)"};
    if (size_ >= 2) {
      p.host->collective_handoff_us = round_sig(handoff_seconds() * 1e6);
      p.host->handoff_method = "a 4 KB AllReduce issued to a communication thread (mutex + condition variable queue, as the "
                               "CPU executor does) while this thread keeps running 64^3 GEMMs and checks for completion "
                               "between them; issue-to-seen time minus the same AllReduce called directly; median";
    }
  }

  /// Round trip through a communication thread the way the CPU executor runs collectives, minus the
  /// collective alone: what each collective costs its consumer in thread hand-offs.
  double handoff_seconds() {
    std::vector<float> send(1024, 1.0f), recv(1024);
    auto a = random(64 * 64, 13), b = random(64 * 64, 14);
    std::vector<float> c(64 * 64);
    MPI_Comm comm;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    auto coll = [&] { run_collective(comm, CollectiveKind::all_reduce, send, recv, size_); };
    const int iters = o_.quick ? 50 : 400;
    const double direct = time_collective(comm, coll, budget_.target_s);
    std::mutex mu;
    std::condition_variable cv;
    int queued = 0;
    bool stop = false;
    std::atomic<std::uint32_t> done{0};
    std::thread worker([&] {
      std::uint32_t n = 0;
      for (;;) {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return stop || queued > 0; });
          if (queued == 0) return;
          --queued;
        }
        coll();
        done.store(++n, std::memory_order_release);
        done.notify_all();
      }
    });
    std::vector<double> t(static_cast<std::size_t>(iters));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < iters; ++i) {
      const auto t0 = Clock::now();
      {
        std::lock_guard lock(mu);
        ++queued;
      }
      cv.notify_one();
      // as in a step, this thread keeps computing (small GEMMs, the next slice's work) and looks
      // for the result between kernels: the communication thread must win a core from it
      while (done.load(std::memory_order_acquire) != static_cast<std::uint32_t>(i + 1)) ex::gemm(false, false, 64, 64, 64, 1.0f, a.data(), 64, b.data(), 64, 0.0f, c.data(), 64);
      t[static_cast<std::size_t>(i)] = seconds_since(t0);
    }
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_one();
    worker.join();
    MPI_Comm_free(&comm);
    std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
    double handoff = std::max(0.0, t[static_cast<std::size_t>(iters / 2)] - direct);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &handoff, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return handoff / size_;
  }

  hardware::ProfileInfo info() const {
    hardware::ProfileInfo i;
    i.backend = "cpu";
    i.device = cpu_name();
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    i.host = host;
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    i.date = date;
    i.ranks = size_;
    i.quick = o_.quick;
    i.command = o_.command;
    std::string blas = ex::openblas().get_config();
    i.libraries["openblas"] = blas + " core " + ex::openblas().get_corename();
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    std::string mv(mpi, static_cast<std::size_t>(len));
    if (auto nl = mv.find_first_of("\n,"); nl != std::string::npos) mv.resize(nl);
    i.libraries["mpi"] = mv;
    return i;
  }

  static std::string cpu_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("model name", 0) == 0) {
        auto pos = line.find(':');
        if (pos != std::string::npos) return line.substr(pos + 2);
      }
    return "unknown CPU";
  }

  /// The machine as a configs/clusters/ mapping, from what was measured: the analytic model's
  /// parameters wherever the tables do not reach.
  common::YamlNode cluster_node(const hardware::Profile& p) const {
    double best_gflops = 0;
    for (const auto& g : p.gemm) best_gflops = std::max(best_gflops, 2.0 * g.m * g.n * g.k / (g.us * 1e-6) / 1e9);
    double stream_gb_s = 0, min_stream_us = 1e30;
    for (const auto& e : p.elementwise)
      if (e.kind == "stream") {
        stream_gb_s = std::max(stream_gb_s, 3.0 * 4.0 * static_cast<double>(e.elements) / (e.us * 1e-6) / 1e9);  // read x, y; write y
        min_stream_us = std::min(min_stream_us, e.us);
      }
    double busbw = 0, latency_us = 1e30;
    for (const auto& c : p.collectives)
      if (c.kind == CollectiveKind::all_reduce) {
        busbw = std::max(busbw, c.busbw_gb_s());
        latency_us = std::min(latency_us, c.us);
      }
    if (busbw == 0) busbw = stream_gb_s, latency_us = 1;
    long mem_kb = 0;
    {
      std::ifstream f("/proc/meminfo");
      std::string key;
      f >> key >> mem_kb;
    }
    const double tflops = round_sig(best_gflops / 1e3);
    auto n = common::YamlNode::map_node();
    n.set("name", fmt::format("cpu-{}x", size_));
    auto gpu = n.child_map("gpu");
    gpu.set("name", cpu_name());
    gpu.set("arch", "cpu");
    auto peak = gpu.child_map("peak_tflops");
    for (const char* t : {"fp32", "bf16", "fp16", "fp8"}) peak.set(t, fmt::format("{}", tflops));  // all run as fp32
    gpu.set("hbm_gb_per_s", fmt::format("{}", round_sig(stream_gb_s)));
    gpu.set("hbm_gb", fmt::format("{}", round_sig(static_cast<double>(mem_kb) / 1e6 / size_)));
    gpu.set("sms", "1");
    gpu.set("gemm_efficiency", "1");
    gpu.set("memory_efficiency", "1");
    gpu.set("gemm_tile_overhead_us", "0");
    gpu.set("kernel_latency_us", fmt::format("{}", round_sig(min_stream_us)));
    auto node = n.child_map("node");
    node.set("gpus", fmt::format("{}", size_));
    node.set("nvlink_gb_per_s", fmt::format("{}", round_sig(busbw)));
    node.set("nvlink_links", "1");
    node.set("nvswitch", "true");
    node.set("nvls", "false");
    auto net = n.child_map("network");
    net.set("nics_per_node", "1");
    net.set("nic_gbit_per_s", fmt::format("{}", round_sig(busbw * 8)));
    net.set("latency_us", fmt::format("{}", round_sig(latency_us)));
    net.set("topology", "fat_tree");
    net.set("oversubscription", "1");
    const std::string launch = fmt::format("{}", p.host ? p.host->launch_us : 1.0);
    // the CPU executor's kernels as measured, whatever the stack: one launch loop, nothing fused
    auto stacks = n.child_map("host").child_map("stacks");
    for (const char* st : {"eager", "cpp", "cuda_graphs", "megatron-core"}) {
      auto s = stacks.child_map(st);
      s.set("launch_us", launch);
      s.set("op_overhead_us", "0");
      s.set("gemm_efficiency", "1");
      s.set("attention", "flash");
    }
    auto nccl = n.child_map("nccl");
    nccl.set("call_overhead_us", "0");
    nccl.set("nvls_efficiency", "1");
    nccl.set("nvls_latency_us", "1");
    auto inter = n.child_map("interference");
    inter.set("sm_contention", "false");
    inter.set("hbm_amplification", "0");
    inter.set("sm_comm_slowdown", "0");
    return n;
  }

  const Options& o_;
  std::ostream* out_;
  int rank_ = 0, size_ = 1;
  Budget budget_{};
};

}  // namespace

hardware::Profile measure_cpu(const Options& o) {
  init_mpi_if_needed();
  return CpuProfiler(o).run();
}

bool cpu_available() { return true; }

}  // namespace profiler
