// CPU reference contractions and windows: conv2d, conv_transpose2d, matmul, max/avg pooling, global
// average pool. Blocked so that the innermost loop runs contiguously over output channels /
// columns.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/base/check.hpp"
#include "engine/base/thread_pool.hpp"
#include "runtime/reference_ops.hpp"

namespace kiln::ref {

namespace {

// [top, left, bottom, right] from the padding attribute ([ph, pw] or 4 values).
std::array<int64_t, 4> padding4(const Node& n) {
  const std::vector<int64_t>& p = n.attr_ints("padding");
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  KILN_ASSERT(p.size() == 4, "padding of {} values", p.size());
  return {p[0], p[1], p[2], p[3]};
}

// acc[0..kn) += x * w[0..kn): the conv/matmul inner loop, contiguous over outputs.
inline void axpy(double* __restrict acc, const double* __restrict w, double x, int64_t kn) {
  for (int64_t k = 0; k < kn; ++k) acc[k] += x * w[k];
}

// Pixels of one output row computed together, sharing every weight row they load.
constexpr int64_t kPixelBlock = 4;

}  // namespace

// y[n, k, oh, ow] = bias[k] + sum_{c, r, s} x[n, g*Cg + c, oh*sh - pt + r*dh, ow*sw - pl + s*dw]
//                                         * w[k, c, r, s]            (g = k / Kg)
// The input is re-laid out NHWC and the filter [G, R, S, Cg, Kg]; each task computes one output
// row (n, oh) for every channel into an [OW, K] buffer, a block of pixels at a time.
void conv2d(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const Dims& ws = a.in_shapes[1];
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t K = ws[0], Cg = ws[1], R = ws[2], S = ws[3];
  const int64_t G = a.node.attr_int("groups");
  const int64_t Kg = K / G;
  KILN_ASSERT(Cg * G == C && Kg * G == K, "{}: groups", a.where);
  const std::vector<int64_t>& stride = a.node.attr_ints("stride");
  const std::vector<int64_t>& dil = a.node.attr_ints("dilation");
  const int64_t sh = stride[0], sw = stride[1], dh = dil[0], dw = dil[1];
  const auto pad = padding4(a.node);
  const int64_t OH = a.out_shape[2], OW = a.out_shape[3];
  const double* x = a.in[0];
  const double* w = a.in[1];
  const double* bias = a.in.size() > 2 ? a.in[2] : nullptr;

  std::vector<double> xt(static_cast<size_t>(N * H * W * C));
  parallel_for(N * C, a.threads, [&](int64_t nc) {
    int64_t n = nc / C, c = nc % C;
    const double* src = x + nc * H * W;
    double* dst = xt.data() + n * H * W * C + c;
    for (int64_t i = 0; i < H * W; ++i) dst[i * C] = src[i];
  });
  std::vector<double> wt(static_cast<size_t>(K * Cg * R * S));
  for (int64_t k = 0; k < K; ++k) {
    int64_t g = k / Kg, kk = k % Kg;
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s)
          wt[(((g * R + r) * S + s) * Cg + c) * Kg + kk] = w[((k * Cg + c) * R + r) * S + s];
  }

  parallel_for(N * OH, a.threads, [&](int64_t row) {
    const int64_t n = row / OH, oh = row % OH;
    std::vector<double> acc(static_cast<size_t>(OW * K));
    for (int64_t ow = 0; ow < OW; ++ow)
      for (int64_t k = 0; k < K; ++k) acc[ow * K + k] = bias ? bias[k] : 0.0;
    const double* xn = xt.data() + n * H * W * C;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t ih = oh * sh - pad[0] + r * dh;
      if (ih < 0 || ih >= H) continue;
      const double* xrow = xn + ih * W * C;
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t ow0 = 0; ow0 < OW; ow0 += kPixelBlock) {
          // The valid pixels of this block for tap (r, s).
          const double* xp[kPixelBlock];
          double* ap[kPixelBlock];
          int np = 0;
          for (int64_t ow = ow0; ow < std::min(OW, ow0 + kPixelBlock); ++ow) {
            const int64_t iw = ow * sw - pad[1] + s * dw;
            if (iw < 0 || iw >= W) continue;
            xp[np] = xrow + iw * C;
            ap[np] = acc.data() + ow * K;
            ++np;
          }
          for (int64_t g = 0; g < G; ++g) {
            const double* wg = wt.data() + ((g * R + r) * S + s) * Cg * Kg;
            for (int64_t c = 0; c < Cg; ++c) {
              const double* wr = wg + c * Kg;
              const int64_t ci = g * Cg + c;
              for (int p = 0; p < np; ++p) axpy(ap[p] + g * Kg, wr, xp[p][ci], Kg);
            }
          }
        }
      }
    }
    double* on = a.out + n * K * OH * OW + oh * OW;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t ow = 0; ow < OW; ++ow) on[k * OH * OW + ow] = acc[ow * K + k];
  });
}

