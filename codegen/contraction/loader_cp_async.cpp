// The cp.async loaders of the mma.sync and the cp.async wgmma kernels: `load_a(s, kt)` and
// `load_b(s, kt)` copy k tile kt of A and B into one stage's shared tiles (G::a_off / G::b_off),
// 16- or 8-byte chunks where the operand allows them (zero-filled out of range), else elements
// gathered and stored synchronously. A conv's A is the implicit-GEMM (im2col) gather of the
// NHWC input with zero-fill predicates; a matmul's operands and a conv's filter are strided.
#include "codegen/contraction/tensor_core.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

std::string k_offset(Writer& w, const StridedOperand& o, const std::string& kk,
                     const std::string& tag) {
  if (!o.conv_filter_kcrs) return fmt::format("(long long)({}) * {}", kk, o.sk);
  w.line("const int rs{0} = ({1}) / {2}, c{0} = ({1}) - rs{0} * {2};", tag, kk, o.c);
  w.line("const int r{0} = rs{0} / {1}, x{0} = rs{0} - r{0} * {1};", tag, o.s);
  return fmt::format("c{0} * {1} + r{0} * {2} + x{0} * {3}", tag, o.ws1, o.ws2, o.ws3);
}

// One element-by-element chunk: 8 values gathered into four words and stored synchronously.
void emit_scalar_chunk(Writer& w, const StridedOperand& o) {
  w.line("unsigned pk[4] = {{0u, 0u, 0u, 0u}};");
  w.line("#pragma unroll");
  {
    auto el = w.block("for (int j = 0; j < 8; ++j) {{");
    if (o.kmajor) {
      w.line("const long long emn = mn;");
      w.line("const int ek = k + j;");
    } else {
      w.line("const long long emn = mn + j;");
      w.line("const int ek = k;");
    }
    w.line("const bool v = emn < {} && ek < {};", o.mn_ext, o.k_ext);
    std::string ko = k_offset(w, o, "ek", "1");
    w.line("const unsigned e = v ? (unsigned){}[{} + emn * {} + {}] : 0u;", o.ptr, o.base, o.smn,
           ko);
    w.line("pk[j >> 1] |= e << ((j & 1) * 16);");
  }
  w.line("kc_st_shared_v4(dst, pk[0], pk[1], pk[2], pk[3]);");
}

void emit_strided_chunk(Writer& w, const StridedOperand& o, int bk, int threads, int cpr,
                        const std::string& origin, const char* off_fn, const std::string& tid) {
  w.line("const int id = {} + p * {};", tid, threads);
  w.line("const int cr = id / {}, cc = id % {};", cpr, cpr);
  // Logical chunk origin: (mn, k) of its first element; the chunk runs along the contiguous dim.
  if (o.kmajor) {
    w.line("const int lmn = cr, lk = cc * 8;");
  } else {
    w.line("const int lmn = cc * 8, lk = cr;");
  }
  w.line("const long long mn = {} + lmn;", origin);
  w.line("const int k = kt * {} + lk;", bk);
  w.line("const unsigned dst = kc_smem_u32(s + G::{}(lmn, lk));", off_fn);
  if (o.vec) {
    // The whole chunk is in or out (extents along the contiguous dim are multiples of 8).
    w.line("const bool v = mn < {} && k < {};", o.mn_ext, o.k_ext);
    std::string ko = k_offset(w, o, "k", "0");
    w.line("const unsigned short* src = v ? {} + {} + mn * {} + {} : {};", o.ptr, o.base, o.smn, ko,
           o.ptr);
    w.line("kc_cp_async16(dst, src, v);");
  } else if (o.half) {
    // Two 8-byte copies, each in or out (the contiguous extent is a multiple of 4).
    for (int h = 0; h < 2; ++h) {
      w.line("const bool v{} = mn < {} && k + {} < {};", h, o.mn_ext, 4 * h, o.k_ext);
      std::string ko = k_offset(w, o, fmt::format("k + {}", 4 * h), fmt::format("h{}", h));
      w.line("kc_cp_async8(dst + {}, v{} ? {} + {} + mn * {} + {} : {}, v{});", 8 * h, h, o.ptr,
             o.base, o.smn, ko, o.ptr, h);
    }
  } else {
    emit_scalar_chunk(w, o);
  }
}

