// The CPU reference of resize: nearest reads one input element per output element, linear
// weighs the 2^k neighbours along the k spatial dims (f32 coordinates and weights as the GPU
// kernels compute them, f64 sums), by the coordinate arithmetic of engine/ir/resize_op.hpp.
#include <vector>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "engine/ir/resize_op.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {
namespace {

// Per spatial dim and output coordinate: the input index (nearest) or both neighbours and the
// upper one's weight (linear).
std::vector<std::vector<ResizeTap>> taps(const NodeArgs& a, const ResizeSpec& s) {
  const Dims& is = a.in_shapes[0];
  const Dims& os = a.out_shape;
  std::vector<std::vector<ResizeTap>> t;
  for (size_t d = kResizeFirstSpatial; d < os.size(); ++d) {
    const float scale = resize_scale(a.node, d, is[d], os[d]);
    std::vector<ResizeTap> dim(static_cast<size_t>(os[d]));
    for (int64_t o = 0; o < os[d]; ++o) {
      const float x = resize_source(s.coord, o, scale, is[d], os[d]);
      if (s.linear) {
        dim[o] = resize_linear_tap(x, is[d]);
      } else {
        dim[o].i0 = resize_nearest_index(s.nearest, x, is[d]);
        dim[o].i1 = dim[o].i0;
      }
    }
    t.push_back(std::move(dim));
  }
  return t;
}

}  // namespace

void resize(const NodeArgs& a) {
  const ResizeSpec s = resize_spec(a.node);
  const Dims& is = a.in_shapes[0];
  const Dims& os = a.out_shape;
  const size_t k = os.size() - kResizeFirstSpatial;
  const std::vector<std::vector<ResizeTap>> t = taps(a, s);
  const int64_t planes = os[0] * os[1];
  const int64_t in_plane = numel(is) / planes, out_plane = numel(os) / planes;
  parallel_for(planes, a.threads, [&](int64_t p) {
    const double* x = a.in[0] + p * in_plane;
    double* y = a.out + p * out_plane;
    std::vector<int64_t> oc(k, 0);
    for (int64_t e = 0; e < out_plane; ++e) {
      int64_t q = e;
      for (size_t d = k; d-- > 0;) {
        oc[d] = q % os[kResizeFirstSpatial + d];
        q /= os[kResizeFirstSpatial + d];
      }
      if (!s.linear) {  // the element itself (integers keep their bits)
        int64_t off = 0;
        for (size_t d = 0; d < k; ++d) off = off * is[kResizeFirstSpatial + d] + t[d][oc[d]].i0;
        y[e] = x[off];
        continue;
      }
      double acc = 0.0;
      for (int corner = 0; corner < (1 << k); ++corner) {
        int64_t off = 0;
        double w = 1.0;
        for (size_t d = 0; d < k; ++d) {
          const ResizeTap& tp = t[d][oc[d]];
          const bool up = (corner >> d) & 1;
          off = off * is[kResizeFirstSpatial + d] + (up ? tp.i1 : tp.i0);
          w *= up ? tp.w1 : 1.0f - tp.w1;
        }
        acc += w * x[off];
      }
      y[e] = acc;
    }
  });
}

}  // namespace kiln::ref
