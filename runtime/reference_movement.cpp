// The CPU reference of the byte-moving movement ops (concat, split, slice, expand, tile,
// depth_to_space, space_to_depth, trilu) and of pad's reflect and edge modes: each output element
// read from one input element (or zero, for trilu), by the index arithmetic the op table shares
// with codegen (engine/ir/movement_ops.hpp).
#include <algorithm>
#include <functional>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/movement_ops.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {
namespace {

// Fills `out` (shape `os`) row by row (rows along the last dim): element oc reads
// in[offset(oc)], or 0 where offset returns -1.
void gather(const NodeArgs& a, double* out, const Dims& os, const double* in,
            const std::function<int64_t(const int64_t* oc)>& offset) {
  const size_t r = os.size();
  if (r == 0) {
    out[0] = in[offset(nullptr)];
    return;
  }
  const int64_t inner = os[r - 1];
  const int64_t rows = numel(os) / inner;
  parallel_for(
      rows, a.threads,
      [&](int64_t row) {
        Dims oc(r, 0);
        int64_t q = row;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
          oc[d] = q % os[d];
          q /= os[d];
        }
        double* o = out + row * inner;
        for (int64_t i = 0; i < inner; ++i) {
          oc[r - 1] = i;
          const int64_t off = offset(oc.data());
          o[i] = off < 0 ? 0.0 : in[off];
        }
      },
      std::max<int64_t>(1, 4096 / inner));
}

// Row-major offset of input coordinates `ic` in shape `is`.
int64_t offset_of(const Dims& is, const int64_t* ic) {
  int64_t off = 0;
  for (size_t d = 0; d < is.size(); ++d) off = off * is[d] + ic[d];
  return off;
}

}  // namespace

void concat(const NodeArgs& a) {
  const Dims& os = a.out_shape;
  const int64_t axis = movement_axis(a.node, static_cast<int>(os.size()));
  const int64_t outer = span_numel(os, 0, axis);
  const int64_t inner = span_numel(os, axis + 1, os.size());
  const int64_t out_block = os[axis] * inner;
  int64_t at = 0;  // the input's first coordinate along the axis
  for (size_t k = 0; k < a.in.size(); ++k) {
    const int64_t block = a.in_shapes[k][axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy(a.in[k] + o * block, a.in[k] + (o + 1) * block, a.out + o * out_block + at * inner);
    at += a.in_shapes[k][axis];
  }
  KILN_ASSERT(at == os[axis], "{}: concat inputs fill {} of {} along the axis", a.where, at,
              os[axis]);
}

void split(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const int64_t axis = movement_axis(a.node, static_cast<int>(is.size()));
  const int64_t outer = span_numel(is, 0, axis);
  const int64_t inner = span_numel(is, axis + 1, is.size());
  const int64_t in_block = is[axis] * inner;
  int64_t at = 0;
  for (size_t k = 0; k < a.outs.size(); ++k) {
    const int64_t block = a.out_shapes[k][axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy(a.in[0] + o * in_block + at * inner, a.in[0] + o * in_block + at * inner + block,
                a.outs[k] + o * block);
    at += a.out_shapes[k][axis];
  }
  KILN_ASSERT(at == is[axis], "{}: split outputs take {} of {} along the axis", a.where, at,
              is[axis]);
}

void slice(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const std::vector<SliceAxis> sa = slice_axes(a.node, is);
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    int64_t off = 0;
    for (size_t d = 0; d < is.size(); ++d) off = off * is[d] + sa[d].start + sa[d].step * oc[d];
    return off;
  });
}

void expand(const NodeArgs& a) {
  const Dims st = broadcast_strides(a.in_shapes[0], a.out_shape);
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    int64_t off = 0;
    for (size_t d = 0; d < st.size(); ++d) off += oc[d] * st[d];
    return off;
  });
}

void tile(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    int64_t off = 0;
    for (size_t d = 0; d < is.size(); ++d) off = off * is[d] + oc[d] % is[d];
    return off;
  });
}

void depth_to_space(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const int64_t b = a.node.attr_int("blocksize");
  const bool dcr = a.node.attr_str("mode") == "DCR";
  const int64_t c_out = is[1] / (b * b);
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    const int64_t i = oc[2] % b, j = oc[3] % b;
    const int64_t c = dcr ? (i * b + j) * c_out + oc[1] : oc[1] * b * b + i * b + j;
    const int64_t ic[4] = {oc[0], c, oc[2] / b, oc[3] / b};
    return offset_of(is, ic);
  });
}

void space_to_depth(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const int64_t b = a.node.attr_int("blocksize");
  const int64_t c_in = is[1];
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    const int64_t blk = oc[1] / c_in, c = oc[1] % c_in;
    const int64_t ic[4] = {oc[0], c, oc[2] * b + blk / b, oc[3] * b + blk % b};
    return offset_of(is, ic);
  });
}

void trilu(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const size_t r = is.size();
  const bool upper = a.node.attr_int("upper") != 0;
  const int64_t k = a.node.attr_int("k");
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) -> int64_t {
    const int64_t diag = oc[r - 1] - oc[r - 2];
    if (upper ? diag < k : diag > k) return -1;
    return offset_of(is, oc);
  });
}

void pad_mirror(const NodeArgs& a) {
  const Dims& is = a.in_shapes[0];
  const size_t r = is.size();
  const std::vector<int64_t>& pads = a.node.attr_ints("pads");
  const bool reflect = a.node.attr_str("mode") == "reflect";
  KILN_ASSERT(reflect || a.node.attr_str("mode") == "edge", "{}: pad mode {}", a.where,
              a.node.attr_str("mode"));
  gather(a, a.out, a.out_shape, a.in[0], [&](const int64_t* oc) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) {
      int64_t x = oc[d] - pads[d];
      const int64_t n = is[d];
      if (reflect)
        x = x < 0 ? -x : (x >= n ? 2 * (n - 1) - x : x);
      else
        x = std::clamp<int64_t>(x, 0, n - 1);
      off = off * n + x;
    }
    return off;
  });
}

}  // namespace kiln::ref
