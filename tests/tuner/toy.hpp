// defines: toy::model, toy::cluster — a model small enough that every kernel runs in one wave,
// on a cluster of `gpus` H100s with `hbm_bytes` of memory each, all of it usable (tests only)
#pragma once
#include "hardware/cluster.hpp"
#include "sim/model.hpp"

namespace toy {

inline sim::ModelSpec model() {
  return sim::parse_model(
      "name: toy\nlayers: 4\nhidden: 256\nheads: 4\nkv_heads: 4\nffn_hidden: 1024\nvocab: 1024\nseq_len: 128\n"
      "norm: layernorm\nactivation: gelu\nposition: learned\ntied_embeddings: true\n",
      "toy");
}

inline hardware::ClusterSpec cluster(int gpus, double hbm_bytes) {
  auto c = hardware::load_cluster("dgx-h100");
  c.nodes = 1;
  c.node.gpus_per_node = gpus;
  c.network.nics_per_node = gpus;
  c.gpu.hbm_capacity_bytes = hbm_bytes;
  // the hand derivations count what the model trains with: no CUDA context, no reserve
  c.memory.cuda_context_bytes = 0;
  c.memory.fragmentation_reserve = 0;
  return c;
}

}  // namespace toy
