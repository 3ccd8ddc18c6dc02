// The channel-norm layout (see channelnorm_layout.hpp). What each form measured on the H200 is in
// docs/PERFORMANCE.md.
#include "heuristics/channelnorm_layout.hpp"

#include <algorithm>
#include <numeric>

namespace kiln {
namespace {

constexpr int kClusterMax = 8;              // portable cluster size
constexpr int64_t kSliceBytes = 96 * 1024;  // shared data per CTA (two CTAs per SM)
constexpr int kClusterThreads = 512;        // at most, per CTA
// At most, per CTA of the one-wave form (one per SM): 20 warps, at the 96 registers per thread
// the kernel needs; 1024 threads would leave 64.
constexpr int kWaveThreads = 640;
constexpr int64_t kCopyGroups = 4;             // cp.async commit groups per slice
constexpr int64_t kSmemPerSm = 233472;         // 228 KiB of shared memory per SM (sm_90)
constexpr int64_t kSmemPerCta = 232448;        // 227 KiB at most per CTA
constexpr int64_t kSmemReserved = 1024 + 256;  // per CTA: the system's 1 KiB, the static arrays

// The smallest block of channels that is a multiple of lcm(Cg, V), divides C and (preferably)
// covers whole 32-byte sectors per pixel; channelnorm.cb where it is such a multiple. 0: none.
int64_t block_channels(int64_t C, int64_t Cg, int V, int esize, const ScheduleOverrides& o) {
  const int64_t base = std::lcm(Cg, static_cast<int64_t>(V));
  if (o.channelnorm_cb && C % o.channelnorm_cb == 0 && o.channelnorm_cb % base == 0)
    return o.channelnorm_cb;
  for (int64_t cb = base; cb <= C; cb += base)
    if (C % cb == 0 && (cb * esize) % 32 == 0) return cb;
  return C % base == 0 ? base : 0;
}

// The geometry of k CTAs per cluster of at most max_t threads: P pixels per CTA, m pixel rows
// per iteration (a power of two: the shared-memory tree), T threads, ITER iterations.
void cluster_geometry(ChannelNormCluster* c, int64_t S, int k, int max_t) {
  c->cluster = k;
  c->pixels = S / k;
  c->rows = 1;
  while (c->vecs_per_pixel * c->rows * 2 <= max_t && c->rows < c->pixels) c->rows *= 2;
  c->threads = c->vecs_per_pixel * c->rows;
  c->iters = (c->pixels + c->rows - 1) / c->rows;
  c->smem_iters = c->iters;
}

// The one-wave form where it applies (see choose_channelnorm_cluster); false: it does not.
bool one_wave(ChannelNormCluster* c, const ChannelNormProblem& p, const ChannelNormTarget& t,
              const ScheduleOverrides& o) {
  const int wave_ov = o.channelnorm_onewave;
  const bool wave_rule = wave_ov == 0 && !o.channelnorm_cluster && !o.channelnorm_slice_kb;
  const int64_t units = p.batch > 0 ? p.batch * c->blocks : -1;
  // Clusters of 8 pack into the GPCs with about a tenth of the CTA slots left over (30 of 33
  // clusters resident on the H200 at two CTAs per SM).
  const bool many_waves =
      units > 0 && units * c->cluster > int64_t{t.sm_count} * c->ctas_per_sm * 9 / 10;
  if (p.spatial % 2 != 0) return false;
  if (!(wave_ov == 1 || (wave_rule && many_waves && units * 2 <= t.sm_count))) return false;
  ChannelNormCluster w = *c;
  cluster_geometry(&w, p.spatial, 2, kWaveThreads);
  // Half of the iterations in shared memory, as many as fit; the rest read again from L2, which
  // must hold them (at most half of it).
  const int64_t row = int64_t{w.threads} * 16;  // bytes of one iteration's vectors
  const int64_t budget = kSmemPerCta - kSmemReserved - 2 * int64_t{w.threads} * w.lane_groups * 4;
  const int64_t ism = std::min<int64_t>({w.iters, std::max<int64_t>(1, w.iters / 2), budget / row});
  const int64_t l2_share = units > 0 ? units * 2 * (w.iters - ism) * row : 0;
  if (ism < 1 || !(wave_ov == 1 || 2 * l2_share <= t.l2_bytes)) return false;
  w.smem_iters = ism;
  w.ctas_per_sm = 1;
  w.one_wave = true;
  *c = w;
  return true;
}

}  // namespace

const char* channelnorm_form_name(ChannelNormForm f) {
  switch (f) {
    case ChannelNormForm::Cluster:
      return "cluster";
    case ChannelNormForm::ClusterOneWave:
      return "cluster (one wave)";
    case ChannelNormForm::Split:
      return "split";
    case ChannelNormForm::PerGroup:
      return "pergroup";
  }
  return "?";
}

std::optional<ChannelNormCluster> choose_channelnorm_cluster(const ChannelNormProblem& p,
                                                             const ChannelNormTarget& t,
                                                             const ScheduleOverrides& o) {
  if (t.sm < 90 || p.prologue || !p.dense) return std::nullopt;
  const int64_t C = p.channels, S = p.spatial, Cg = C / p.groups;
  const int V = p.vec, esize = p.elem_bytes;
  if (C % V != 0 || S < 1 || S > (int64_t{1} << 30)) return std::nullopt;
  ChannelNormCluster c;
  c.block_channels = block_channels(C, Cg, V, esize, o);
  if (!c.block_channels) return std::nullopt;
  // Cluster size: the largest k <= 8 dividing S whose slice fits.
  const int64_t slice_max =
      o.channelnorm_slice_kb ? int64_t{o.channelnorm_slice_kb} * 1024 : kSliceBytes;
  const int k_max = o.channelnorm_cluster ? o.channelnorm_cluster : kClusterMax;
  int K = 0;
  for (int k = k_max; k >= 1 && !K; k /= 2)
    if (S % k == 0 && (S / k) * c.block_channels * esize <= slice_max) K = k;
  if (!K) return std::nullopt;
  c.vecs_per_pixel = static_cast<int>(c.block_channels / V);
  if (c.vecs_per_pixel > kClusterThreads) return std::nullopt;
  c.block_groups = c.block_channels / Cg;
  c.blocks = C / c.block_channels;
  // Groups one thread's V lanes span (its channels start at a multiple of V): their sums are
  // folded per group before the shared-memory tree, which then adds that many floats per thread
  // and statistic instead of V.
  c.lane_groups = Cg % V == 0 ? 1 : V % Cg == 0 ? V / Cg : std::min<int64_t>(V, (V - 1) / Cg + 2);
  cluster_geometry(&c, S, K, kClusterThreads);
  // CTAs per SM: as many as shared memory holds, at no fewer than 64 registers per thread.
  const int64_t smem_all =
      c.pixels * c.block_channels * esize + 2 * int64_t{c.threads} * c.lane_groups * 4;
  c.ctas_per_sm = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(kSmemPerSm / (smem_all + kSmemReserved), 65536 / (c.threads * 64))));
  // One wave: where the grid above needs more than one wave of resident clusters, clusters of 2
  // CTAs, one CTA per SM, half of each slice in shared memory and half read again from L2, so
  // that every CTA is resident at once. Needs the batch size (a static shape or a
  // shape-specialized kernel) and at most half the L2 for the re-read half.
  one_wave(&c, p, t, o);
  // Rows below smem_iters are whole when some are read from L2; else the slice's own size.
  c.data_bytes =
      c.smem_iters < c.iters ? c.smem_iters * c.threads * 16 : c.pixels * c.vecs_per_pixel * 16;
  c.smem_bytes = static_cast<int>(c.data_bytes + 2 * int64_t{c.threads} * c.lane_groups * 4);
  // The copies in four commit groups, so that the statistics start on the first pixels while
  // the rest are in flight.
  c.copy_group_iters = (c.smem_iters + kCopyGroups - 1) / kCopyGroups;
  c.copy_groups = (c.smem_iters + c.copy_group_iters - 1) / c.copy_group_iters;
  return c;
}