// Emits `auto load_<name> = [&](unsigned short* s, int kt) {...};` for a strided operand whose
// tile is `rows` (BM or BN) x BK, with the block origin `origin` on the mn side.
// `threads` loader threads, this one `tid` (an expression) among them.
void emit_strided_loader(Writer& w, const StridedOperand& o, const std::string& name, int rows,
                         int bk, int threads, const std::string& origin, const char* off_fn,
                         const std::string& tid) {
  // Chunks: K-major tile: rows x (bk/8); MN-major tile: bk x (rows/8).
  int cpr = o.kmajor ? bk / 8 : rows / 8;
  int nrow = o.kmajor ? rows : bk;
  int chunks = nrow * cpr;
  KILN_ASSERT(chunks % threads == 0, "tile {}x{} does not split over {} threads", rows, bk,
              threads);
  int passes = chunks / threads;
  w.open("auto load_{} = [&](unsigned short* s, int kt) {{", name);
  w.line("#pragma unroll");
  w.open("for (int p = 0; p < {}; ++p) {{", passes);
  emit_strided_chunk(w, o, bk, threads, cpr, origin, off_fn, tid);
  w.close();
  w.close("};");
}

// The per-pass output pixel of the conv gather: its image's offset and its window's top-left
// input row and column (far out of range for rows past M).
void emit_conv_pixels(TcKernel& k, const std::string& tid, int passes, int cpr) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const int lthreads = k.L.loader_threads;
  std::string oh = k.a.dim(c.oh), ow = k.a.dim(c.ow);
  b.line("long long a_base[{}];", passes);
  b.line("int a_ih[{}], a_iw[{}];", passes, passes);
  b.line("#pragma unroll");
  auto l = b.block("for (int p = 0; p < {}; ++p) {{", passes);
  b.line("const long long m = m0 + ({} + p * {}) / {};", tid, lthreads, cpr);
  b.open("if (m < {}) {{", k.m_code);
  b.line("long long q = m;");
  b.line("const int ow = (int)(q % {}); q /= {};", ow, ow);
  b.line("const int oh = (int)(q % {}); q /= {};", oh, oh);
  b.line("a_base[p] = q * {};", k.v.xst[0]);
  b.line("a_ih[p] = oh * {} - {};", c.stride_h, c.pad_t);
  b.line("a_iw[p] = ow * {} - {};", c.stride_w, c.pad_l);
  b.close();
  b.open("else {{");
  b.line("a_base[p] = 0;");
  b.line("a_ih[p] = -(1 << 29);");
  b.line("a_iw[p] = -(1 << 29);");
  b.close();
}

// C % 4 == 0: each 8-byte half of the chunk is 4 channels of one filter tap.
void emit_conv_halves(TcKernel& k, const std::string& h, const std::string& wdim) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const std::string& xs = k.v.xs;
  for (int hh = 0; hh < 2; ++hh) {
    b.line("const int k{0} = k + {1};", hh, 4 * hh);
    b.line("const int rs{0} = k{0} / {1}, cc{0} = k{0} - rs{0} * {1};", hh, c.c);
    b.line("const int r{0} = rs{0} / {1}, sx{0} = rs{0} - r{0} * {1};", hh, c.s);
    b.line("const int ih{0} = a_ih[p] + r{0} * {1}, iw{0} = a_iw[p] + sx{0} * {2};", hh, c.dil_h,
           c.dil_w);
    b.line(
        "const bool v{0} = k{0} < {1} && ih{0} >= 0 && ih{0} < {2} && iw{0} >= 0 && iw{0} < "
        "{3};",
        hh, k.v.kred, h, wdim);
    b.line(
        "kc_cp_async8(dst + {0}, v{1} ? {2} + a_base[p] + ih{1} * {3} + iw{1} * {4} + cc{1} "
        ": {2}, "
        "v{1});",
        8 * hh, hh, xs, k.v.xst[2], k.v.xst[3]);
  }
}

