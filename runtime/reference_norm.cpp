// CPU reference normalizations: batchnorm (inference), layernorm / rmsnorm over trailing dims,
// groupnorm / instancenorm per (sample, group), softmax. Statistics in f64, variance biased.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {

namespace {
// Mean and biased variance of v[0..n).
void moments(const double* v, int64_t n, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += v[i];
  const double m = s / static_cast<double>(n);
  double q = 0;
  for (int64_t i = 0; i < n; ++i) q += (v[i] - m) * (v[i] - m);
  *mean = m;
  *var = q / static_cast<double>(n);
}

int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}
}  // namespace

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], c = dim 1.
void batchnorm(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int64_t N = xs[0], C = xs[1];
  const int64_t inner = span_numel(xs, 2, xs.size());
  const double eps = a.node.attr_float("eps");
  const double *scale = a.in[1], *bias = a.in[2], *mean = a.in[3], *var = a.in[4];
  parallel_for(
      N * C, a.threads,
      [&](int64_t p) {
        const int64_t c = p % C;
        const double inv = 1.0 / std::sqrt(var[c] + eps);
        const double* xp = a.in[0] + p * inner;
        double* yp = a.out + p * inner;
        for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - mean[c]) * inv * scale[c] + bias[c];
      },
      std::max<int64_t>(1, 4096 / inner));
}

// layernorm: y = (x - mean) / sqrt(var + eps) * scale + bias over dims [axis, rank);
// rmsnorm:   y = x / sqrt(mean(x^2) + eps) * scale.
void lastdims_norm(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int64_t axis = norm_axis(a.node.attr_int("axis"), xs.size());
  const int64_t D = span_numel(xs, static_cast<size_t>(axis), xs.size());
  const int64_t rows = numel(xs) / D;
  const double eps = a.node.attr_float("eps");
  const bool rms = a.node.op == OpKind::Rmsnorm;
  const double* scale = a.in.size() > 1 ? a.in[1] : nullptr;
  const double* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  parallel_for(
      rows, a.threads,
      [&](int64_t row) {
        const double* xp = a.in[0] + row * D;
        double* yp = a.out + row * D;
        double center = 0, inv = 0;
        if (rms) {
          double q = 0;
          for (int64_t i = 0; i < D; ++i) q += xp[i] * xp[i];
          inv = 1.0 / std::sqrt(q / static_cast<double>(D) + eps);
        } else {
          double var = 0;
          moments(xp, D, &center, &var);
          inv = 1.0 / std::sqrt(var + eps);
        }
        for (int64_t i = 0; i < D; ++i) {
          double y = (xp[i] - center) * inv;
          if (scale) y *= scale[i];
          if (bias) y += bias[i];
          yp[i] = y;
        }
      },
      std::max<int64_t>(1, 4096 / D));
}

// Statistics per (n, group) over the group's channels and every spatial position; then the
// per-channel affine. instancenorm is groupnorm with one channel per group.
void channel_norm(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int64_t N = xs[0], C = xs[1];
  const int64_t inner = span_numel(xs, 2, xs.size());
  const int64_t G = a.node.op == OpKind::Groupnorm ? a.node.attr_int("groups") : C;
  KILN_ASSERT(G >= 1 && C % G == 0, "{}: {} groups for {} channels", a.where, G, C);
  const int64_t Cg = C / G;
  const double eps = a.node.attr_float("eps");
  const double* scale = a.in.size() > 1 ? a.in[1] : nullptr;
  const double* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  parallel_for(N * G, a.threads, [&](int64_t ng) {
    const int64_t g = ng % G;
    const double* xp = a.in[0] + ng * Cg * inner;
    double* yp = a.out + ng * Cg * inner;
    double mean = 0, var = 0;
    moments(xp, Cg * inner, &mean, &var);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t cc = 0; cc < Cg; ++cc) {
      const int64_t c = g * Cg + cc;
      const double sc = scale ? scale[c] : 1.0, bi = bias ? bias[c] : 0.0;
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = cc * inner + i;
        yp[j] = (xp[j] - mean) * inv * sc + bi;
      }
    }
  });
}

// y = exp(x - max) / sum(exp(x - max)) along `axis`; log_softmax: y = x - max - log(sum), never
// the log of a softmax that underflowed to 0.
void softmax(const NodeArgs& a) {
  const bool log_form = a.node.op == OpKind::LogSoftmax;
  const Dims& xs = a.in_shapes[0];
  const size_t axis = static_cast<size_t>(norm_axis(a.node.attr_int("axis"), xs.size()));
  const int64_t outer = span_numel(xs, 0, axis);
  const int64_t D = xs[axis];
  const int64_t inner = span_numel(xs, axis + 1, xs.size());
  parallel_for(
      outer * inner, a.threads,
      [&](int64_t t) {
        const int64_t o = t / inner, i = t % inner;
        const double* xp = a.in[0] + o * D * inner + i;
        double* yp = a.out + o * D * inner + i;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t d = 0; d < D; ++d) {
          const double v = xp[d * inner];
          mx = (v > mx || std::isnan(v)) ? v : mx;
        }
        double sum = 0;
        for (int64_t d = 0; d < D; ++d) {
          yp[d * inner] = std::exp(xp[d * inner] - mx);
          sum += yp[d * inner];
        }
        if (log_form) {
          const double ls = std::log(sum);
          for (int64_t d = 0; d < D; ++d) yp[d * inner] = (xp[d * inner] - mx) - ls;
          return;
        }
        for (int64_t d = 0; d < D; ++d) yp[d * inner] /= sum;
      },
      std::max<int64_t>(1, 4096 / D));
}

}  // namespace kiln::ref