ChannelNormSplit choose_channelnorm_split(int64_t channels, int64_t groups, int64_t spatial,
                                          int vec_elems, int vector_inputs, bool prologue, int sm,
                                          const ScheduleOverrides& o) {
  ChannelNormSplit s;
  const int64_t C = channels, V = vec_elems;
  if (sm < 80 || C < 1 || groups < 1 || spatial < 1 || (C * spatial) % V != 0) return s;
  // Thread t's lanes hold elements t*V + l + k*threads*V of the chunk: their channels are fixed
  // when threads*V is a multiple of C, i.e. threads a multiple of q. Whole warps when possible.
  const int64_t q = C / std::gcd(C, V);
  const int64_t unit = std::lcm(q, int64_t{32}) <= 512 ? std::lcm(q, int64_t{32}) : q;
  if (unit > 1024) return s;
  const int64_t sv = C * spatial / V;  // vectors per sample
  int64_t t = unit * std::max<int64_t>(1, (256 + unit - 1) / unit);
  if (o.channelnorm_threads) t = std::max(unit, o.channelnorm_threads / unit * unit);
  t = std::min(t, (sv + unit - 1) / unit * unit);  // small samples: no idle warps
  if (t > 1024) return s;
  // Shared memory: two partial sums per lane, shift, mean and rstd per group.
  const int64_t smem = (2 * t * V + 3 * groups) * 4;
  if (smem > 46 * 1024) return s;
  // Eight vectors (128 bytes) per thread and input, all loads of a chunk issued at once (two
  // CTAs of 320 threads per SM: ~80 KB in flight per SM); fewer when a sample is small, or with
  // two register-held inputs.
  int64_t v = o.channelnorm_vecs ? o.channelnorm_vecs : (vector_inputs > 1 ? 4 : 8);
  v = std::max<int64_t>(1, std::min(v, (sv + t - 1) / t));
  const int64_t chunks = (sv + t * v - 1) / (t * v);
  // Four chunks per CTA, each loaded while the one before it is reduced or stored.
  const int64_t iters = std::min<int64_t>(o.channelnorm_iters ? o.channelnorm_iters : 4, chunks);
  // Registers as ptxas needs them (one chunk: 48 up to four raw vectors, then about 8 per vector;
  // two chunks in flight: about 48 + 6 per raw vector, 96 at eight), within 1536 threads (sm_86)
  // and 100 KB of shared memory per SM (sm_86/89).
  const int64_t raw = v * std::max(1, vector_inputs);
  const int64_t regs =
      (iters > 1 ? 48 + 6 * raw : (raw <= 4 ? 48 : 24 + 8 * raw)) + (prologue ? 8 : 0);
  s.ok = true;
  s.threads = static_cast<int>(t);
  s.vecs = static_cast<int>(v);
  s.iters = static_cast<int>(iters);
  s.ctas = (chunks + iters - 1) / iters;
  s.ctas_per_sm = static_cast<int>(std::max<int64_t>(
      1, std::min({int64_t{8}, 65536 / (t * regs), 1536 / t, 100 * 1024 / (smem + 1024)})));
  s.tail = sv % (t * v * iters) != 0;
  s.workspace_floats = s.ctas * groups * 2 + 2 * groups;
  return s;
}

