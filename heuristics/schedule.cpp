// Schedule heuristics for memory-bound kernels (see schedule.hpp).
#include "heuristics/schedule.hpp"

#include <algorithm>
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
    {"rownorm.lanes", &ScheduleOverrides::rownorm_lanes, 1, 32},
    {"channelnorm.slice_kb", &ScheduleOverrides::channelnorm_slice_kb, 8, 200},
    {"channelnorm.cluster", &ScheduleOverrides::channelnorm_cluster, 1, 8},
    {"channelnorm.cb", &ScheduleOverrides::channelnorm_cb, 1, 1 << 20},
    {"channelnorm.algo", &ScheduleOverrides::channelnorm_algo, 0, kChannelNormPerGroup},
    {"channelnorm.vecs", &ScheduleOverrides::channelnorm_vecs, 1, 16},
    {"channelnorm.threads", &ScheduleOverrides::channelnorm_threads, 32, 1024},
    {"channelnorm.iters", &ScheduleOverrides::channelnorm_iters, 1, 64},
    {"channelnorm.onewave", &ScheduleOverrides::channelnorm_onewave, 1, 2},
    {"window.vec", &ScheduleOverrides::window_vec, 1, 2},
    {"contraction.im2col", &ScheduleOverrides::contraction_im2col, 1, 2},
    {"contraction.prefetch", &ScheduleOverrides::contraction_prefetch, 1, 2},
    {"contraction.tmastore", &ScheduleOverrides::contraction_tmastore, 1, 2},
    {"contraction.rowfold", &ScheduleOverrides::contraction_rowfold, 1, 2},
    {"attention.fused", &ScheduleOverrides::attention_fused, 1, 2},
    {"attention.wgmma", &ScheduleOverrides::attention_wgmma, 1, 2},
    {"attention.splits", &ScheduleOverrides::attention_splits, 1, 256},
    {"attention.pingpong", &ScheduleOverrides::attention_pingpong, 1, 2},
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
         "(power of two 64..1024), rownorm.lanes (power of two 1..32), channelnorm.slice_kb "
         "(8..200), channelnorm.cluster (1, 2, 4, "
         "8), channelnorm.cb (channels per cluster), channelnorm.algo (split, cluster, pergroup), "
         "channelnorm.vecs (1..16), channelnorm.threads (32..1024), channelnorm.iters (1..64), "
         "channelnorm.onewave (1 on, 2 off), "
         "contraction.im2col (1 on: the rule, 2 off), contraction.prefetch (1 on: the rule, 2 "
         "off), contraction.tmastore (1 on: the rule, 2 off), contraction.rowfold (1 on: the rule, "
         "2 off), attention.fused (1 on: the rule, 2 off), attention.wgmma (1 on: the rule, 2 off: "
         "the mma.sync kernel), attention.splits (1 none, 2..256: key splits of a decode-shaped "
         "attention), attention.pingpong (1 on, 2 off: the rule), window.vec (1 on: the rule, 2 "
         "off)";
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
    KILN_CHECK((key != "rownorm.threads" && key != "rownorm.lanes") || pow2(v),
               "schedule override '{}': {} must be a power of two", item, key);
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
  // One vector per thread for 16-bit data, two for f32: with plain loads and stores one vector
  // per thread streams fastest (docs/PERFORMANCE.md).
  s.vecs = s.vec > 1 && s.vec <= 4 ? 2 : 1;
  if (o.pointwise_vecs) s.vecs = o.pointwise_vecs;
  if (o.pointwise_threads) s.threads = o.pointwise_threads;
  return s;
}

