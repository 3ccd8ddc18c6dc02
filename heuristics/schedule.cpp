// Schedule heuristics for memory-bound kernels (see schedule.hpp).
#include "heuristics/schedule.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>

#include "engine/base/check.hpp"
#include "engine/base/env.hpp"

namespace kiln {

namespace {
struct OverrideKey {
  const char* name;
  int ScheduleOverrides::*field;
  int lo, hi;
};
constexpr OverrideKey kOverrideKeys[] = {
    {"pointwise.vecs", &ScheduleOverrides::pointwise_vecs, 1, 8},
    {"pointwise.threads", &ScheduleOverrides::pointwise_threads, 64, 1024},
    {"rownorm.threads", &ScheduleOverrides::rownorm_threads, 64, 1024},
    {"channelnorm.slice_kb", &ScheduleOverrides::channelnorm_slice_kb, 8, 200},
    {"channelnorm.cluster", &ScheduleOverrides::channelnorm_cluster, 1, 8},
    {"channelnorm.cb", &ScheduleOverrides::channelnorm_cb, 1, 1 << 20},
    {"channelnorm.algo", &ScheduleOverrides::channelnorm_algo, 0, kChannelNormPerGroup},
    {"channelnorm.vecs", &ScheduleOverrides::channelnorm_vecs, 1, 16},
    {"channelnorm.threads", &ScheduleOverrides::channelnorm_threads, 32, 1024},
    {"channelnorm.hints", &ScheduleOverrides::channelnorm_hints, 1, 2},
    {"channelnorm.iters", &ScheduleOverrides::channelnorm_iters, 1, 64},
    {"channelnorm.onewave", &ScheduleOverrides::channelnorm_onewave, 1, 2},
    {"window.vec", &ScheduleOverrides::window_vec, 1, 2},
    {"contraction.im2col", &ScheduleOverrides::contraction_im2col, 1, 2},
    {"contraction.prefetch", &ScheduleOverrides::contraction_prefetch, 1, 2},
    {"contraction.tmastore", &ScheduleOverrides::contraction_tmastore, 1, 2},
    {"contraction.rowfold", &ScheduleOverrides::contraction_rowfold, 1, 2},
    {"attention.fused", &ScheduleOverrides::attention_fused, 1, 2},
    {"stream.hints", &ScheduleOverrides::stream_hints, 1, 2},
};
// channelnorm.algo by name (index = value).
constexpr const char* kChannelNormAlgos[] = {"rule", "split", "cluster", "pergroup"};
bool pow2(int v) {
  return v > 0 && (v & (v - 1)) == 0;
}
}  // namespace

bool ScheduleOverrides::empty() const {
  for (const OverrideKey& k : kOverrideKeys)
    if (this->*(k.field) != 0) return false;
  return true;
}

const char* schedule_override_keys() {
  return "pointwise.vecs (1..8), pointwise.threads (64..1024, multiple of 32), rownorm.threads "
         "(power of two 64..1024), channelnorm.slice_kb (8..200), channelnorm.cluster (1, 2, 4, "
         "8), channelnorm.cb (channels per cluster), channelnorm.algo (split, cluster, pergroup), "
         "channelnorm.vecs (1..16), channelnorm.threads (32..1024), channelnorm.hints (1 on, 2 "
         "off), channelnorm.iters (1..64), channelnorm.onewave (1 on, 2 off), "
         "contraction.im2col (1 on: the rule, 2 off), contraction.prefetch (1 on: the rule, 2 "
         "off), contraction.tmastore (1 on: the rule, 2 off), contraction.rowfold (1 on: the rule, "
         "2 off), attention.fused (1 on: the rule, 2 off), window.vec (1 on: the rule, 2 off), "
         "stream.hints (1 on, 2 off: the rule)";
}

ScheduleOverrides env_schedule_overrides() {
  const std::string& value = env().schedule;
  try {
    return parse_schedule_overrides(value);
  } catch (const Error& e) {
    KILN_FAIL("environment variable KILN_SCHEDULE={}: {}", value, e.what());
  }
}

ScheduleOverrides parse_schedule_overrides(const std::string& spec) {
  ScheduleOverrides o;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    KILN_CHECK(eq != std::string::npos, "schedule override '{}': expected key=value; keys: {}",
               item, schedule_override_keys());
    std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    const OverrideKey* k = nullptr;
    for (const OverrideKey& c : kOverrideKeys)
      if (key == c.name) k = &c;
    KILN_CHECK(k, "schedule override '{}': unknown key '{}'; keys: {}", item, key,
               schedule_override_keys());
    int v = 0;
    bool digits =
        !val.empty() && val.size() < 9 && val.find_first_not_of("0123456789") == std::string::npos;
    if (digits) v = std::stoi(val);
    if (key == "channelnorm.algo") {
      for (int a = 0; a < 4; ++a)
        if (val == kChannelNormAlgos[a]) {
          digits = true;
          v = a;
        }
      KILN_CHECK(digits && v <= k->hi,
                 "schedule override '{}': channelnorm.algo must be split, cluster or pergroup",
                 item);
    }
    KILN_CHECK(digits && v >= k->lo && v <= k->hi,
               "schedule override '{}': {} must be an integer in {}..{}", item, key, k->lo, k->hi);
    KILN_CHECK(key != "pointwise.threads" || v % 32 == 0,
               "schedule override '{}': pointwise.threads must be a multiple of 32", item);
    KILN_CHECK(key != "rownorm.threads" || pow2(v),
               "schedule override '{}': rownorm.threads must be a power of two", item);
    KILN_CHECK(key != "channelnorm.cluster" || pow2(v),
               "schedule override '{}': channelnorm.cluster must be 1, 2, 4 or 8", item);
    o.*(k->field) = v;
  }
  return o;
}

