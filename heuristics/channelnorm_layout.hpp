// The channel-norm layout: which kernel form a groupnorm / instancenorm group takes (cluster,
// cluster in one wave, split, per-group) and that form's geometry, from the problem's sizes, the
// target and the schedule overrides. Pure functions, tested on the CPU
// (tests/test_channelnorm.cpp); the emitters are in codegen/channelnorm/.
#pragma once

#include <cstdint>
#include <optional>

#include "heuristics/schedule.hpp"

namespace kiln {

// A channel norm as the layout sees it (codegen/emit_channelnorm.cpp fills it from the group).
struct ChannelNormProblem {
  int64_t batch = -1;    // N; -1: not known at compile time
  int64_t channels = 0;  // C
  int64_t groups = 0;    // G (C for instancenorm)
  int64_t spatial = -1;  // S, the product of the spatial dims; -1: symbolic
  int elem_bytes = 2;    // of the normalized input
  int vec = 8;           // its elements per 16-byte vector
  // The input is dense channels-last (strides C*S, 1, then row-major spatial times C) with static
  // C and S, and every output has its shape: the cluster and split forms need it.
  bool dense = false;
  bool prologue = false;  // elementwise nodes fused before the norm (the cluster form takes none)
  // Dense inputs of the input's vector width that the split form holds in registers: the
  // anchor's input, or the prologue's inputs (one without a prologue).
  int vector_inputs = 0;
};

// The target the kernels are sized for.
struct ChannelNormTarget {
  int sm = 90;
  int sm_count = 132;
  int64_t l2_bytes = int64_t{50} << 20;
};

enum class ChannelNormForm { Cluster, ClusterOneWave, Split, PerGroup };
const char* channelnorm_form_name(ChannelNormForm f);

// The cluster form (sm_90): a cluster of `cluster` CTAs per (sample, block of `block_channels`
// channels); each CTA copies its slice of `pixels` pixels into shared memory (in `copy_groups`
// cp.async commit groups of `copy_group_iters` iterations) and keeps it there. In the one-wave
// form, clusters of two CTAs (one per SM) keep the first `smem_iters` iterations in shared
// memory and read the others again from L2.
struct ChannelNormCluster {
  bool one_wave = false;       // the one-wave form
  int cluster = 0;             // CTAs per cluster (K)
  int64_t block_channels = 0;  // channels per cluster (CB): a multiple of Cg and of the vector
  int64_t blocks = 0;          // channel blocks per sample (C / CB)
  int64_t block_groups = 0;    // groups per block (CB / Cg)
  int vecs_per_pixel = 0;      // 16-byte vectors of one pixel's block channels (CB / V)
  int64_t lane_groups = 0;     // groups one thread's V lanes span (NGV), folded before the tree
  int64_t pixels = 0;          // per CTA (P = S / K)
  int rows = 1;                // pixel rows per iteration (m), a power of two
  int threads = 0;             // per CTA: vecs_per_pixel x rows
  int64_t iters = 0;           // iterations over the slice (ceil(P / m))
  int64_t smem_iters = 0;      // iterations held in shared memory (all but in the one-wave form)
  int64_t copy_group_iters = 0;
  int64_t copy_groups = 0;
  int ctas_per_sm = 1;     // the launch bounds' occupancy
  int64_t data_bytes = 0;  // shared memory of the slice
  int smem_bytes = 0;      // dynamic shared memory in all: the slice and the partial sums
};

// The split form (sm_80+, codegen/channelnorm/split.cpp): a statistics kernel and an apply
// kernel over each sample's S x C dense channels-last elements, split into `ctas` spans of
// `iters` chunks of threads x vecs 16-byte vectors, one CTA per span in both kernels.
struct ChannelNormSplit {
  bool ok = false;      // false: the shape does not fit (then the cluster or per-group path)
  int threads = 0;      // a multiple of C / gcd(C, vec): each thread's lanes keep fixed channels
  int vecs = 0;         // 16-byte vectors per thread (of each register-held input)
  int iters = 1;        // chunks of threads x vecs per CTA, the next loaded during the current
  int64_t ctas = 0;     // per sample
  int ctas_per_sm = 1;  // the occupancy the launch bounds ask registers for
  bool tail = false;    // the last CTA of a sample has a partial span
  // Workspace floats per sample: `ctas` partials (sum, sum of squares) per group, then the
  // sample's (mean, rstd) per group.
  int64_t workspace_floats = 0;
};

struct ChannelNormLayout {
  ChannelNormForm form = ChannelNormForm::PerGroup;
  ChannelNormCluster cluster;  // Cluster, ClusterOneWave
  ChannelNormSplit split;      // Split
  int pergroup_threads = 512;  // PerGroup: threads per CTA, one CTA per (sample, group)
};

// The rule: on sm_90 the cluster form where it fits (its one-wave variant where the grid would
// need several waves and the batch is known), else the split form where it fits, else
// per-group. channelnorm.algo=split|cluster|pergroup starts at that form of the order split,
// cluster, per-group and falls back to the ones after it.
ChannelNormLayout choose_channelnorm_layout(const ChannelNormProblem& p, const ChannelNormTarget& t,
                                            const ScheduleOverrides& o = {});

// The cluster form's geometry (the one-wave variant where the rule or channelnorm.onewave
// takes it); nullopt where the shape does not fit.
std::optional<ChannelNormCluster> choose_channelnorm_cluster(const ChannelNormProblem& p,
                                                             const ChannelNormTarget& t,
                                                             const ScheduleOverrides& o = {});
// `vector_inputs`: dense inputs held in registers (1 without a prologue).
ChannelNormSplit choose_channelnorm_split(int64_t channels, int64_t groups, int64_t spatial,
                                          int vec_elems, int vector_inputs, bool prologue, int sm,
                                          const ScheduleOverrides& o = {});

// The per-group form's threads per CTA for groups of `group_elems` elements (-1: symbolic).
int choose_channelnorm_pergroup(int64_t group_elems);

}  // namespace kiln
