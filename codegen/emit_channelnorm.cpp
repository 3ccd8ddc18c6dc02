// ChannelNorm groups: groupnorm / instancenorm (statistics per (n, group) over the group's
// channels and all spatial positions), NCHW or NHWC, with an elementwise prologue and epilogue.
// Three schedules. The rule: on sm_90 the cluster path where it fits (no prologue), else the
// split path where it fits (NHWC, static channels and spatial size), else per-group;
// channelnorm.algo=split|cluster|pergroup picks one first.
//
// Split path (sm_80+, NHWC, static C and spatial size; "..._g32_split_stats_..." and
// "..._g32_split_apply_..."): two kernels sharing a workspace, with no CTA ever waiting for
// another. Each sample's S x C elements (contiguous) are split into B spans of `iters` chunks of
// threads x vecs 16-byte vectors, one CTA per span in both kernels (grid N*B); a thread keeps a
// chunk's vectors in registers while the next chunk's loads are in flight, and threads is a
// multiple of C / gcd(C, vec) so each lane's channel is fixed. The statistics kernel accumulates
// shifted sums (x - x0), x0 = the group's first element (every CTA loads the same, so the sums
// add up; no cancellation for a large mean), reduces them over the CTA in shared memory, and
// stores its per-group partials; the last CTA of the sample to arrive (a self-resetting counter
// per sample) adds the B partials in chunk order (deterministic) and stores the sample's mean
// and rstd. The apply kernel reads those, re-reads its span (CTAs and chunks in reverse order,
// the statistics kernel having asked L2 to keep the input with evict_last), normalizes, applies
// the affine and the epilogue, and stores with 16-byte vectors. DRAM sees the input twice where
// L2 does not keep it. Measured (run 22, 16x320x64x64 f16 on the H200): 51.0 us, statistics
// 25.3 us and apply 28.1 us timed alone, against the cluster path's 47.9.
//
// Per-group fallback: one CTA per (n, group). Pass 1 accumulates shifted sums (x - x0) and
// (x - x0)^2 (x0 = the group's first element, which keeps the variance free of cancellation for
// data with a large mean) and reduces them over the CTA; pass 2 re-reads the group, normalizes,
// applies the per-channel affine and the epilogue, and stores. A group is at most a few hundred
// KB and the CTAs resident at once cover far less than the 50-60 MB L2 of an H100/H200, so the
// second read is served from L2: DRAM sees the input once. Elements are walked in memory order
// (NHWC: the group's channels of one pixel, then the next pixel; NCHW: one contiguous block), so
// adjacent threads touch adjacent addresses ("..._g32_pergroup_...").
//
// Cluster path (sm_90, NHWC, static C and spatial size, no prologue; "..._g32_cluster8_..."):
// the per-group schedule reads Cg channels (20 bytes for f16 groupnorm(32) over 320 channels) per
// pixel at a C-element stride: every access wastes most of its sector, twice. Instead a cluster of
// K CTAs (portable size <= 8, compile-time __cluster_dims__, so a plain cuLaunchKernel launches
// it) owns one (n, block of CB channels), CB a multiple of Cg and of the 16-byte vector; each CTA
// copies its slice of S/K pixels x CB channels (<= 96 KB) into shared memory with 16-byte
// cp.async (CB x element size bytes contiguous per pixel, whole sectors), exactly once from DRAM.
// The copies go in four commit groups, and the statistics start on the first pixels while the
// rest are in flight: one pass over values shifted by the group's first element (d = x - x0, as
// the split path), per-channel partials of d and d^2 per thread (each thread's channel vector is
// fixed: threads = vectors per pixel x a power of two pixels), one shared-memory tree over pixels
// for both, per-group CTA partials, then one sum over the cluster's CTAs through distributed
// shared memory (mapa + ld.shared::cluster, barrier.cluster). Finally normalize + affine +
// epilogue from shared memory with 16-byte stores. Each thread only touches the shared vectors it
// copied itself, so the data needs no CTA barrier. Two CTAs per SM (launch bounds, <= ~110 KB
// shared each). Measured for 16x320x64x64 f16 on an H200: 0.0430-0.0435 ms, against 0.0450-0.0452
// with two passes (mean, then the centered sum of squares, two cluster barriers; run 60), about
// 46 % of copy bandwidth: loads, reductions and stores of a CTA still run largely one after
// another, and two CTAs per SM do not overlap them enough. A register-resident
// schedule whose CTAs waited for their sample's other CTAs measured slower (19.8 %, run 17) and
// was replaced by the split path. A persistent form (clusters walking several units, two slices
// per CTA, the next unit's copies in flight) measured 1.2-1.9x slower (runs 57-58): one CTA of 10
// warps per SM does not overlap them, and not every cluster of a full wave is resident.
//
// One-wave cluster form ("..._g32_cluster2_onewave_..."; sm_90, a batch size known at compile
// time): the form above runs in waves when its grid exceeds the resident clusters. For
// 16x320x64x64 f16, 512 CTAs against 240 resident (30 clusters of 8: the GPCs leave some SMs'
// slots unusable) make 2.13 waves, and the last 4 clusters run alone for ~8 us (run 62's
// %globaltimer timeline, bench/groupnorm_probe.cu). Where clusters of 2 CTAs, one CTA of up to
// 640 threads per SM, fit the whole grid on the SMs at once, and half the input fits in half the
// L2, this form is used instead: each CTA keeps the first half of its iterations in shared memory
// (cp.async, as above), reads the second half into registers for the statistics after the copies
// have landed, and reads that half again (from L2) for the stores, four vectors ahead of their
// four stores. Both forms fold each thread's lanes per group before the partial-sum tree.
// Measured for 16x320x64x64 f16 (runs 71-75): the whole graph 0.0365-0.0380 ms against
// 0.0426-0.0433 for the form above; its phases load 15.4 us (DRAM-bound), reduce + cluster sync
// 3.0, store 12.7 (run 72).
#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

