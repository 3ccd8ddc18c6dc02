// The cluster channel norm (see cluster_kernel.hpp): the slice's copies, the statistics from
// shared memory, the cluster's sums, the affine and the stores.
#include <algorithm>

#include "codegen/channelnorm/cluster_kernel.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

ClusterKernel::ClusterKernel(const ChannelNormGroup& cn, const ChannelNormCluster& l)
    : cn_(cn),
      l_(l),
      V_(vec_elems(cn.xd.dtype)),
      xp_(tensor_param(cn.in_t)),
      count_(fmt::format("{}.0f", cn.Cg * cn.S.value())),
      guard_(l.pixels % l.rows ? fmt::format("p < {} && ", l.pixels) : ""),
      gp_(cn.g, cn.grp),
      dp_(gp_.dims) {}

KernelSpec ClusterKernel::emit() {
  index_setup();
  copy_slice();
  shared_statistics();
  if (l_.smem_iters < l_.iters) l2_statistics();
  fold_and_tree();
  cluster_statistics();
  affine();
  // 4. Normalize, epilogue, store: the iterations read again from L2 first (their loads in
  // flight while the others' stores issue), then those in shared memory.
  if (l_.smem_iters < l_.iters) store_loop(l_.smem_iters, l_.iters, true);
  store_loop(0, l_.smem_iters, false);
  w_.line("kiln_cn_cluster_wait();");
  GroupKernel k = cn_.kernel(
      fmt::format("g{}_cluster{}{}", cn_.G, l_.cluster, l_.one_wave ? "_onewave" : ""),
      fmt::format("// cluster of {} CTAs per (n, {} channels); {} pixels x {} vectors per CTA, {} "
                  "threads\n",
                  l_.cluster, l_.block_channels, l_.pixels, l_.vecs_per_pixel, l_.threads),
      true);
  k.threads = l_.threads;
  k.min_blocks = l_.ctas_per_sm;
  k.cluster = l_.cluster;
  k.grid = cn_.X[0] * Dim(l_.blocks * l_.cluster);
  KernelSpec spec = group_kernel_spec(k, gp_, w_.str());
  spec.smem_bytes = l_.smem_bytes;
  return spec;
}

void ClusterKernel::index_setup() {
  const int64_t C = cn_.C;
  w_.line("extern __shared__ __align__(16) unsigned char kiln_smem[];");
  w_.line("uint4* const xs = reinterpret_cast<uint4*>(kiln_smem);");
  w_.line("float* const part = reinterpret_cast<float*>(kiln_smem + {});", l_.data_bytes);
  w_.line("__shared__ float gsum[{0}], gsq[{0}], gmean[{0}], grstd[{0}];", l_.block_groups);
  w_.line("const unsigned rank = kiln_cn_rank();");
  w_.line("const long long cl = blockIdx.x / {};", l_.cluster);
  w_.line("const long long n = cl / {};", l_.blocks);
  w_.line("const int t = threadIdx.x;");
  w_.line("const int j = t % {};  // channel vector within the block (fixed per thread)",
          l_.vecs_per_pixel);
  w_.line("const int pr = t / {};  // pixel row within an iteration", l_.vecs_per_pixel);
  w_.line("const int c0 = static_cast<int>(cl % {}) * {} + j * {};", l_.blocks, l_.block_channels,
          V_);
  w_.line("const long long p0 = static_cast<long long>(rank) * {};", l_.pixels);
  w_.line("const long long gbase0 = (n * {} + p0) * {} + c0;", cn_.S.value(), C);
}

// 1. Slice -> shared memory, in commit groups of iterations, so that the statistics start on
// the first pixels while the rest are in flight.
void ClusterKernel::copy_slice() {
  const int64_t per_group = l_.copy_group_iters;
  for (int64_t q = 0; q < l_.copy_groups; ++q) {
    w_.line("#pragma unroll");
    w_.open("for (int i = {}; i < {}; ++i) {{", q * per_group,
            std::min(l_.smem_iters, (q + 1) * per_group));
    w_.line("const int p = i * {} + pr;", l_.rows);
    w_.line(
        "if (p < {}) kiln_cn_cp16(xs + i * {} + t, {} + gbase0 + static_cast<long long>(p) * {});",
        l_.pixels, l_.threads, xp_, cn_.C);
    w_.close();
    w_.line("kiln_cn_cp_commit();");
  }
}

void ClusterKernel::accumulate() {
  w_.line("#pragma unroll");
  w_.line(
      "for (int l = 0; l < {}; ++l) {{ const float d = v[l] - x0[l]; acc[l] += d; acc2[l] += d * "
      "d; }}",
      V_);
}

