// The CPU reference of gather and gather_elements (ONNX Gather, GatherElements): every index is
// checked against [-dim, dim) before anything is read, and one out of range is a located user
// error naming the node, the index's position and value, and the valid range.
#include <fmt/format.h>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/gather_ops.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {
namespace {

// "[1, 0, 2]": the coordinates of element `flat` of a row-major shape `s`.
std::string position(const Dims& s, int64_t flat) {
  Dims c(s.size(), 0);
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    c[d] = flat % s[d];
    flat /= s[d];
  }
  return fmt::format("[{}]", fmt::join(c, ", "));
}

// The indices as non-negative positions along an axis of size `dim`; throws at the first one
// outside [-dim, dim).
std::vector<int64_t> normalized_indices(const NodeArgs& a, int64_t axis, int64_t dim) {
  const Dims& is = a.in_shapes[1];
  const int64_t n = numel(is);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = slot_int(a.in[1][i]);
    KILN_CHECK(v >= -dim && v < dim,
               "{}: index out of range: indices{} is {}, outside [{}, {}) for axis {} of the data "
               "(size {})",
               a.where, position(is, i), v, -dim, dim, axis, dim);
    idx[static_cast<size_t>(i)] = v < 0 ? v + dim : v;
  }
  return idx;
}

}  // namespace

void gather(const NodeArgs& a) {
  const Dims& ds = a.in_shapes[0];
  const int64_t axis = gather_axis(a.node, static_cast<int>(ds.size()));
  const int64_t dim = ds[axis];
  const std::vector<int64_t> idx = normalized_indices(a, axis, dim);
  const int64_t outer = span_numel(ds, 0, axis);
  const int64_t inner = span_numel(ds, axis + 1, ds.size());
  const int64_t n = static_cast<int64_t>(idx.size());
  const double* data = a.in[0];
  // out[o, j, k] = data[o, idx[j], k] for the outer positions o, indices j and inner positions k.
  parallel_for(
      outer * n, a.threads,
      [&](int64_t row) {
        const int64_t o = row / n, j = row % n;
        const double* src = data + (o * dim + idx[static_cast<size_t>(j)]) * inner;
        double* dst = a.out + row * inner;
        for (int64_t k = 0; k < inner; ++k) dst[k] = src[k];
      },
      std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)));
}

void gather_elements(const NodeArgs& a) {
  const Dims& ds = a.in_shapes[0];
  const Dims& is = a.in_shapes[1];
  const int r = static_cast<int>(ds.size());
  const int64_t axis = gather_axis(a.node, r);
  const std::vector<int64_t> idx = normalized_indices(a, axis, ds[axis]);
  const Dims dst = row_major_strides(ds);
  const int64_t n = numel(is);
  // out[c] = data[c with c[axis] = idx[c]], for every coordinate c of the indices.
  parallel_for(
      n, a.threads,
      [&](int64_t i) {
        int64_t q = i, off = 0;
        for (int d = r - 1; d >= 0; --d) {
          const int64_t c = d == axis ? idx[static_cast<size_t>(i)] : q % is[d];
          off += c * dst[d];
          q /= is[d];
        }
        a.out[i] = a.in[0][off];
      },
      4096);
}

}  // namespace kiln::ref