namespace {

constexpr int kClusterMax = 8;              // portable cluster size
constexpr int64_t kSliceBytes = 96 * 1024;  // shared data per CTA (two CTAs per SM)
constexpr int kClusterThreads = 512;        // at most, per CTA
// At most, per CTA of the one-wave form (one per SM): 20 warps, whose 96 registers each the
// measured kernel needs (95); 1024 threads would leave 64.
constexpr int kWaveThreads = 640;
constexpr int64_t kGroups = 4;  // cp.async commit groups per slice

// The load (as f32) of the channel-norm's per-channel parameter `slot` (1: scale, 2: shift) at
// element coordinates `c` of the normalized tensor: only the channel coordinate (dim 1) indexes it.
std::string channel_param(const Graph& g, const Node& A, size_t slot,
                          const std::vector<std::string>& c, DimParams& dp) {
  const int t = A.inputs[slot];
  std::vector<int> map(c.size(), -1);
  map[1] = 0;
  return load_f32(tensor_param(t) + " + " + operand_offset(g.tensor(t).desc, map, c, dp));
}

// The cluster schedule (see the file comment); false when the shape is not covered.
bool emit_cluster(const EmitContext& cx, const FusionGroup& grp, bool no_prologue,
                  bool channels_last, KernelSpec* out) {
  const Graph& g = cx.graph;
  const Node& A = g.nodes()[grp.anchor];
  const int in_t = A.inputs[0], out_t = A.outputs[0];
  const TensorDesc& xd = g.tensor(in_t).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());
  if (cx.opts.sm < 90 || !no_prologue || !channels_last || r < 3 || !X[1].is_static()) return false;
  if (std::find(grp.inputs.begin(), grp.inputs.end(), in_t) == grp.inputs.end()) return false;
  Shape spatial(X.begin() + 2, X.end());
  const Dim Sd = shape_numel(spatial);
  if (!Sd.is_static()) return false;
  const int64_t C = X[1].value(), S = Sd.value();
  const int64_t G = A.op == OpKind::Groupnorm ? A.attr_int("groups") : C;
  const int64_t Cg = C / G;
  // Dense NHWC input: strides C*S, 1, then row-major spatial times C.
  Shape xs = tensor_strides(xd);
  int64_t want = C;
  for (int d = r - 1; d >= 2; --d) {
    if (!xs[d].is_static() || xs[d].value() != want) return false;
    want *= X[d].value();
  }
  if (!xs[0].is_static() || xs[0].value() != C * S) return false;
  for (int t : grp.outputs)
    if (g.tensor(t).desc.shape != X) return false;
  const int esize = dtype_size(xd.dtype);
  const int V = vec_elems(xd.dtype);
  if (C % V != 0 || S < 1 || S > (int64_t{1} << 30)) return false;
  // Channel block: the smallest multiple of lcm(Cg, V) dividing C, preferring whole sectors.
  const int64_t base = std::lcm(Cg, static_cast<int64_t>(V));
  const ScheduleOverrides& ov = cx.opts.schedule;
  int64_t CB = 0;
  if (ov.channelnorm_cb && C % ov.channelnorm_cb == 0 && ov.channelnorm_cb % base == 0)
    CB = ov.channelnorm_cb;
  for (int64_t cb = base; cb <= C && !CB; cb += base)
    if (C % cb == 0 && (cb * esize) % 32 == 0) CB = cb;
  if (!CB) CB = C % base == 0 ? base : 0;
  if (!CB) return false;
  // Cluster size: the largest K <= 8 dividing S whose slice fits.
  const int64_t slice_max =
      ov.channelnorm_slice_kb ? int64_t{ov.channelnorm_slice_kb} * 1024 : kSliceBytes;
  const int k_max = ov.channelnorm_cluster ? ov.channelnorm_cluster : kClusterMax;
  int K = 0;
  for (int k = k_max; k >= 1 && !K; k /= 2)
    if (S % k == 0 && (S / k) * CB * esize <= slice_max) K = k;
  if (!K) return false;
  const int VPP = static_cast<int>(CB / V);  // vectors per pixel row
  if (VPP > kClusterThreads) return false;
  const int64_t NG = CB / Cg, NCB = C / CB;
  // Groups one thread's V lanes span (its channels start at a multiple of V): their sums are
  // folded per group before the shared-memory tree, which then adds NGV floats per thread and
  // statistic instead of V (one-wave form 41.0 -> 36.1 us, runs 69-71).
  const int64_t NGV = Cg % V == 0   ? 1
                      : V % Cg == 0 ? V / Cg
                                    : std::min<int64_t>(V, (V - 1) / Cg + 2);
  // The layout for k CTAs per cluster of at most max_t threads: P pixels per CTA, m pixel rows per
  // iteration (a power of two: the shared-memory tree), T threads, ITER iterations.
  struct Layout {
    int64_t P, ITER;
    int m, T;
  };
  auto layout = [&](int k, int max_t) {
    Layout l{S / k, 0, 1, 0};
    while (VPP * l.m * 2 <= max_t && l.m < l.P) l.m *= 2;
    l.T = VPP * l.m;
    l.ITER = (l.P + l.m - 1) / l.m;
    return l;
  };
  Layout L = layout(K, kClusterThreads);
  int64_t ISM = L.ITER;  // iterations kept in shared memory; the rest are read again from L2
  // CTAs per SM: as many as shared memory holds (228 KiB per SM, 1 KiB reserved per CTA), at
  // no fewer than 64 registers per thread.
  const int64_t smem_all = L.P * CB * esize + 2 * int64_t{L.T} * NGV * 4;
  int per_sm = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(233472 / (smem_all + 1024 + 256), 65536 / (L.T * 64))));
  // One wave (see the file comment): where the grid above needs more than one wave of resident
  // clusters, clusters of 2 CTAs, one CTA per SM, half of each slice in shared memory and half
  // read again from L2, so that every CTA is resident at once. Needs the batch size (a static
  // shape or a shape-specialized kernel) and at most half the L2 for the re-read half.
  const int wave_ov = ov.channelnorm_onewave;
  const bool wave_rule = wave_ov == 0 && !ov.channelnorm_cluster && !ov.channelnorm_slice_kb;
  const int64_t units = X[0].is_static() ? X[0].value() * NCB : -1;
  // Clusters of 8 pack into the GPCs with ~10 % of the CTA slots left over (30 of 33 resident on
  // the H200 at two CTAs per SM, run 62).
  const bool many_waves = units > 0 && units * K > int64_t{cx.opts.sm_count} * per_sm * 9 / 10;
  bool one_wave = false;
  if (S % 2 == 0 && (wave_ov == 1 || (wave_rule && many_waves && units * 2 <= cx.opts.sm_count))) {
    const Layout wl = layout(2, kWaveThreads);
    // Half of the iterations in shared memory: 16 of 32 measured faster than 12 or 20 (run 65).
    const int64_t row = int64_t{wl.T} * 16;  // bytes of one iteration's vectors
    const int64_t budget = 232448 - 1024 - 256 - 2 * int64_t{wl.T} * NGV * 4;
    const int64_t ism =
        std::min<int64_t>({wl.ITER, std::max<int64_t>(1, wl.ITER / 2), budget / row});
    const int64_t l2_share = units > 0 ? units * 2 * (wl.ITER - ism) * row : 0;
    one_wave = ism >= 1 && (wave_ov == 1 || 2 * l2_share <= cx.opts.l2_bytes);
    if (one_wave) {
      L = wl;
      K = 2;
      ISM = ism;
      per_sm = 1;
    }
  }
  const int64_t P = L.P, ITER = L.ITER;
  const int m = L.m, T = L.T;
  // Rows below ISM are whole when some are read from L2; else the slice's own size.
  const int64_t data_bytes = ISM < ITER ? ISM * T * 16 : P * VPP * 16;
  const int smem = static_cast<int>(data_bytes + 2 * int64_t{T} * NGV * 4);

  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  std::string name =
      group_kernel_name(g, grp, fmt::format("g{}_cluster{}{}", G, K, one_wave ? "_onewave" : ""));
  const std::string xp = tensor_param(in_t);
  const std::string count = fmt::format("{}.0f", Cg * S);
  std::vector<int> ident(r);
  std::iota(ident.begin(), ident.end(), 0);

  Writer w;
  w.line("// group {}: {} ({} groups of {} channels) over {}", grp.id, op_name(A.op), G, Cg,
         xd.str());
  w.line("// cluster of {} CTAs per (n, {} channels); {} pixels x {} vectors per CTA, {} threads",
         K, CB, P, VPP, T);
  w.open(
      "extern \"C\" __global__ void __cluster_dims__({}, 1, 1) __launch_bounds__({}, {}) "
      "{}(KILN_PARAMS) {{",
      K, T, per_sm, name);
  w.line("extern __shared__ __align__(16) unsigned char kiln_smem[];");
  w.line("uint4* const xs = reinterpret_cast<uint4*>(kiln_smem);");
  w.line("float* const part = reinterpret_cast<float*>(kiln_smem + {});", data_bytes);
  w.line("__shared__ float gsum[{0}], gsq[{0}], gmean[{0}], grstd[{0}];", NG);
  w.line("const unsigned rank = kiln_cn_rank();");
  w.line("const long long cl = blockIdx.x / {};", K);
  w.line("const long long n = cl / {};", NCB);
  w.line("const int t = threadIdx.x;");
  w.line("const int j = t % {};  // channel vector within the block (fixed per thread)", VPP);
  w.line("const int pr = t / {};  // pixel row within an iteration", VPP);
  w.line("const int c0 = static_cast<int>(cl % {}) * {} + j * {};", NCB, CB, V);
  w.line("const long long p0 = static_cast<long long>(rank) * {};", P);
  w.line("const long long gbase0 = (n * {} + p0) * {} + c0;", S, C);
  // 1. Slice -> shared memory, in kGroups commit groups of iterations, so that the statistics
  // start on the first pixels while the rest are in flight.
  const int64_t per_group = (ISM + kGroups - 1) / kGroups;
  const int64_t groups = (ISM + per_group - 1) / per_group;
  for (int64_t q = 0; q < groups; ++q) {
    w.line("#pragma unroll");
    w.open("for (int i = {}; i < {}; ++i) {{", q * per_group, std::min(ISM, (q + 1) * per_group));
    w.line("const int p = i * {} + pr;", m);
    w.line(
        "if (p < {}) kiln_cn_cp16(xs + i * {} + t, {} + gbase0 + static_cast<long long>(p) * {});",
        P, T, xp, C);
    w.close();
    w.line("kiln_cn_cp_commit();");
  }
  // 2. Statistics in one pass over shifted values d = x - x0 (x0: the group's first element,
  // read by every CTA of the cluster alike): sums of d and d^2 per lane, a shared-memory tree
  // over the pixel rows for both at once, per-group CTA sums, then one sum over the cluster's
  // CTAs. The shift keeps E[d^2] - E[d]^2 free of cancellation for a large mean.
  w.line("const long long xg = n * {} * {};  // the sample's first pixel", S, C);
  w.line("float x0[{}];", V);
  w.line("#pragma unroll");
  w.line("for (int l = 0; l < {0}; ++l) x0[l] = kiln_ld({1} + xg + (c0 + l) / {2} * {2});", V, xp,
         Cg);
  w.line("float acc[{0}], acc2[{0}];", V);
  w.line("#pragma unroll");
  w.line("for (int l = 0; l < {}; ++l) acc[l] = acc2[l] = 0.0f;", V);
  const std::string guard = P % m ? fmt::format("p < {} && ", P) : "";
  // Adds the vector v's shifted values to the thread's sums.
  auto accumulate = [&] {
    w.line("#pragma unroll");
    w.line(
        "for (int l = 0; l < {}; ++l) {{ const float d = v[l] - x0[l]; acc[l] += d; acc2[l] += d * "
        "d; }}",
        V);
  };
  // Opens the loops over iterations [lo, hi) of the L2 half, four at a time: their four 16-byte
  // loads, then a loop over the four (p defined when need_p) left open for the caller's body.
  auto open_l2_batches = [&](const char* i, int64_t lo, int64_t hi, int unroll, bool need_p) {
    w.line("#pragma unroll {}", unroll);
    w.open("for (int {0} = {1}; {0} < {2}; {0} += 4) {{", i, lo, hi);
    w.line("uint4 r[4];");
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < 4; ++k) {{");
    w.line("const int p = ({} + k) * {} + pr;", i, m);
    w.line(
        "if ({}{} + k < {}) r[k] = kiln_ld16_plain({} + gbase0 + static_cast<long long>(p) * {});",
        guard, i, hi, xp, C);
    w.close();
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < 4; ++k) {{");
    if (need_p) w.line("const int p = ({} + k) * {} + pr;", i, m);
    w.line("if (!({}{} + k < {})) break;", guard, i, hi);
  };
  for (int64_t q = 0; q < groups; ++q) {
    w.line("kiln_cn_cp_wait<{}>();", groups - 1 - q);
    w.line("#pragma unroll 2");
    w.open("for (int i = {}; i < {}; ++i) {{", q * per_group, std::min(ISM, (q + 1) * per_group));
    w.line("const int p = i * {} + pr;", m);
    w.line("if (p >= {}) break;", P);
    w.line("float v[{}];", V);
    w.line("kiln_unpack16(xs[i * {} + t], {}, v);", T, xp);
    accumulate();
    w.close();
  }
  if (ISM < ITER) {
    // Then the L2 iterations, four loads in flight per thread, after the copies have landed:
    // measured faster than all of them issued with the copies (runs 68-69: the load phase
    // 18.1 against 21.2 us).
    w.line("// iterations {}..{}: from global memory now, and again for the stores (from L2)", ISM,
           ITER - 1);
    open_l2_batches("i", ISM, ITER, 4, !guard.empty());
    w.line("float v[{}];", V);
    w.line("kiln_unpack16(r[k], {}, v);", xp);
    accumulate();
    w.close();
    w.close();
  }
  w.line("float* const part2 = part + {};", int64_t{T} * NGV);
  {
    // Lane l belongs to the thread's group slot (j*V + l)/Cg - (j*V)/Cg (l itself for Cg == 1).
    w.line("const int g0 = j * {} / {};", V, Cg);
    w.line("float gs[{0}], gq[{0}];", NGV);
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) gs[k] = gq[k] = 0.0f;", NGV);
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l) {{", V);
    w.line("const int q = (j * {} + l) / {} - g0;", V, Cg);
    w.line("#pragma unroll");
    w.line("for (int k = 0; k < {}; ++k) if (k == q) {{ gs[k] += acc[l]; gq[k] += acc2[l]; }}",
           NGV);
    w.close();
    w.line("#pragma unroll");
    w.line(
        "for (int k = 0; k < {0}; ++k) {{ part[t * {0} + k] = gs[k]; part2[t * {0} + k] = gq[k]; "
        "}}",
        NGV);
  }
  w.line("__syncthreads();");
  for (int s = m / 2; s >= 1; s /= 2) {
    // Straight-line adds, not a strided loop over q = t, t + T, ...: NVVM and ptxas spent
    // ~65 ms of a 280 ms compile on such loops.
    const int nq = s * VPP * static_cast<int>(NGV);
    for (int k = 0; k * T < nq; ++k) {
      const int q0 = k * T;
      const std::string cond = q0 + T <= nq ? "" : fmt::format("if (t < {}) ", nq - q0);
      w.line("{0}{{ part[t + {1}] += part[t + {2}]; part2[t + {1}] += part2[t + {2}]; }}", cond, q0,
             q0 + nq);
    }
    w.line("__syncthreads();");
  }
  w.open("if (t < {}) {{", NG);
  w.line("float s = 0.0f, s2 = 0.0f;");
  {  // part[jj * NGV + q]: slot q of channel vector jj, group jj*V/Cg + q of the block
    w.line("#pragma unroll");
    w.open("for (int jj = 0; jj < {}; ++jj) {{", VPP);
    w.line("const int q = t - jj * {} / {};", V, Cg);
    w.line("if (q >= 0 && q < {0}) {{ s += part[jj * {0} + q]; s2 += part2[jj * {0} + q]; }}", NGV);
    w.close();
  }
  w.line("gsum[t] = s;");
  w.line("gsq[t] = s2;");
  w.close();
  w.line("kiln_cn_cluster_sync();");
  w.open("if (t < {}) {{", NG);
  w.line("float s = 0.0f, s2 = 0.0f;");
  w.open("for (unsigned k = 0; k < {}; ++k) {{", K);
  w.line("s += kiln_cn_ld_remote(gsum + t, k);");
  w.line("s2 += kiln_cn_ld_remote(gsq + t, k);");
  w.close();
  w.line("const float md = s / {};  // mean of d", count);
  w.line("gmean[t] = kiln_ld({} + xg + (static_cast<int>(cl % {}) * {} + t * {})) + md;", xp, NCB,
         CB, Cg);
  w.line("grstd[t] = rsqrtf(fmaxf(s2 / {} - md * md, 0.0f) + {});", count,
         cuda_float(A.attr_float("eps")));
  w.close();
  w.line("kiln_cn_cluster_arrive();  // done reading the peers' shared memory");
  w.line("__syncthreads();");
  w.line("float mean[{}];", V);
  w.line("#pragma unroll");
  w.line("for (int l = 0; l < {}; ++l) mean[l] = gmean[(j * {} + l) / {}];", V, V, Cg);
  // Per-lane affine: y = (x - mean) * a + b with a = rstd * scale (centered first: no
  // cancellation for a large mean).
  w.line("float ka[{0}], kb[{0}];", V);
  w.line("#pragma unroll");
  w.open("for (int l = 0; l < {}; ++l) {{", V);
  {
    std::vector<std::string> c(r, "0");
    c[0] = "n";
    c[1] = "(c0 + l)";
    auto param = [&](size_t slot) { return channel_param(g, A, slot, c, dp); };
    w.line("const float rs = grstd[(j * {} + l) / {}];", V, Cg);
    w.line("const float a = {};", A.inputs.size() > 1 ? "rs * " + param(1) : std::string("rs"));
    w.line("ka[l] = a;");
    w.line("kb[l] = {};", A.inputs.size() > 2 ? param(2) : std::string("0.0f"));
  }
  w.close();
  // 4. Normalize, epilogue, store: the iterations read again from L2 first (their loads in
  // flight while the others' stores issue), then those in shared memory.
  // The L2 iterations load four vectors before their four stores: a store's "memory" clobber
  // keeps a later load from being hoisted above it, which would leave each load's L2 latency
  // exposed.
  auto store_loop = [&](int64_t lo, int64_t hi, bool from_l2) {
    if (from_l2) {
      open_l2_batches("i0", lo, hi, 1, true);
    } else {
      w.line("#pragma unroll 2");
      w.open("for (int i = {}; i < {}; ++i) {{", lo, hi);
      w.line("const int p = i * {} + pr;", m);
      w.line("if (p >= {}) break;", P);
    }
    w.line("const long long gbase = gbase0 + static_cast<long long>(p) * {};", C);
    w.line("float v[{}];", V);
    if (from_l2)
      w.line("kiln_unpack16(r[k], {}, v);", xp);
    else
      w.line("kiln_unpack16(xs[i * {} + t], {}, v);", T, xp);
    std::vector<int> vouts;
    for (int t : grp.outputs)
      if (vec_elems(g.tensor(t).desc.dtype) == V && tensor_strides(g.tensor(t).desc) == xs) {
        vouts.push_back(t);
        w.line("float o{}[{}];", t, V);
      }
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l) {{", V);
    {
      std::vector<std::string> c(r, "0");
      c[0] = "n";
      c[1] = "(c0 + l)";
      auto sc = decompose("(p0 + p)", spatial, row_major_strides(spatial), dp);
      for (size_t k = 0; k < sc.size(); ++k) c[2 + k] = sc[k];
      std::map<std::string, std::string> pre;
      std::string key = fmt::format("{}", in_t);
      for (int i = 0; i < r; ++i) key += fmt::format(",{}", i);
      pre[key] = "v[l]";  // the epilogue reading the anchor's input: already here
      ElementLoader ld{g, X, xs, "(gbase + l)", c, &dp, "", pre};
      w.line("const float y = (v[l] - mean[l]) * ka[l] + kb[l];");
      std::map<int, std::string> seed;
      seed[out_t] = "y";
      PointwiseEmitter pe{g, ld.fn(), seed, ""};
      std::vector<int> epilogue;
      for (int nd : grp.nodes)
        if (nd != grp.anchor) epilogue.push_back(nd);
      pe.emit(w, epilogue);
      for (int t : grp.outputs) {
        if (std::find(vouts.begin(), vouts.end(), t) != vouts.end())
          w.line("o{}[l] = {};", t, pe.values.at(t));
        else
          w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
      }
    }
    w.close();
    for (int t : vouts) w.line("kiln_stv({} + gbase, o{});", tensor_param(t), t);
    w.close();
    if (from_l2) w.close();
  };
  if (ISM < ITER) store_loop(ISM, ITER, true);
  store_loop(0, ISM, false);
  w.line("kiln_cn_cluster_wait();");
  w.close();

  *out =
      group_kernel_spec(name, w, gp, T, X[0] * Dim(NCB * K), device_file("kiln_channelnorm.cuh"));
  out->smem_bytes = smem;
  return true;
}

// The split schedule (see the file comment): a statistics kernel and an apply kernel; false when
// the shape is not covered.
bool emit_split(const EmitContext& cx, const FusionGroup& grp, const std::vector<int>& prologue,
                const std::vector<int>& epilogue, std::vector<KernelSpec>* out) {
  const Graph& g = cx.graph;
  const Node& A = g.nodes()[grp.anchor];
  const int in_t = A.inputs[0], out_t = A.outputs[0];
  const TensorDesc& xd = g.tensor(in_t).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());
  if (r < 3) return false;
  for (int d = 1; d < r; ++d)
    if (!X[d].is_static()) return false;
  Shape spatial(X.begin() + 2, X.end());
  const int64_t C = X[1].value(), S = shape_numel(spatial).value();
  const int64_t G = A.op == OpKind::Groupnorm ? A.attr_int("groups") : C;
  const int64_t Cg = C / G;
  // The iteration order: dense channels-last (strides C*S, 1, then row-major spatial times C).
  Shape ds(r, Dim(1));
  int64_t want = C;
  for (int d = r - 1; d >= 2; --d) {
    ds[d] = Dim(want);
    want *= X[d].value();
  }
  ds[0] = Dim(C * S);
  if (tensor_strides(xd) != ds) return false;
  for (int t : grp.outputs)
    if (g.tensor(t).desc.shape != X) return false;
  const int V = vec_elems(xd.dtype);
  auto dense = [&](int t) {
    const TensorDesc& d = g.tensor(t).desc;
    return d.shape == X && tensor_strides(d) == ds && vec_elems(d.dtype) == V;
  };
  // Held in registers as raw 16-byte vectors: the anchor's input, or the prologue's dense inputs.
  std::vector<int> vin, vout;
  for (int t : grp.inputs) {
    bool used = t == in_t;
    for (int nd : prologue)
      for (int i : g.nodes()[nd].inputs) used = used || i == t;
    if (used && dense(t)) vin.push_back(t);
  }
  if (prologue.empty() && vin.empty()) return false;
  for (int t : grp.outputs)
    if (dense(t)) vout.push_back(t);
  const ChannelNormSplit sch = choose_channelnorm_split(
      C, G, S, V, static_cast<int>(vin.size()), !prologue.empty(), cx.opts.sm, cx.opts.schedule);
  if (!sch.ok) return false;
  const int T = sch.threads, NV = sch.vecs, L = sch.iters;
  const int64_t B = sch.ctas, SV = C * S / V, chunk = int64_t{T} * NV;
  const bool tail = SV % (chunk * L) != 0;  // the last CTA of a sample has a partial span
  // Workspace floats per sample: B chunk partials (sum, sum of squares) per group, then the
  // sample's (mean, rstd) per group.
  const int64_t parts = B * G * 2, per_sample = parts + 2 * G;
  const std::string count = fmt::format("{}.0f", Cg * S);
  std::vector<int> ident(r);
  std::iota(ident.begin(), ident.end(), 0);
  auto identity_key = [&](int t) {
    std::string k = fmt::format("{}", t);
    for (int i = 0; i < r; ++i) k += fmt::format(",{}", i);
    return k;
  };

  for (int phase = 0; phase < 2; ++phase) {
    const bool apply = phase == 1;
    GroupParams gp(g, grp);
    DimParams& dp = gp.dims;
    const std::string name =
        group_kernel_name(g, grp, fmt::format("g{}_split_{}", G, apply ? "apply" : "stats"));
    // Coordinates of the element at channel `c`, pixel `p` of sample n.
    auto coords = [&](const std::string& c, const std::string& p) {
      std::vector<std::string> cs(r, "0");
      cs[0] = "n";
      cs[1] = c;
      auto sc = decompose(p, spatial, row_major_strides(spatial), dp);
      for (size_t k = 0; k < sc.size(); ++k) cs[2 + k] = sc[k];
      return cs;
    };
    Writer w;
    // Lane l of vector i: element e = vi * V + l of the sample, channel e % C (fixed per thread
    // and lane: threads * V is a multiple of C).
    const std::string lane_ch = C % V == 0 ? "(c0 + l)" : fmt::format("((c0 + l) % {})", C);
    const std::string lane_pix = fmt::format("((vi * {} + l) / {})", V, C);
    const std::string lane_lin = fmt::format("(sbase + vi * {} + l)", V);
    // A loader for one lane: the register-held inputs from their unpacked vectors a<t>_1.
    std::map<std::string, std::string> lane_pre;
    for (int t : vin) lane_pre[identity_key(t)] = fmt::format("a{}_1[l]", t);
    auto lane_loader = [&] {
      return ElementLoader{g, X, ds, lane_lin, coords(lane_ch, lane_pix), &dp, "", lane_pre};
    };
    // The prologue for one element; returns the anchor input's value, all values in `vals`.
    auto element = [&](ElementLoader& ld, std::map<int, std::string>* vals) {
      PointwiseEmitter pe{g, ld.fn(), {}, ""};
      pe.emit(w, prologue);
      *vals = pe.values;
      if (vals->count(in_t)) return vals->at(in_t);
      auto it = ld.cache.find(identity_key(in_t));
      std::string v = it != ld.cache.end()
                          ? it->second
                          : load_f32(tensor_param(in_t) + " + " + ld.offset(in_t, ident));
      (*vals)[in_t] = v;
      return v;
    };
    // Loops over this thread's vectors, unpacking the register-held inputs; `lane` emits the
    // body of the per-lane loop.
    auto over_vectors = [&](const std::function<void()>& before, const std::function<void()>& lane,
                            const std::function<void()>& after) {
      w.line("#pragma unroll");
      w.open("for (int i = 0; i < {}; ++i) {{", NV);
      w.line("const long long vi = vbase + i * {} + t;", T);
      if (tail) w.open("if (vi < {}) {{", SV);
      for (int t : vin) {
        w.line("float a{}_1[{}];", t, V);
        w.line("kiln_unpack16(a{}_0[i], {}, a{}_1);", t, tensor_param(t), t);
      }
      before();
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < {}; ++l) {{", V);
      lane();
      w.close();
      after();
      if (tail) w.close();
      w.close();
    };

    w.line("// group {}: {} ({} groups of {} channels) over {}", grp.id, op_name(A.op), G, Cg,
           xd.str());
    w.line("// split, {}: {} CTAs per sample, each {} chunk{} of {} threads x {} vectors{}",
           apply ? "apply" : "statistics", B, L, L > 1 ? "s" : "", T, NV,
           sch.hints ? ", L2 policies" : "");
    w.open(
        "extern \"C\" __global__ void __launch_bounds__({}, {}) {}(KILN_PARAMS, float* "
        "__restrict__ kc_ws{}) {{",
        T, sch.ctas_per_sm, name, !apply && B > 1 ? ", unsigned* __restrict__ kc_cnt" : "");
    if (apply) {
      w.line("__shared__ float gmean[{0}], grstd[{0}];", G);
      w.line("// reversed: the chunks the statistics kernel read last are the likeliest in L2");
    }
    w.line("const long long bid = {};",
           apply ? "static_cast<long long>(gridDim.x) - 1 - blockIdx.x" : "blockIdx.x");
    w.line("const long long n = bid / {};", B);
    w.line("const int t = threadIdx.x;");
    w.line("const long long sbase = n * {};  // first element of the sample", C * S);
    w.line("const long long vbase0 = (bid % {}) * {};  // this CTA's span", B, chunk * L);
    w.line("const int c0 = t * {} % {};  // channel of lane 0", V, C);
    w.line("float* const ws = kc_ws + n * {};  // the sample's partials, then its mean and rstd",
           per_sample);
    // 1. Every load of the chunk in flight at once. The statistics kernel asks L2 to keep the
    // input (evict_last) for the apply kernel's re-read, which marks it evict_first again.
    if (sch.hints)
      w.line("const unsigned long long pol = kiln_cn_policy_{}();",
             apply ? "evict_first" : "evict_last");
    // Loads of the chunk at `base` into a<t>_<buf> (all in flight at once).
    auto load_chunk = [&](int buf, const std::string& base) {
      w.line("#pragma unroll");
      w.open("for (int i = 0; i < {}; ++i) {{", NV);
      w.line("const long long vi = {} + i * {} + t;", base, T);
      for (int t : vin)
        w.line("{}a{}_{}[i] = {}({} + sbase + vi * {}{});",
               tail ? fmt::format("if (vi < {}) ", SV) : "", t, buf,
               sch.hints ? "kiln_cn_ld16_hint" : "kiln_ld16_stream", tensor_param(t), V,
               sch.hints ? ", pol" : "");
      w.close();
    };
    // The span's chunks in order (the apply kernel: last first), each loaded while the one
    // before it is processed: a<t>_0 holds the current chunk, a<t>_2 the next.
    auto chunk_base = [&](const std::string& it) {
      return L == 1 ? std::string("vbase0")
                    : fmt::format("(vbase0 + ({}) * {})",
                                  apply ? fmt::format("{} - ({})", L - 1, it) : it, chunk);
    };
    for (int t : vin) w.line("uint4 a{}_0[{}];  // as loaded; a<t>_1: unpacked to f32", t, NV);
    load_chunk(0, chunk_base("0"));
    auto over_span = [&](const std::function<void()>& process) {
      if (L == 1) {
        w.line("const long long vbase = vbase0;");
        process();
        return;
      }
      w.line("#pragma unroll 1");
      w.open("for (int it = 0; it < {}; ++it) {{", L);
      w.line("const long long vbase = {};", chunk_base("it"));
      for (int t : vin) w.line("uint4 a{}_2[{}];", t, NV);
      w.open("if (it + 1 < {}) {{", L);
      load_chunk(2, chunk_base("it + 1"));
      w.close();
      process();
      w.line("#pragma unroll");
      w.open("for (int i = 0; i < {}; ++i) {{", NV);
      for (int t : vin) w.line("a{0}_0[i] = a{0}_2[i];", t);
      w.close();
      w.close();
    };
    if (!apply) {
      // 2. The shift of each group: its first element (the same in every CTA of the sample).
      w.line("__shared__ float red1[{0}], red2[{0}];  // per-lane partials: rows of {1} channels",
             int64_t{T} * V, C);
      w.line("__shared__ float gshift[{}];", G);
      w.open("for (int gi = t; gi < {}; gi += {}) {{", G, T);
      {
        ElementLoader ld{g,
                         X,
                         ds,
                         fmt::format("(sbase + gi * {})", Cg),
                         coords(fmt::format("(gi * {})", Cg), "0"),
                         &dp,
                         "",
                         {}};
        std::map<int, std::string> vals;
        w.line("gshift[gi] = {};", element(ld, &vals));
      }
      w.close();
      w.line("__syncthreads();");
      w.line("float shift[{0}], s1[{0}], s2[{0}];", V);
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < {}; ++l) {{", V);
      w.line("shift[l] = gshift[{} / {}];", lane_ch, Cg);
      w.line("s1[l] = 0.0f;");
      w.line("s2[l] = 0.0f;");
      w.close();
      // 3. Shifted sums per lane, then over the CTA: rows of C channels halved in a tree, then
      // per group over its Cg channels (a warp per group).
      std::map<int, std::string> vals;
      over_span([&] {
        over_vectors([] {},
                     [&] {
                       ElementLoader ld = lane_loader();
                       w.line("const float d = {} - shift[l];", element(ld, &vals));
                       w.line("s1[l] += d;");
                       w.line("s2[l] = fmaf(d, d, s2[l]);");
                     },
                     [] {});
      });
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < {}; ++l) {{", V);
      w.line("red1[t * {0} + l] = s1[l];", V);
      w.line("red2[t * {0} + l] = s2[l];", V);
      w.close();
      w.line("__syncthreads();");
      for (int64_t rows = int64_t{T} * V / C; rows > 1;) {
        const int64_t h = rows / 2, from = (rows - h) * C;
        w.open("for (int k = t; k < {}; k += {}) {{", h * C, T);
        w.line("red1[k] += red1[k + {}];", from);
        w.line("red2[k] += red2[k + {}];", from);
        w.close();
        w.line("__syncthreads();");
        rows -= h;
      }
      const int warps = T / 32;
      // mean and rstd of group gi from its shifted sums a, b, into the sample's workspace.
      auto finish = [&](const std::string& a, const std::string& b) {
        w.line("const float dm = {} / {};", a, count);
        w.line("ws[{} + 2 * gi] = gshift[gi] + dm;", parts);
        w.line("ws[{} + 2 * gi + 1] = rsqrtf(fmaxf({} / {} - dm * dm, 0.0f) + {});", parts, b,
               count, cuda_float(A.attr_float("eps")));
      };
      // Per group gi (a warp each): a and b, the sums over k < n of `sa` and `sb`, then `done`
      // in the warp's lane 0.
      auto warp_group_sums = [&](int64_t n, const std::string& sa, const std::string& sb,
                                 const std::function<void()>& done) {
        if (warps * 32 != T) w.open("if (t < {}) {{", warps * 32);
        w.open("for (int gi = t / 32; gi < {}; gi += {}) {{", G, warps);
        w.line("float a = 0.0f, b = 0.0f;");
        w.open("for (int k = t % 32; k < {}; k += 32) {{", n);
        w.line("a += {};", sa);
        w.line("b += {};", sb);
        w.close();
        w.line("a = kiln_warp_sum(a);");
        w.line("b = kiln_warp_sum(b);");
        w.open("if (t % 32 == 0) {{");
        done();
        w.close();
        w.close();
        if (warps * 32 != T) w.close();
      };
      warp_group_sums(Cg, fmt::format("red1[gi * {} + k]", Cg),
                      fmt::format("red2[gi * {} + k]", Cg), [&] {
                        if (B == 1) {
                          finish("a", "b");
                          return;
                        }
                        w.line("ws[(bid % {}) * {} + 2 * gi] = a;", B, 2 * G);
                        w.line("ws[(bid % {}) * {} + 2 * gi + 1] = b;", B, 2 * G);
                        w.line("__threadfence();  // the partials before this CTA's arrival");
                      });
      if (B > 1) {
        // 4. The sample's last CTA to arrive adds the B partials of each group in chunk order
        // (deterministic), writes mean and rstd, and zeroes its counter for the next launch.
        w.line("__shared__ unsigned last;");
        w.line("__syncthreads();");
        w.line("if (t == 0) last = atomicAdd(kc_cnt + n, 1u) == {}u;", B - 1);
        w.line("__syncthreads();");
        w.line("if (!last) return;");
        w.line("__threadfence();");
        warp_group_sums(B, fmt::format("kiln_cn_ld_relaxed(ws + k * {} + 2 * gi)", 2 * G),
                        fmt::format("kiln_cn_ld_relaxed(ws + k * {} + 2 * gi + 1)", 2 * G),
                        [&] { finish("a", "b"); });
        w.line("if (t == 0) kc_cnt[n] = 0u;");
      }
      w.close();
      KernelSpec k =
          group_kernel_spec(name, w, gp, T, X[0] * Dim(B), device_file("kiln_channelnorm.cuh"));
      // Its own minimum traffic: one read of the register-held inputs.
      Dim bytes(0);
      for (int t : vin)
        bytes =
            bytes + shape_numel(X) * Dim(static_cast<int64_t>(dtype_size(g.tensor(t).desc.dtype)));
      k.bytes_moved = bytes;
      out->push_back(std::move(k));
      continue;
    }
    // Apply: the sample's statistics (written by the statistics kernel), then per lane the affine
    // y = (x - mean) * a + b, a = rstd * scale; normalize, epilogue, store.
    w.open("for (int gi = t; gi < {}; gi += {}) {{", G, T);
    w.line("gmean[gi] = ws[{} + 2 * gi];", parts);
    w.line("grstd[gi] = ws[{} + 2 * gi + 1];", parts);
    w.close();
    w.line("__syncthreads();");
    w.line("float mean[{0}], ka[{0}], kb[{0}];", V);
    w.line("#pragma unroll");
    w.open("for (int l = 0; l < {}; ++l) {{", V);
    {
      std::vector<std::string> c = coords(lane_ch, "0");
      auto param = [&](size_t slot) { return channel_param(g, A, slot, c, dp); };
      w.line("const int gi = {} / {};", lane_ch, Cg);
      w.line("mean[l] = gmean[gi];");
      w.line("ka[l] = {};", A.inputs.size() > 1 ? "grstd[gi] * " + param(1) : "grstd[gi]");
      w.line("kb[l] = {};", A.inputs.size() > 2 ? param(2) : std::string("0.0f"));
    }
    w.close();
    std::map<int, std::string> vals;
    over_span([&] {
      over_vectors(
          [&] {
            for (int t : vout) w.line("float o{}[{}];", t, V);
          },
          [&] {
            ElementLoader ld = lane_loader();
            w.line("const float y = ({} - mean[l]) * ka[l] + kb[l];", element(ld, &vals));
            std::map<int, std::string> seed = vals;
            seed[out_t] = "y";
            PointwiseEmitter pe{g, ld.fn(), seed, ""};
            pe.emit(w, epilogue);
            for (int t : grp.outputs) {
              if (std::find(vout.begin(), vout.end(), t) != vout.end())
                w.line("o{}[l] = {};", t, pe.values.at(t));
              else
                w.line("{};",
                       store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
            }
          },
          [&] {
            for (int t : vout)
              w.line("{}({} + sbase + vi * {}, o{}{});",
                     sch.hints ? "kiln_cn_stv_hint" : "kiln_stv", tensor_param(t), V, t,
                     sch.hints ? ", pol" : "");
          });
    });
    w.close();
    out->push_back(
        group_kernel_spec(name, w, gp, T, X[0] * Dim(B), device_file("kiln_channelnorm.cuh")));
  }
  KernelArg ws;
  ws.kind = KernelArg::Kind::Scratch;
  ws.value = X[0] * Dim(per_sample * 4);
  for (KernelSpec& k : *out) k.args.push_back(ws);
  if (B > 1) {
    KernelArg cnt;  // per sample: CTAs of the statistics kernel that have arrived
    cnt.kind = KernelArg::Kind::Counters;
    cnt.value = X[0];
    out->front().args.push_back(cnt);
  }
  return true;
}

}  // namespace

std::vector<KernelSpec> emit_channelnorm(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.anchor >= 0, "channelnorm group {} without anchor", grp.id);
  const Node& A = g.nodes()[grp.anchor];
  const int in_t = A.inputs[0], out_t = A.outputs[0];
  const TensorDesc& xd = g.tensor(in_t).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());
  const int64_t C = X[1].value();
  const int64_t G = A.op == OpKind::Groupnorm ? A.attr_int("groups") : C;
  const int64_t Cg = C / G;
  Shape spatial(X.begin() + 2, X.end());
  Dim S = shape_numel(spatial);
  Dim M = S * Dim(Cg);
  // Channel innermost in memory (NHWC) or not.
  Shape xs = tensor_strides(xd);
  const bool channels_last = xs[1].is_static() && xs[1].value() == 1 && r > 2;

  std::vector<int> prologue, epilogue;
  for (int n : grp.nodes)
    if (n != grp.anchor) (n < grp.anchor ? prologue : epilogue).push_back(n);
  auto is_out = [&](int t) {
    return std::find(grp.outputs.begin(), grp.outputs.end(), t) != grp.outputs.end();
  };
  auto from_prologue = [&](int t) {
    for (int n : prologue)
      if (g.nodes()[n].outputs[0] == t) return true;
    return false;
  };

  // ---- The rule: split where it applies (NHWC, static channels and spatial size), else the
  // sm_90 cluster path, else per-group. See the file comment for what each measured.
  const int algo = cx.opts.schedule.channelnorm_algo;
  // sm_90 without a prologue: the cluster path, measured faster there (run 22: 47.9 us against
  // the split path's 51.0 for 16x320x64x64 f16).
  if (algo == kChannelNormRule && cx.opts.sm >= 90)
    if (KernelSpec k; emit_cluster(cx, grp, prologue.empty(), channels_last, &k)) return {k};
  if (algo <= kChannelNormSplit && channels_last)
    if (std::vector<KernelSpec> ks; emit_split(cx, grp, prologue, epilogue, &ks)) return ks;
  if (algo <= kChannelNormCluster)
    if (KernelSpec k; emit_cluster(cx, grp, prologue.empty(), channels_last, &k)) return {k};

  ChannelNormSchedule sch =
      choose_channelnorm(M.is_static() ? M.value() : -1, false, 1, cx.opts.sm);
  const int T = sch.threads;
  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  const std::string Mr = dp.ref(M), Sr = dp.ref(S);
  std::string name = group_kernel_name(g, grp, fmt::format("g{}_pergroup", G));
  // 32-bit element index within the group when it fits: the coordinate div/mod by static
  // channel and spatial sizes become a multiply-high each instead of a 64-bit division sequence.
  const char* eidx = M.is_static() && M.value() < (int64_t{1} << 31) ? "int" : "long long";

  Writer w;
  std::vector<int> ident(r);
  std::iota(ident.begin(), ident.end(), 0);
  // Coordinates of group element e.
  auto coords = [&](const std::string& e) {
    std::vector<std::string> c(r, "0");
    c[0] = "n";
    std::string cl, sidx;
    if (Cg == 1) {
      cl = "0";
      sidx = e;
    } else if (channels_last) {
      cl = fmt::format("({} % {})", e, Cg);
      sidx = fmt::format("({} / {})", e, Cg);
    } else {
      cl = fmt::format("({} / {})", e, Sr);
      sidx = fmt::format("({} % {})", e, Sr);
    }
    c[1] = fmt::format("(grp * {} + {})", Cg, cl);
    auto sc = decompose(sidx, spatial, row_major_strides(spatial), dp);
    for (size_t k = 0; k < sc.size(); ++k) c[2 + k] = sc[k];
    return c;
  };
  // Prologue for element e; returns the anchor input value.
  std::map<int, std::string> pro_vals;  // the last emitted prologue's values
  auto element = [&](ElementLoader& ld, bool store) {
    PointwiseEmitter pe{g, ld.fn(), {}, ""};
    pe.emit(w, prologue);
    pro_vals = pe.values;
    std::string v = pe.values.count(in_t)
                        ? pe.values.at(in_t)
                        : load_f32(tensor_param(in_t) + " + " + ld.offset(in_t, ident));
    if (store)
      for (int n : prologue) {
        int t = g.nodes()[n].outputs[0];
        if (is_out(t))
          w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
      }
    return v;
  };

  w.line("// group {}: {} ({} groups of {} channels) over {}", grp.id, op_name(A.op), G, Cg,
         xd.str());
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("__shared__ float kiln_red[33];");
  w.line("const long long n = blockIdx.x / {};", G);
  w.line("const int grp = blockIdx.x % {};", G);
  w.line("float shift;");
  w.open("{{");
  {
    w.line("const {} e = 0;", eidx);
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    w.line("shift = {};", element(ld, false));
  }
  w.close();
  w.line("float s1 = 0.0f, s2 = 0.0f;");
  // Unrolled so that several independent loads are in flight per thread.
  w.line("#pragma unroll 4");
  w.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx, Mr, T);
  {
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    w.line("const float d = {} - shift;", element(ld, false));
    w.line("s1 += d;");
    w.line("s2 += d * d;");
  }
  w.close();
  w.line("s1 = kiln_block_sum<{}>(s1, kiln_red);", T);
  w.line("s2 = kiln_block_sum<{}>(s2, kiln_red);", T);
  w.line("const float inv_m = 1.0f / static_cast<float>({});", Mr);
  w.line("const float dm = s1 * inv_m;");
  w.line("const float mean = shift + dm;");
  w.line("const float rstd = rsqrtf(fmaxf(s2 * inv_m - dm * dm, 0.0f) + {});",
         cuda_float(A.attr_float("eps")));
  w.line("#pragma unroll 4");
  w.open("for ({} e = threadIdx.x; e < {}; e += {}) {{", eidx, Mr, T);
  {
    ElementLoader ld{g, X, Shape{}, "", coords("e"), &dp, "", {}};
    std::string v = element(ld, true);
    std::string y = fmt::format("({} - mean) * rstd", v);
    auto param = [&](size_t slot) { return channel_param(g, A, slot, ld.coords, dp); };
    if (A.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
    if (A.inputs.size() > 2) y = fmt::format("{} + {}", y, param(2));
    w.line("const float y = {};", y);
    std::map<int, std::string> seed = pro_vals;
    seed[out_t] = "y";
    PointwiseEmitter pe{g, ld.fn(), seed, ""};
    pe.emit(w, epilogue);
    for (int t : grp.outputs)
      if (!from_prologue(t))
        w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
  }
  w.close();
  w.close();

  return {group_kernel_spec(name, w, gp, T, X[0] * Dim(G))};
}

}  // namespace kiln