// 2. Statistics in one pass over shifted values d = x - x0 (x0: the group's first element, read
// by every CTA of the cluster alike): sums of d and d^2 per lane, a shared-memory tree over the
// pixel rows for both at once, per-group CTA sums, then one sum over the cluster's CTAs. The
// shift keeps E[d^2] - E[d]^2 free of cancellation for a large mean.
void ClusterKernel::shared_statistics() {
  w_.line("const long long xg = n * {} * {};  // the sample's first pixel", cn_.S.value(), cn_.C);
  w_.line("float x0[{}];", V_);
  w_.line("#pragma unroll");
  w_.line("for (int l = 0; l < {0}; ++l) x0[l] = kiln_ld({1} + xg + (c0 + l) / {2} * {2});", V_,
          xp_, cn_.Cg);
  w_.line("float acc[{0}], acc2[{0}];", V_);
  w_.line("#pragma unroll");
  w_.line("for (int l = 0; l < {}; ++l) acc[l] = acc2[l] = 0.0f;", V_);
  const int64_t per_group = l_.copy_group_iters;
  for (int64_t q = 0; q < l_.copy_groups; ++q) {
    w_.line("kiln_cn_cp_wait<{}>();", l_.copy_groups - 1 - q);
    w_.line("#pragma unroll 2");
    w_.open("for (int i = {}; i < {}; ++i) {{", q * per_group,
            std::min(l_.smem_iters, (q + 1) * per_group));
    w_.line("const int p = i * {} + pr;", l_.rows);
    w_.line("if (p >= {}) break;", l_.pixels);
    w_.line("float v[{}];", V_);
    w_.line("kiln_unpack16(xs[i * {} + t], {}, v);", l_.threads, xp_);
    accumulate();
    w_.close();
  }
}

// Each thread's lanes folded per group, then the tree over the pixel rows.
void ClusterKernel::fold_and_tree() {
  const int64_t NGV = l_.lane_groups, Cg = cn_.Cg;
  const int T = l_.threads;
  w_.line("float* const part2 = part + {};", int64_t{T} * NGV);
  // Lane l belongs to the thread's group slot (j*V + l)/Cg - (j*V)/Cg (l itself for Cg == 1).
  w_.line("const int g0 = j * {} / {};", V_, Cg);
  w_.line("float gs[{0}], gq[{0}];", NGV);
  w_.line("#pragma unroll");
  w_.line("for (int k = 0; k < {}; ++k) gs[k] = gq[k] = 0.0f;", NGV);
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  w_.line("const int q = (j * {} + l) / {} - g0;", V_, Cg);
  w_.line("#pragma unroll");
  w_.line("for (int k = 0; k < {}; ++k) if (k == q) {{ gs[k] += acc[l]; gq[k] += acc2[l]; }}", NGV);
  w_.close();
  w_.line("#pragma unroll");
  w_.line(
      "for (int k = 0; k < {0}; ++k) {{ part[t * {0} + k] = gs[k]; part2[t * {0} + k] = gq[k]; "
      "}}",
      NGV);
  w_.line("__syncthreads();");
  for (int s = l_.rows / 2; s >= 1; s /= 2) {
    // Straight-line adds, not a strided loop over q = t, t + T, ...: NVVM and ptxas spend much
    // of the compile on such loops.
    const int nq = s * l_.vecs_per_pixel * static_cast<int>(NGV);
    for (int k = 0; k * T < nq; ++k) {
      const int q0 = k * T;
      const std::string cond = q0 + T <= nq ? "" : fmt::format("if (t < {}) ", nq - q0);
      w_.line("{0}{{ part[t + {1}] += part[t + {2}]; part2[t + {1}] += part2[t + {2}]; }}", cond,
              q0, q0 + nq);
    }
    w_.line("__syncthreads();");
  }
}

