// The cluster channel norm (sm_90; codegen/channelnorm/cluster.cpp, the one-wave form's L2 half
// in onewave.cpp). The per-group schedule reads Cg channels (20 bytes for f16 groupnorm(32) over
// 320 channels) per pixel at a C-element stride: every access wastes most of its sector, twice.
// Instead a cluster of K CTAs (portable size <= 8, compile-time __cluster_dims__, so a plain
// cuLaunchKernel launches it) owns one (n, block of CB channels), CB a multiple of Cg and of the
// 16-byte vector; each CTA copies its slice of S/K pixels x CB channels into shared memory with
// 16-byte cp.async (CB x element size bytes contiguous per pixel, whole sectors), exactly once
// from DRAM. The copies go in four commit groups, and the statistics start on the first pixels
// while the rest are in flight: one pass over values shifted by the group's first element
// (d = x - x0), per-channel partials of d and d^2 per thread (each thread's channel vector is
// fixed: threads = vectors per pixel x a power of two pixels), each thread's lanes folded per
// group, one shared-memory tree over pixels for both, per-group CTA partials, then one sum over
// the cluster's CTAs through distributed shared memory (mapa + ld.shared::cluster,
// barrier.cluster). Finally normalize + affine + epilogue from shared memory with 16-byte
// stores. Each thread only touches the shared vectors it copied itself, so the data needs no CTA
// barrier.
//
// The one-wave form ("..._g32_cluster2_onewave_..."; a batch size known at compile time): where
// the grid above would run in several waves of resident clusters, clusters of 2 CTAs, one CTA
// of up to 640 threads per SM, fit the whole grid on the SMs at once; each CTA keeps the first
// part of its iterations in shared memory, reads the rest into registers for the statistics
// after the copies have landed, and reads those again (from L2) for the stores, four vectors
// ahead of their four stores.
#pragma once

#include <string>

#include "codegen/channelnorm/channelnorm_group.hpp"

namespace kiln {

class ClusterKernel {
 public:
  ClusterKernel(const ChannelNormGroup& cn, const ChannelNormCluster& l);
  KernelSpec emit();

 private:
  // ---- cluster.cpp
  void index_setup();
  void copy_slice();
  void accumulate();  // the vector v's shifted values into the thread's sums
  void shared_statistics();
  void fold_and_tree();
  void cluster_statistics();
  void affine();
  // The stores of iterations [lo, hi): from shared memory, or (one-wave) read again from L2.
  void store_loop(int64_t lo, int64_t hi, bool from_l2);
  void store_lanes();  // normalize, epilogue and store the vector v of pixel p

  // ---- onewave.cpp
  // Opens the loops over iterations [lo, hi) of the L2 half, four at a time: their four 16-byte
  // loads, then a loop over the four (p defined when need_p) left open for the caller's body.
  void open_l2_batches(const char* i, int64_t lo, int64_t hi, int unroll, bool need_p);
  void l2_statistics();

  const ChannelNormGroup& cn_;
  const ChannelNormCluster& l_;
  const int V_;
  const std::string xp_;     // the input's parameter
  const std::string count_;  // elements per group, as a float literal
  std::string guard_;        // "p < P && " where the last pixel row is partial
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
};

}  // namespace kiln