PointwiseSchedule choose_pointwise(int max_elem_bytes, int sm, const ScheduleOverrides& o) {
  PointwiseSchedule s;
  // One 16-byte access per dense tensor per thread; 256 threads keep enough bytes in flight per
  // SM on sm_80/sm_90 with 8+ resident CTAs.
  s.vec = std::max(1, 16 / std::max(1, max_elem_bytes));
  s.threads = 256;
  // One vector per thread for 16-bit data, two for f32. With plain loads and stores (the rule
  // since run 50), bias + gelu bf16 16384x4096 measured 1 / 2 / 4 / 8 vectors per thread at
  // 90.5 / 84.4 / 88.5 / 86.9 % of the copy rate, and the hand-written probe
  // (bench/stream_probe.cu) also found one vector per thread the fastest copy (90.0 % vs 82-84 %
  // for 2-8, streaming hints).
  s.vecs = s.vec > 1 && s.vec <= 4 ? 2 : 1;
  if (o.pointwise_vecs) s.vecs = o.pointwise_vecs;
  if (o.pointwise_threads) s.threads = o.pointwise_threads;
  s.stream_hints = o.stream_hints == 1;
  return s;
}

RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm,
                           const ScheduleOverrides& o) {
  RowSchedule s;
  s.stream_hints = o.stream_hints == 1;
  int vec = contiguous ? std::max(1, 16 / std::max(1, max_elem_bytes)) : 1;
  if (row_len < 0) {
    s.registers = false;
    s.threads = 256;
    s.vec = 1;
    return s;
  }
  if (row_len % vec != 0) vec = 1;
  s.vec = vec;
  int64_t nvec = (row_len + vec - 1) / vec;
  if (row_len <= 1024) {
    // One warp per row; 4 rows per CTA (128 threads).
    s.warp_per_row = true;
    s.threads = 128;
    s.rows_per_cta = 4;
    s.vecs_per_thread = static_cast<int>((nvec + 31) / 32);
    return s;
  }
  // One CTA per row, each thread holding about two 16-byte vectors (4096 16-bit elements: 256
  // threads, 16 elements each). Measured on the H200 against four vectors x 128 threads (run 3
  // of 2026-11-30, docs/PERFORMANCE.md): add+layernorm+gelu 84.2 vs 82.5 % of copy, rmsnorm
  // 81.5 vs 81.3, softmax (8192: 512 threads) 80.4 vs 79.8; 1024 threads x 1 vector: 46.6.
  int64_t t = 128;
  while (t < 1024 && t * 2 < nvec) t *= 2;
  if (o.rownorm_threads) {
    // The override, but every thread holds at least one vector and at most 64 elements.
    t = o.rownorm_threads;
    while (t > 64 && t > nvec) t /= 2;
    while (t < 1024 && (nvec + t - 1) / t * vec > 64) t *= 2;
  }
  s.threads = static_cast<int>(t);
  s.vecs_per_thread = static_cast<int>((nvec + t - 1) / t);
  if (s.vecs_per_thread * s.vec > 64) {
    // Too many registers per thread: stream the row in passes instead (served from L1/L2).
    s.registers = false;
    s.threads = 1024;
    s.vec = 1;
    s.vecs_per_thread = 1;
  }
  return s;
}

ReduceSchedule choose_reduction(int64_t reduce_len, bool inner, int sm) {
  ReduceSchedule s;
  s.inner = inner;
  if (!inner) {
    // A thread per output element, looping over the reduced dims (adjacent threads read adjacent
    // addresses).
    s.threads = 256;
    s.warp_per_output = false;
    s.outputs_per_cta = 256;
    return s;
  }
  if (reduce_len >= 0 && reduce_len <= 4096) {
    s.warp_per_output = true;
    s.threads = 256;
    s.outputs_per_cta = 8;
  } else {
    s.warp_per_output = false;
    s.threads = 512;
    s.outputs_per_cta = 1;
  }
  return s;
}

ChannelNormSchedule choose_channelnorm(int64_t group_elems, bool contiguous, int vec_elems,
                                       int sm) {
  ChannelNormSchedule s;
  s.threads = group_elems >= 0 && group_elems < 4096 ? 128 : 512;
  s.vec = contiguous ? vec_elems : 1;
  return s;
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
  // CTAs of 320 threads per SM: ~80 KB in flight per SM); fewer when a sample is small. Four
  // measured slower in run 22, where the launch bounds made them spill.
  int64_t v = o.channelnorm_vecs ? o.channelnorm_vecs : (vector_inputs > 1 ? 4 : 8);
  v = std::max<int64_t>(1, std::min(v, (sv + t - 1) / t));
  const int64_t chunks = (sv + t * v - 1) / (t * v);
  // Four chunks per CTA, each loaded while the one before it is reduced or stored: measured on
  // the H200 (run 22, 16x320x64x64 f16) statistics 39.4 -> 25.3 us against one chunk per CTA;
  // eight were no faster.
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
  s.hints = o.channelnorm_hints != 2;
  return s;
}

}  // namespace kiln