// Per-group CTA sums, the cluster's sums through distributed shared memory, mean and rstd.
void ClusterKernel::cluster_statistics() {
  const int64_t NG = l_.block_groups, NGV = l_.lane_groups, Cg = cn_.Cg;
  w_.open("if (t < {}) {{", NG);
  w_.line("float s = 0.0f, s2 = 0.0f;");
  {  // part[jj * NGV + q]: slot q of channel vector jj, group jj*V/Cg + q of the block
    w_.line("#pragma unroll");
    w_.open("for (int jj = 0; jj < {}; ++jj) {{", l_.vecs_per_pixel);
    w_.line("const int q = t - jj * {} / {};", V_, Cg);
    w_.line("if (q >= 0 && q < {0}) {{ s += part[jj * {0} + q]; s2 += part2[jj * {0} + q]; }}",
            NGV);
    w_.close();
  }
  w_.line("gsum[t] = s;");
  w_.line("gsq[t] = s2;");
  w_.close();
  w_.line("kiln_cn_cluster_sync();");
  w_.open("if (t < {}) {{", NG);
  w_.line("float s = 0.0f, s2 = 0.0f;");
  w_.open("for (unsigned k = 0; k < {}; ++k) {{", l_.cluster);
  w_.line("s += kiln_cn_ld_remote(gsum + t, k);");
  w_.line("s2 += kiln_cn_ld_remote(gsq + t, k);");
  w_.close();
  w_.line("const float md = s / {};  // mean of d", count_);
  w_.line("gmean[t] = kiln_ld({} + xg + (static_cast<int>(cl % {}) * {} + t * {})) + md;", xp_,
          l_.blocks, l_.block_channels, Cg);
  w_.line("grstd[t] = rsqrtf(fmaxf(s2 / {} - md * md, 0.0f) + {});", count_,
          cuda_float(cn_.A.attr_float("eps")));
  w_.close();
  w_.line("kiln_cn_cluster_arrive();  // done reading the peers' shared memory");
  w_.line("__syncthreads();");
}

// Per-lane affine: y = (x - mean) * a + b with a = rstd * scale (centered first: no
// cancellation for a large mean).
void ClusterKernel::affine() {
  w_.line("float mean[{}];", V_);
  w_.line("#pragma unroll");
  w_.line("for (int l = 0; l < {}; ++l) mean[l] = gmean[(j * {} + l) / {}];", V_, V_, cn_.Cg);
  w_.line("float ka[{0}], kb[{0}];", V_);
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  std::vector<std::string> c(cn_.r, "0");
  c[0] = "n";
  c[1] = "(c0 + l)";
  w_.line("const float rs = grstd[(j * {} + l) / {}];", V_, cn_.Cg);
  w_.line("const float a = {};",
          cn_.A.inputs.size() > 1 ? "rs * " + cn_.channel_param(1, c, dp_) : std::string("rs"));
  w_.line("ka[l] = a;");
  w_.line("kb[l] = {};",
          cn_.A.inputs.size() > 2 ? cn_.channel_param(2, c, dp_) : std::string("0.0f"));
  w_.close();
}

// The L2 iterations load four vectors before their four stores: a store's "memory" clobber keeps
// a later load from being hoisted above it, which would leave each load's L2 latency exposed.
void ClusterKernel::store_loop(int64_t lo, int64_t hi, bool from_l2) {
  if (from_l2) {
    open_l2_batches("i0", lo, hi, 1, true);
  } else {
    w_.line("#pragma unroll 2");
    w_.open("for (int i = {}; i < {}; ++i) {{", lo, hi);
    w_.line("const int p = i * {} + pr;", l_.rows);
    w_.line("if (p >= {}) break;", l_.pixels);
  }
  w_.line("const long long gbase = gbase0 + static_cast<long long>(p) * {};", cn_.C);
  w_.line("float v[{}];", V_);
  if (from_l2)
    w_.line("kiln_unpack16(r[k], {}, v);", xp_);
  else
    w_.line("kiln_unpack16(xs[i * {} + t], {}, v);", l_.threads, xp_);
  store_lanes();
  w_.close();
  if (from_l2) w_.close();
}

void ClusterKernel::store_lanes() {
  std::vector<int> vouts;
  for (int t : cn_.grp.outputs)
    if (vec_elems(cn_.g.tensor(t).desc.dtype) == V_ &&
        tensor_strides(cn_.g.tensor(t).desc) == cn_.strides) {
      vouts.push_back(t);
      w_.line("float o{}[{}];", t, V_);
    }
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  std::vector<std::string> c(cn_.r, "0");
  c[0] = "n";
  c[1] = "(c0 + l)";
  auto sc = decompose("(p0 + p)", cn_.spatial, row_major_strides(cn_.spatial), dp_);
  for (size_t k = 0; k < sc.size(); ++k) c[2 + k] = sc[k];
  std::map<std::string, std::string> pre;
  pre[cn_.identity_key(cn_.in_t)] = "v[l]";  // the epilogue reading the anchor's input: here
  ElementLoader ld{cn_.g, cn_.X, cn_.strides, "(gbase + l)", c, &dp_, "", pre};
  w_.line("const float y = (v[l] - mean[l]) * ka[l] + kb[l];");
  std::map<int, std::string> seed;
  seed[cn_.out_t] = "y";
  cn_.outputs(w_, ld, seed, vouts, false);
  w_.close();
  for (int t : vouts) w_.line("kiln_stv({} + gbase, o{});", tensor_param(t), t);
}

KernelSpec emit_channelnorm_cluster(const ChannelNormGroup& cn, const ChannelNormCluster& l) {
  return ClusterKernel(cn, l).emit();
}

}  // namespace kiln