// ONNX ConvTranspose: every input pixel scatters its filter window into the output,
//   y[n, g*Kg + k, ih*sh - pt + r*dh, iw*sw - pl + s*dw]
//       += x[n, g*Cg + c, ih, iw] * w[g*Cg + c, k, r, s]
// (taps outside the output dropped), plus bias[k]. One task per (n, output channel group): the
// tasks write disjoint outputs.
void conv_transpose2d(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const Dims& ws = a.in_shapes[1];
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t Kg = ws[1], R = ws[2], S = ws[3];
  const int64_t G = a.node.attr_int("groups");
  const int64_t Cg = C / G, K = Kg * G;
  KILN_ASSERT(ws[0] == C && Cg * G == C, "{}: groups", a.where);
  const std::vector<int64_t>& stride = a.node.attr_ints("stride");
  const std::vector<int64_t>& dil = a.node.attr_ints("dilation");
  const int64_t sh = stride[0], sw = stride[1], dh = dil[0], dw = dil[1];
  const auto pad = padding4(a.node);
  const int64_t OH = a.out_shape[2], OW = a.out_shape[3];
  const double* x = a.in[0];
  const double* w = a.in[1];
  const double* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  parallel_for(N * G, a.threads, [&](int64_t ng) {
    const int64_t n = ng / G, g = ng % G;
    double* yg = a.out + (n * K + g * Kg) * OH * OW;
    for (int64_t k = 0; k < Kg; ++k)
      for (int64_t i = 0; i < OH * OW; ++i) yg[k * OH * OW + i] = bias ? bias[g * Kg + k] : 0.0;
    for (int64_t c = 0; c < Cg; ++c) {
      const int64_t ci = g * Cg + c;
      const double* xc = x + (n * C + ci) * H * W;
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t r = 0; r < R; ++r) {
          const int64_t oh = ih * sh - pad[0] + r * dh;
          if (oh < 0 || oh >= OH) continue;
          for (int64_t iw = 0; iw < W; ++iw) {
            const double xv = xc[ih * W + iw];
            for (int64_t s = 0; s < S; ++s) {
              const int64_t ow = iw * sw - pad[1] + s * dw;
              if (ow < 0 || ow >= OW) continue;
              const double* wp = w + ((ci * Kg) * R + r) * S + s;
              double* yp = yg + oh * OW + ow;
              for (int64_t k = 0; k < Kg; ++k) yp[k * OH * OW] += xv * wp[k * R * S];
            }
          }
        }
    }
  });
}

