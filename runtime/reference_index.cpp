// CPU reference of the index ops: argmax / argmin (onnxruntime's scan: the first element is the
// running best, replaced by a later one only when strictly better, or better-or-equal with
// select_last_index; so a NaN never replaces a number and a NaN first element stays) and range.
#include <cmath>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/index_ops.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {

namespace {

// The position of the extreme along a line of `len` values `stride` apart.
template <typename T, typename Get>
int64_t arg_line(Get get, int64_t len, bool is_max, bool last) {
  T best = get(0);
  int64_t at = 0;
  for (int64_t i = 1; i < len; ++i) {
    const T v = get(i);
    const bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
    if (better) {
      best = v;
      at = i;
    }
  }
  return at;
}

}  // namespace

void arg_reduce(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int r = static_cast<int>(xs.size());
  const int64_t axis = arg_reduce_axis(a.node, r);
  const int64_t len = xs[axis];
  const int64_t inner = span_numel(xs, axis + 1, xs.size());
  const int64_t outer = span_numel(xs, 0, axis);
  const bool is_max = a.node.op == OpKind::ArgMax;
  const bool last = a.node.attr_int("select_last_index") != 0;
  const bool ints = !is_float(a.in_dtypes[0]);
  const double* x = a.in[0];
  parallel_for(outer, a.threads, [&](int64_t o) {
    for (int64_t i = 0; i < inner; ++i) {
      const double* line = x + o * len * inner + i;
      const int64_t at =
          ints ? arg_line<int64_t>([&](int64_t k) { return slot_int(line[k * inner]); }, len,
                                   is_max, last)
               : arg_line<double>([&](int64_t k) { return line[k * inner]; }, len, is_max, last);
      a.out[o * inner + i] = int_slot(at);
    }
  });
}

// start + i * delta: f64 (rounded to the dtype by the executor), exact int64 for the integer
// dtypes (shape inference checked start and delta integral).
void range(const NodeArgs& a) {
  const double start = a.node.attr_float("start"), delta = a.node.attr_float("delta");
  const int64_t n = numel(a.out_shape);
  if (is_float(a.out_dtype)) {
    for (int64_t i = 0; i < n; ++i) a.out[i] = start + static_cast<double>(i) * delta;
    return;
  }
  const int64_t s = static_cast<int64_t>(start), d = static_cast<int64_t>(delta);
  for (int64_t i = 0; i < n; ++i)
    a.out[i] = int_slot(static_cast<int64_t>(static_cast<uint64_t>(s) +
                                             static_cast<uint64_t>(i) * static_cast<uint64_t>(d)));
}

}  // namespace kiln::ref