RowSchedule choose_rownorm(int64_t row_len, int max_elem_bytes, bool contiguous, int sm,
                           const ScheduleOverrides& o) {
  RowSchedule s;
  int vec = contiguous ? std::max(1, 16 / std::max(1, max_elem_bytes)) : 1;
  if (row_len < 0) {
    s.registers = false;
    s.threads = 256;
    s.row_threads = 256;
    s.vec = 1;
    return s;
  }
  if (row_len % vec != 0) vec = 1;
  s.vec = vec;
  int64_t nvec = (row_len + vec - 1) / vec;
  if (row_len <= 1024) {
    // A warp or less per row, 128 threads per CTA. A row of fewer than ~100 vectors takes a
    // power-of-two share of a warp, about 3-4 vectors per lane, at least 4 lanes where it has
    // that many vectors (64 contiguous bytes per row and load): a whole warp on Swin V2's
    // 32-element rows would leave 28 lanes idle with one 64-byte load in flight per warp.
    int64_t lanes = 4;
    while (lanes < 32 && lanes * 4 < nvec) lanes *= 2;
    while (lanes > 1 && lanes / 2 >= nvec) lanes /= 2;
    if (o.rownorm_lanes) lanes = o.rownorm_lanes;
    s.warp_per_row = true;
    s.threads = 128;
    s.row_threads = static_cast<int>(lanes);
    s.rows_per_cta = s.threads / s.row_threads;
    s.vecs_per_thread = static_cast<int>((nvec + lanes - 1) / lanes);
    s.exact = s.vecs_per_thread * lanes == nvec;
    s.equal_counts = s.exact;
    return s;
  }
  // One CTA per row, each thread holding about two 16-byte vectors (4096 16-bit elements: 256
  // threads, 16 elements each): ahead of four vectors x 128 threads and far ahead of one vector
  // x 1024 threads on the H200 (docs/PERFORMANCE.md).
  int64_t t = 128;
  while (t < 1024 && t * 2 < nvec) t *= 2;
  if (o.rownorm_threads) {
    // The override, but every thread holds at least one vector and at most 64 elements.
    t = o.rownorm_threads;
    while (t > 64 && t > nvec) t /= 2;
    while (t < 1024 && (nvec + t - 1) / t * vec > 64) t *= 2;
  }
  s.threads = static_cast<int>(t);
  s.row_threads = s.threads;
  s.vecs_per_thread = static_cast<int>((nvec + t - 1) / t);
  if (s.vecs_per_thread * s.vec > 64) {
    // Too many registers per thread: stream the row in passes instead (served from L1/L2).
    s.registers = false;
    s.threads = 1024;
    s.row_threads = 1024;
    s.vec = 1;
    s.vecs_per_thread = 1;
    return s;
  }
  s.exact = s.vecs_per_thread * t == nvec;
  s.equal_counts = s.exact && pow2(s.threads);
  return s;
}

ReduceSchedule choose_reduction(int64_t reduce_len, int64_t outputs, bool inner, int sm) {
  ReduceSchedule s;
  s.inner = inner;
  if (!inner) {
    s.threads = 256;
    s.warp_per_output = false;
    s.outputs_per_cta = 256;
    // A thread per output, looping over the reduced dims (adjacent threads read adjacent
    // addresses), keeps the GPU busy only with many outputs: a squeeze-excite pool over a
    // 112x112 NHWC map has 32 x 32 outputs of 12544 elements each, 4 CTAs on 132 SMs. Below
    // about 2^16 outputs, or with a symbolic reduced range, tiles of 32 outputs by 8 rows
    // split the range over enough CTAs for several waves.
    constexpr int64_t kMinRowsPerSplit = 256;  // 32 iterations per thread: loads in flight
    constexpr int64_t kTargetCtas = 1024;      // about 8 per SM on a 132-SM part
    const bool few_outputs = outputs < 0 || outputs < (int64_t{1} << 16);
    if (reduce_len >= 0 && reduce_len < 64) return s;
    if (!few_outputs) return s;
    s.columns = true;
    s.outputs_per_cta = 32;
    if (reduce_len < 0) return s;  // splits need the range at compile time
    const int64_t tiles = outputs < 0 ? 32 : (outputs + 31) / 32;  // symbolic: assume a batch
    const int64_t by_rows = std::max<int64_t>(1, reduce_len / kMinRowsPerSplit);
    const int64_t by_ctas = std::max<int64_t>(1, kTargetCtas / tiles);
    s.splits = static_cast<int>(std::min<int64_t>({by_rows, by_ctas, 64}));
    (void)sm;
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

}  // namespace kiln