// out[b..., m, n] = bias[n] + sum_k A[b..., m, k] * B[b..., k, n], batch dims broadcast; the
// transposes read A strided and B re-laid out [K, N]. Blocked over rows, columns and depth; the
// innermost loop is a contiguous update of a column block of one output row.
void matmul(const NodeArgs& a) {
  const Dims& as = a.in_shapes[0];
  const Dims& bs = a.in_shapes[1];
  const bool ta = a.node.attr_int("transpose_a") != 0;
  const bool tb = a.node.attr_int("transpose_b") != 0;
  const size_t ra = as.size(), rb = bs.size();
  const int64_t M = ta ? as[ra - 1] : as[ra - 2];
  const int64_t Kd = ta ? as[ra - 2] : as[ra - 1];
  const int64_t Nd = tb ? bs[rb - 2] : bs[rb - 1];
  const Dims& os = a.out_shape;
  KILN_ASSERT(os.size() >= 2 && os[os.size() - 2] == M && os.back() == Nd, "{}: matmul shape",
              a.where);
  const Dims ob(os.begin(), os.end() - 2);
  const Dims ast = broadcast_strides(Dims(as.begin(), as.end() - 2), ob);
  const Dims bst = broadcast_strides(Dims(bs.begin(), bs.end() - 2), ob);
  const int64_t nb = numel(ob);
  const double* A = a.in[0];
  const double* B = a.in[1];
  const double* bias = a.in.size() > 2 ? a.in[2] : nullptr;

  std::vector<double> bt;
  if (tb) {
    const int64_t mats = numel(bs) / (Kd * Nd);
    bt.resize(static_cast<size_t>(numel(bs)));
    parallel_for(mats, a.threads, [&](int64_t q) {
      const double* src = B + q * Kd * Nd;
      double* dst = bt.data() + q * Kd * Nd;
      for (int64_t n = 0; n < Nd; ++n)
        for (int64_t k = 0; k < Kd; ++k) dst[k * Nd + n] = src[n * Kd + k];
    });
    B = bt.data();
  }

  // A task: kRows rows of one batch entry. For each [kDepth x kCols] block of B (kept in L2),
  // every row accumulates its kCols outputs (kept in L1) over the block's depth.
  constexpr int64_t kRows = 16, kCols = 256, kDepth = 128;
  const int64_t mblocks = (M + kRows - 1) / kRows;
  parallel_for(nb * mblocks, a.threads, [&](int64_t t) {
    const int64_t bi = t / mblocks, m0 = (t % mblocks) * kRows, m1 = std::min(M, m0 + kRows);
    int64_t aoff = 0, boff = 0, q = bi;
    for (int d = static_cast<int>(ob.size()) - 1; d >= 0; --d) {
      int64_t idx = q % ob[d];
      q /= ob[d];
      aoff += idx * ast[d];
      boff += idx * bst[d];
    }
    const double* Am = A + aoff * M * Kd;
    const double* Bm = B + boff * Kd * Nd;
    double* Om = a.out + bi * M * Nd;
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t n = 0; n < Nd; ++n) Om[m * Nd + n] = bias ? bias[n] : 0.0;
    for (int64_t n0 = 0; n0 < Nd; n0 += kCols) {
      const int64_t nc = std::min(Nd, n0 + kCols) - n0;
      for (int64_t k0 = 0; k0 < Kd; k0 += kDepth) {
        const int64_t k1 = std::min(Kd, k0 + kDepth);
        for (int64_t m = m0; m < m1; ++m) {
          double* orow = Om + m * Nd + n0;
          for (int64_t k = k0; k < k1; ++k) {
            const double av = ta ? Am[k * M + m] : Am[m * Kd + k];
            axpy(orow, Bm + k * Nd + n0, av, nc);
          }
        }
      }
    }
  });
}

// Max pooling ignores padded positions (implicit -inf); average pooling divides by the window
// (count_include_pad=1) or by its valid positions (0). Padding is smaller than the kernel, so
// every window holds at least one valid position.
void pool2d(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t OH = a.out_shape[2], OW = a.out_shape[3];
  const std::vector<int64_t>& kernel = a.node.attr_ints("kernel");
  std::vector<int64_t> stride = a.node.attr_ints("stride");
  if (stride.empty()) stride = kernel;
  const auto pad = padding4(a.node);
  const bool is_max = a.node.op == OpKind::Maxpool2d;
  const bool include_pad = !is_max && a.node.attr_int("count_include_pad") != 0;
  const int64_t kh = kernel[0], kw = kernel[1];
  parallel_for(N * C, a.threads, [&](int64_t plane) {
    const double* xp = a.in[0] + plane * H * W;
    double* op = a.out + plane * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = oh * stride[0] - pad[0];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * stride[1] - pad[1];
        double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t count = 0;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(H, h0 + kh); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(W, w0 + kw); ++iw) {
            const double v = xp[ih * W + iw];
            if (is_max)
              acc = (v > acc || std::isnan(v)) ? v : acc;
            else
              acc += v;
            ++count;
          }
        KILN_ASSERT(count > 0, "{}: empty pooling window", a.where);
        op[oh * OW + ow] = is_max ? acc : acc / static_cast<double>(include_pad ? kh * kw : count);
      }
    }
  });
}

void global_avgpool(const NodeArgs& a) {
  const Dims& xs = a.in_shapes[0];
  const int64_t planes = xs[0] * xs[1];
  const int64_t inner = span_numel(xs, 2, xs.size());
  parallel_for(
      planes, a.threads,
      [&](int64_t p) {
        const double* xp = a.in[0] + p * inner;
        double s = 0;
        for (int64_t i = 0; i < inner; ++i) s += xp[i];
        a.out[p] = s / static_cast<double>(inner);
      },
      16);
}

}  // namespace kiln::ref