// Any C: the chunk's 8 channels element by element, (r, s, c) of its first k decoded once and
// then stepped (no div/mod in the element loop: the C = 3 stem's loader).
void emit_conv_scalars(TcKernel& k, const std::string& h, const std::string& wdim) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const std::vector<std::string>& xst = k.v.xst;
  b.line("unsigned pk[4] = {{0u, 0u, 0u, 0u}};");
  b.line("const int rs0 = k / {};", c.c);
  b.line("int cc = k - rs0 * {}, r = rs0 / {};", c.c, c.s);
  b.line("int sx = rs0 - r * {};", c.s);
  b.line("#pragma unroll");
  {
    auto el = b.block("for (int j = 0; j < 8; ++j) {{");
    b.line("const int kj = k + j;");
    b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
    b.line("const bool v = kj < {} && ih >= 0 && ih < {} && iw >= 0 && iw < {};", k.v.kred, h,
           wdim);
    b.line("const unsigned e = v ? (unsigned){}[a_base[p] + ih * {} + iw * {} + cc * {}] : 0u;",
           k.v.xs, xst[2], xst[3], xst[1]);
    b.line("pk[j >> 1] |= e << ((j & 1) * 16);");
    b.line("if (++cc == {}) {{ cc = 0; if (++sx == {}) {{ sx = 0; ++r; }} }}", c.c, c.s);
  }
  b.line("kc_st_shared_v4(dst, pk[0], pk[1], pk[2], pk[3]);");
}

void emit_conv_gather(TcKernel& k, const std::string& tid) {
  Writer& b = k.body;
  const ConvProblem& c = k.p.conv;
  const ContractionConfig& cfg = k.L.cfg;
  const int lthreads = k.L.loader_threads;
  int cpr = cfg.bk / 8;
  int passes = cfg.bm * cpr / lthreads;
  KILN_ASSERT(cfg.bm * cpr % lthreads == 0, "A tile does not split over threads");
  emit_conv_pixels(k, tid, passes, cpr);
  std::string h = k.a.dim(c.h), wdim = k.a.dim(c.w);
  b.open("auto load_a = [&](unsigned short* s, int kt) {{");
  b.line("#pragma unroll");
  b.open("for (int p = 0; p < {}; ++p) {{", passes);
  b.line("const int id = {} + p * {};", tid, lthreads);
  b.line("const int lm = id / {}, lk = (id % {}) * 8;", cpr, cpr);
  b.line("const unsigned dst = kc_smem_u32(s + G::a_off(lm, lk));");
  b.line("const int k = kt * {} + lk;", cfg.bk);
  if (k.v.conv_a_vec) {
    const std::vector<std::string>& xst = k.v.xst;
    b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
    b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
    b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
    b.line("const bool v = k < {} && ih >= 0 && ih < {} && iw >= 0 && iw < {};", k.v.kred, h, wdim);
    b.line("const unsigned short* src = v ? {} + a_base[p] + ih * {} + iw * {} + cc : {};", k.v.xs,
           xst[2], xst[3], k.v.xs);
    b.line("kc_cp_async16(dst, src, v);");
  } else if (k.v.conv_a_half) {
    emit_conv_halves(k, h, wdim);
  } else {
    emit_conv_scalars(k, h, wdim);
  }
  b.close();
  b.close("};");
}

}  // namespace

void emit_cp_async_loaders(TcKernel& k, const std::string& conv_tid,
                           const std::string& strided_tid) {
  const ContractionConfig& cfg = k.L.cfg;
  const int lthreads = k.L.loader_threads;
  if (k.p.is_conv)
    emit_conv_gather(k, conv_tid);
  else
    emit_strided_loader(k.body, k.v.aop, "a", cfg.bm, cfg.bk, lthreads, "m0", "a_off", strided_tid);
  emit_strided_loader(k.body, k.v.bop, "b", cfg.bn, cfg.bk, lthreads, "n0", "b_off", strided_tid);
}

}  // namespace kiln::contraction