int choose_channelnorm_pergroup(int64_t group_elems) {
  return group_elems >= 0 && group_elems < 4096 ? 128 : 512;
}

ChannelNormLayout choose_channelnorm_layout(const ChannelNormProblem& p, const ChannelNormTarget& t,
                                            const ScheduleOverrides& o) {
  ChannelNormLayout l;
  auto cluster = [&] {
    std::optional<ChannelNormCluster> c = choose_channelnorm_cluster(p, t, o);
    if (!c) return false;
    l.form = c->one_wave ? ChannelNormForm::ClusterOneWave : ChannelNormForm::Cluster;
    l.cluster = *c;
    return true;
  };
  auto split = [&] {
    if (!p.dense || (!p.prologue && p.vector_inputs == 0)) return false;
    l.split = choose_channelnorm_split(p.channels, p.groups, p.spatial, p.vec, p.vector_inputs,
                                       p.prologue, t.sm, o);
    if (!l.split.ok) return false;
    l.form = ChannelNormForm::Split;
    return true;
  };
  const int algo = o.channelnorm_algo;
  // sm_90 without a prologue: the cluster form, ahead of the split form there.
  if (algo == kChannelNormRule && t.sm >= 90 && cluster()) return l;
  if (algo <= kChannelNormSplit && split()) return l;
  if (algo <= kChannelNormCluster && cluster()) return l;
  l.form = ChannelNormForm::PerGroup;
  const int64_t group_elems = p.spatial >= 0 ? p.spatial * (p.channels / p.groups) : -1;
  l.pergroup_threads = choose_channelnorm_pergroup(group_elems);
  return l;
}

}  // namespace kiln
