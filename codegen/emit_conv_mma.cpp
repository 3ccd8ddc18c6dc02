// Tensor-core (mma.sync m16n8k16) kernels for conv2d (implicit GEMM, NHWC activations) and
// matmul (batched, transposes), f16/bf16 in, f32 accumulate, sm_80+. The mainloop lives in
// codegen/device/contraction_mma.cuh; this file generates the operand loaders (im2col address
// computation with zero-fill predicates, or strided matmul addressing) and the fused epilogue.
#include <algorithm>
#include <set>

#include "codegen/contraction_common.hpp"
#include "codegen/kernel_assembly.hpp"
#include "codegen/writer.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

bool static_multiple(const Dim& d, int64_t m) {
  return d.is_static() && d.value() % m == 0;
}

// A matmul operand, or a conv filter, seen as a GEMM operand: element (mn, k) lies at
// base + mn * smn + koff(k). `kmajor`: k is the contiguous dim (smem tile [rows][BK]).
struct StridedOperand {
  std::string ptr;     // parameter name
  std::string base;    // extra offset (batch), code
  std::string smn;     // stride of the mn index, code
  std::string mn_ext;  // extent of mn, code
  std::string k_ext;   // extent of k, code
  bool kmajor = true;
  bool vec = false;   // 16-byte chunks along the contiguous dim are contiguous and aligned
  bool half = false;  // K-major, not vec: each 8-byte half of a chunk is (4 channels, C % 4 == 0)
  // Offset of k index `kk`: lines of setup code and the offset expression.
  std::string sk;                 // k stride (when !conv_filter)
  bool conv_filter_kcrs = false;  // k = (r, s, c) decoded against a KCRS-strided filter
  int64_t c = 0, s = 0;
  std::string ws1, ws2, ws3;
};

std::string k_offset(Writer& w, const StridedOperand& o, const std::string& kk,
                     const std::string& tag) {
  if (!o.conv_filter_kcrs) return fmt::format("(long long)({}) * {}", kk, o.sk);
  w.line("const int rs{0} = ({1}) / {2}, c{0} = ({1}) - rs{0} * {2};", tag, kk, o.c);
  w.line("const int r{0} = rs{0} / {1}, x{0} = rs{0} - r{0} * {1};", tag, o.s);
  return fmt::format("c{0} * {1} + r{0} * {2} + x{0} * {3}", tag, o.ws1, o.ws2, o.ws3);
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

}  // namespace

bool mma_supported(const Problem& p) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return false;
  const Graph& g = *p.graph;
  if (p.is_conv) {
    if (p.conv.groups != 1) return false;
    if (g.tensor(p.x).desc.layout != Layout::NHWC) return false;
    return true;
  }
  return true;
}

bool wgmma_supported(const Problem& p) {
  if (!mma_supported(p)) return false;
  // A must be K-major (conv: always; matmul: not transposed).
  return p.is_conv || !p.mm.ta;
}

bool tma_supported(const Problem& p) {
  if (!wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16)) return false;
  const Graph& g = *p.graph;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  if (p.is_conv) {  // a 1x1 stride-1 conv over dense NHWC is a GEMM of [N*H*W, C] x [K, C]^T
    const ConvProblem& c = p.conv;
    return c.r == 1 && c.s == 1 && c.stride_h == 1 && c.stride_w == 1 && c.pad_t == 0 &&
           c.pad_l == 0 && c.groups == 1 && c.c % 8 == 0 && xd.layout == Layout::NHWC &&
           wd.layout == Layout::NHWC && c.oh == c.h && c.ow == c.w;
  }
  // An unbatched matmul of dense row-major operands (or batch dims folded into M), A not
  // transposed; rows 16-byte aligned.
  const MatmulProblem& m = p.mm;
  if (m.ta || (xd.shape.size() != 2 && m.fold.empty()) || wd.shape.size() != 2) return false;
  if (xd.layout != Layout::NCHW || wd.layout != Layout::NCHW) return false;
  if (!m.k.is_static() || m.k.value() % 8 != 0) return false;
  return m.tb || (m.n.is_static() && m.n.value() % 8 == 0);
}

// The im2col bounding box's upper corner along one spatial dim (offset from the last input
// element): the window of the last output position starts at (out - 1) * stride - pad.
static int64_t im2col_upper(int64_t in, int64_t out, int64_t stride, int64_t pad) {
  return (out - 1) * stride - pad - (in - 1);
}

bool tma_spatial_supported(const Problem& p) {
  if (!p.is_conv || !wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16))
    return false;
  const Graph& g = *p.graph;
  const ConvProblem& c = p.conv;
  return c.groups == 1 && c.c % 64 == 0 && c.stride_h <= 8 && c.stride_w <= 8 && c.h.is_static() &&
         c.w.is_static() && c.oh.is_static() && c.ow.is_static() &&
         g.tensor(p.x).desc.layout == Layout::NHWC && g.tensor(p.w).desc.layout == Layout::NHWC;
}

bool tma_im2col_supported(const Problem& p) {
  if (!tma_spatial_supported(p)) return false;
  const ConvProblem& c = p.conv;
  // The 4-D map's bounding-box corners are signed 8-bit, the tap offsets 16-bit.
  auto corner = [](int64_t v) { return v >= -128 && v <= 127; };
  return corner(-c.pad_l) && corner(-c.pad_t) &&
         corner(im2col_upper(c.w.value(), c.ow.value(), c.stride_w, c.pad_l)) &&
         corner(im2col_upper(c.h.value(), c.oh.value(), c.stride_h, c.pad_t)) &&
         (c.s - 1) * c.dil_w < 65536 && (c.r - 1) * c.dil_h < 65536;
}

bool tma_rowfold_supported(const Problem& p) {
  if (!p.is_conv || !wgmma_supported(p) || (p.dtype != DType::F16 && p.dtype != DType::BF16))
    return false;
  const Graph& g = *p.graph;
  const ConvProblem& c = p.conv;
  const int64_t row = c.s * c.c;  // one filter row's elements: whole 16-byte chunks
  return c.groups == 1 && c.c * c.stride_w == 8 && c.dil_w == 1 &&
         (row == 16 || row == 32 || row == 64) && c.pad_l * c.c % 8 == 0 && c.h.is_static() &&
         c.w.is_static() && c.oh.is_static() && c.ow.is_static() && c.w.value() * c.c % 8 == 0 &&
         g.tensor(p.x).desc.layout == Layout::NHWC && g.tensor(p.w).desc.layout == Layout::NHWC;
}

std::pair<int, int> rowfold_pixel_tile(int64_t ow, int bm) {
  // Whole warpgroups (64 pixels) per output row; a 128-pixel tile takes one row of up to 128.
  const int bw = bm == 128 && ow > 64 ? 128 : 64;
  return {bm / bw, bw};
}

namespace {

// The output-pixel block of a spatially tiled conv CTA (BM = bh x bw pixels of one image): the
// heuristics score tiles by the same blocks.
std::pair<int, int> spatial_tile(const ConvProblem& c, int bm) {
  return spatial_pixel_tile(c.ow.value(), bm);
}

// `void kc_wgmma4_n<N>(desc_a[4], desc_b[4], acc)`: the four wgmma.mma_async m64nNk16 of a
// 64-wide k tile (scale-d = 1) in one asm statement.
std::string wgmma_function(int n, bool bf16, bool b_kmajor) {
  Writer w;
  const int regs = n / 2;
  w.open(
      "__device__ __forceinline__ void kc_wgmma4_n{}(const unsigned long long (&da)[4], const "
      "unsigned long long (&db)[4], float (&acc)[1][{}][4]) {{",
      n, n / 8);
  w.line("asm volatile(");
  w.line("    \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{}, 0;\\n\"", regs + 8);
  std::string list = "{";
  for (int i = 0; i < regs; ++i) list += fmt::format("{}%{}", i ? ", " : "", i);
  list += "}";
  for (int kk = 0; kk < 4; ++kk)
    w.line(
        "    \"wgmma.mma_async.sync.aligned.m64n{}k16.f32.{}.{} {}, %{}, %{}, p, 1, 1, 0, {};\\n\"",
        n, bf16 ? "bf16" : "f16", bf16 ? "bf16" : "f16", list, regs + kk, regs + 4 + kk,
        b_kmajor ? 0 : 1);
  w.line("    \"}}\\n\"");
  std::string outs;
  for (int i = 0; i < regs; ++i)
    outs += fmt::format("{}\"+f\"(acc[0][{}][{}])", i ? ", " : "", i / 4, i % 4);
  w.line("    : {}", outs);
  w.line(
      "    : \"l\"(da[0]), \"l\"(da[1]), \"l\"(da[2]), \"l\"(da[3]), \"l\"(db[0]), \"l\"(db[1]), "
      "\"l\"(db[2]), \"l\"(db[3]), \"n\"(1));");
  w.close();
  return w.str();
}

}  // namespace

KernelSpec emit_mma(const Problem& p_in, const ContractionConfig& cfg_in, int sm) {
  const Problem p = fold_matmul_batch(p_in);
  const Graph& g = *p.graph;
  // Split-K (grid.z = splits) takes conv and unbatched matmul; batched matmul uses grid.z for the
  // batch and runs unsplit.
  ContractionConfig cfg = cfg_in;
  if (!p.is_conv && !p.mm.batch.empty()) cfg.split_k = 1;
  cfg.split_k = std::max(1, cfg.split_k);
  const int splits = cfg.split_k;
  ArgList a;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  std::string xs = a.tensor(g, p.x, true), ws = a.tensor(g, p.w, true);
  auto xst = stride_code(a, xd), wst = stride_code(a, wd);
  const int threads = cfg.threads();
  const bool bf16 = p.dtype == DType::BF16;
  const bool wg = cfg.kind == ContractionConfig::Kind::Wgmma;
  KILN_ASSERT(!wg || (cfg.bk == 64 && wgmma_supported(p)), "{}: wgmma config {} not applicable",
              p.where, cfg.str());
  // Warp-specialized wgmma: the loaders run on the producer warpgroup's 128 threads only.
  const bool warp_spec = wg && cfg.ws;
  KILN_ASSERT(!warp_spec || splits == 1, "{}: warp-specialized config {} with split-K", p.where,
              cfg.str());
  // TMA: plain-GEMM operands (2-D boxes), else a conv tiled by blocks of output pixels whose
  // input windows are 4-D boxes of the NHWC input, one per filter tap (zero-filled padding).
  // im2col: the same convs, A by im2col-mode TMA over GEMM rows (BM consecutive output pixels).
  // Row-folded: A as whole input rows per filter row (contraction_wgmma.cuh), M tiles are output
  // pixel blocks as in the spatial form.
  const bool rowfold = cfg.tma && cfg.rowfold && tma_rowfold_supported(p);
  const bool im2col = cfg.tma && !cfg.rowfold && cfg.im2col && tma_im2col_supported(p);
  const bool spatial =
      cfg.tma && !cfg.rowfold && !cfg.im2col && !tma_supported(p) && tma_spatial_supported(p);
  KILN_CHECK(!cfg.tma || (warp_spec && cfg.bm <= 128 &&
                          (cfg.rowfold  ? rowfold
                           : cfg.im2col ? im2col
                                        : tma_supported(p) || spatial)),
             "{}: config {} needs TMA-loadable operands (an unbatched matmul with A not "
             "transposed and 16-byte aligned rows, or an NHWC conv with static spatial dims and "
             "C a multiple of 64, or a 1x1 stride-1 one with C a multiple of 8; im2col: an NHWC "
             "conv of the first kind with padding and bounding-box corners within 127; row-fold: "
             "an NHWC conv with C x stride_w = 8, S x C = 16, 32 or 64 and unit column dilation)",
             p.where, cfg.str());
  // Output-pixel blocks of one image per CTA (the spatial and the row-folded forms).
  const bool pixel_blocks = spatial || rowfold;
  const std::pair<int, int> sp_tile = spatial   ? spatial_tile(p.conv, cfg.bm)
                                      : rowfold ? rowfold_pixel_tile(p.conv.ow.value(), cfg.bm)
                                                : std::pair<int, int>{0, 0};
  // Row-fold: 16-byte chunks per filter row; the A box's rows and the kernel's shared memory as
  // KcWgmma / KcWgmmaWs lay them out (the kernel static_asserts both).
  const int rf_q = rowfold ? static_cast<int>(p.conv.s * p.conv.c / 8) : 0;
  const int rf_sub_rows = rowfold ? (sp_tile.second + rf_q - 1 + 7) / 8 * 8 : 0;
  const int rf_smem = [&] {
    if (!rowfold) return 0;
    const int a_load = 8 / rf_q * sp_tile.first * rf_sub_rows * 8;
    const int stage = (a_load + 511) / 512 * 512 + cfg.bn * 64;
    return stage * cfg.stages * 2 + 1024 + 2 * cfg.stages * 8;
  }();
  const int lthreads = warp_spec ? 128 : threads;
  const std::string ltid_conv = warp_spec ? "ltid" : "tid";
  const std::string ltid_strided = warp_spec ? "ltid" : "threadIdx.x";

  Writer w;
  std::vector<std::string> coords;
  std::string name;
  Dim gm, gn, gbatch(1);
  bool a_kmajor = true, b_kmajor = true;
  StridedOperand bop;
  StridedOperand aop;
  bool conv_a_vec = false, conv_a_half = false;
  std::string kred;  // code
  int64_t kred_static = 0;

  if (p.is_conv) {
    const ConvProblem& c = p.conv;
    gm = c.n * c.oh * c.ow;
    gn = Dim(c.k);
    kred_static = c.r * c.s * c.c;
    kred = fmt::format("{}", kred_static);
    conv_a_vec = c.c % 8 == 0 && xst[1] == "1LL";
    conv_a_half = !conv_a_vec && c.c % 4 == 0 && xst[1] == "1LL";
    bop.ptr = ws;
    bop.base = "0";
    bop.smn = wst[0];
    bop.mn_ext = fmt::format("{}", c.k);
    bop.k_ext = kred;
    bop.kmajor = true;
    if (wd.layout == Layout::NHWC) {  // KRSC: (r, s, c) is one contiguous run
      bop.sk = "1";
      bop.vec = c.c % 8 == 0;
      bop.half = !bop.vec && c.c % 4 == 0;
    } else {
      bop.conv_filter_kcrs = true;
      bop.c = c.c;
      bop.s = c.s;
      bop.ws1 = wst[1];
      bop.ws2 = wst[2];
      bop.ws3 = wst[3];
    }
    name = fmt::format("conv_{}_nhwc_{}x{}", dtype_name(p.dtype), c.r, c.s);
    if (c.stride_h != 1 || c.stride_w != 1) name += fmt::format("_s{}", c.stride_h);
    if (conv_a_half)
      name += "_c4";
    else if (!conv_a_vec)
      name += "_cscalar";
  } else {
    const MatmulProblem& m = p.mm;
    gm = m.m;
    gn = m.n;
    for (const Dim& d : m.batch) gbatch = gbatch * d;
    kred = a.dim(m.k);
    size_t ra = xd.shape.size(), rb = wd.shape.size(), nb = m.batch.size();
    auto base = [&](const TensorDesc& d, const std::vector<std::string>& st) {
      if (!m.fold.empty()) return std::string("0");  // A's batch dims are GEMM rows, B has none
      size_t ob = d.shape.size() - 2;
      std::string off;
      for (size_t i = 0; i < ob; ++i) {
        if (d.shape[i].is_static() && d.shape[i].value() == 1) continue;
        off += fmt::format("{}b{} * {}", off.empty() ? "" : " + ", nb - ob + i, st[i]);
      }
      return off.empty() ? std::string("0") : off;
    };
    // A: (m, k); contiguous along k unless transposed.
    aop.ptr = xs;
    aop.base = base(xd, xst);
    aop.smn = m.ta ? xst[ra - 1] : xst[ra - 2];
    aop.sk = m.ta ? xst[ra - 2] : xst[ra - 1];
    aop.mn_ext = a.dim(m.m);
    aop.k_ext = kred;
    aop.kmajor = !m.ta;
    // B: (n, k); contiguous along k only when transposed.
    bop.ptr = ws;
    bop.base = base(wd, wst);
    bop.smn = m.tb ? wst[rb - 2] : wst[rb - 1];
    bop.sk = m.tb ? wst[rb - 1] : wst[rb - 2];
    bop.mn_ext = a.dim(m.n);
    bop.k_ext = kred;
    bop.kmajor = m.tb;
    auto vec_ok = [&](const TensorDesc& d, const StridedOperand& o, const Dim& mn_dim) {
      // Contiguous dim stride 1, every other stride a static multiple of 8, contiguous extent a
      // multiple of 8 (so a chunk is all in or all out).
      const std::string& contig = o.kmajor ? o.sk : o.smn;
      if (contig != "1LL") return false;
      if (!static_multiple(o.kmajor ? m.k : mn_dim, 8)) return false;
      if (d.layout == Layout::Strided) {
        for (size_t i = 0; i < d.strides.size(); ++i)
          if (d.strides[i] != 1 && d.strides[i] % 8 != 0) return false;
        return true;
      }
      // Row-major / NHWC: every stride is a product including the contiguous extent... check the
      // innermost physical extent is a multiple of 8.
      Layout l = d.layout;
      size_t r = d.shape.size();
      size_t inner = (l == Layout::NHWC && r >= 3) ? 1 : r - 1;
      return static_multiple(d.shape[inner], 8);
    };
    aop.vec = vec_ok(xd, aop, m.m);
    bop.vec = vec_ok(wd, bop, m.n);
    a_kmajor = aop.kmajor;
    b_kmajor = bop.kmajor;
    name = fmt::format("matmul_{}{}{}", dtype_name(p.dtype), m.ta ? "_ta" : "", m.tb ? "_tb" : "");
    if (nb) name += "_batched";
  }
  name += "_" + cfg.str() + epilogue_suffix(p);
  std::string m_code = a.dim(gm), n_code = a.dim(gn);

  // ---- kernel
  if (warp_spec && cfg.tma && rowfold) {
    w.raw(wgmma_function(cfg.bn, bf16, b_kmajor));
    w.line("typedef KcWgmmaWs<{}, {}, {}, true, false, true, {}, {}> G;", cfg.bm, cfg.bn,
           cfg.stages, rf_q, sp_tile.second);
    w.line("static_assert(G::A_SUB_ROWS == {} && G::SMEM_BYTES == {}, \"row-fold layout\");",
           rf_sub_rows, rf_smem);
  } else if (warp_spec && cfg.tma) {
    w.raw(wgmma_function(cfg.bn, bf16, b_kmajor));
    w.line("typedef KcWgmmaWs<{}, {}, {}, {}, false, true> G;", cfg.bm, cfg.bn, cfg.stages,
           b_kmajor ? "true" : "false");
  } else if (warp_spec) {
    const bool sync_stores =
        !(p.is_conv ? conv_a_vec || conv_a_half : aop.vec) || !(bop.vec || bop.half);
    w.raw(wgmma_function(cfg.bn, bf16, b_kmajor));
    w.line("typedef KcWgmmaWs<{}, {}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.stages,
           b_kmajor ? "true" : "false", sync_stores ? "true" : "false");
  } else if (wg) {
    w.raw(wgmma_function(cfg.bn, bf16, b_kmajor));
    w.line("typedef KcWgmma<{}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.stages,
           b_kmajor ? "true" : "false");
  } else {
    w.line("typedef KcGemm<{}, {}, {}, {}, {}, {}, {}, {}, {}> G;", cfg.bm, cfg.bn, cfg.bk, cfg.wm,
           cfg.wn, cfg.stages, a_kmajor ? "true" : "false", b_kmajor ? "true" : "false",
           bf16 ? "true" : "false");
  }
  // The grid order: N tiles fastest where there are a few of them (static N), else M tiles.
  const int64_t tiles_n = gn.is_static() ? (gn.value() + cfg.bn - 1) / cfg.bn : 0;
  const bool n_fast = tiles_n > 1 && tiles_n <= 8;
  // Residual prefetch (TMA kernels over GEMM rows, per-fragment epilogue): one epilogue operand
  // laid out like the output (a residual add) has its BM x BN tile loaded by the producer with
  // TMA at the start, into shared memory after the stages: the epilogue then reads it there
  // instead of waiting on DRAM after the mainloop (the single-k-tile ResNet-50 expansion convs
  // spent most of their time there, run 24).
  int rpre = -1;
  const int64_t stage_region =
      (int64_t{cfg.stages} * (cfg.bm + cfg.bn) * cfg.bk * 2 + 16 * cfg.stages + 1023) / 1024 * 1024;
  const int64_t rtile_bytes = int64_t{cfg.bm} * cfg.bn * 2;
  // The tile must not cost a CTA per SM (228 KB of shared memory per SM, 1 KB reserved per CTA):
  // a 128x64 tile's 4 stages leave room for two CTAs, with the tile only one (run 34: the
  // ResNet-50 res2 3x3 conv went from 0.10 to 0.136 ms).
  auto ctas_per_sm = [](int64_t smem) { return 233472 / (smem + 1024); };
  const bool tile_fits = ctas_per_sm(1024 + stage_region + rtile_bytes + 8) >=
                         std::max<int64_t>(1, ctas_per_sm(cfg.smem_bytes()));
  // Both use one BM x BN 16-bit tile in shared memory, in the TMA boxes' layout: a TMA kernel
  // over GEMM rows with the per-fragment epilogue, a static N of whole 16-byte rows, and a tensor
  // laid out like the contraction output.
  const bool tile_ok = wg && warp_spec && cfg.tma && !pixel_blocks && splits == 1 &&
                       !p.staged_epilogue && gn.is_static() && gn.value() % 8 == 0 &&
                       cfg.bn % 64 == 0 && outputs_pair_storable(p, a) && tile_fits;
  const TensorDesc& yd = g.tensor(p.y).desc;
  auto like_output = [&](const TensorDesc& td) {
    return td.shape == yd.shape && td.layout == yd.layout &&
           (td.dtype == DType::F16 || td.dtype == DType::BF16) &&
           stride_code(a, td) == stride_code(a, yd);
  };
  if (tile_ok && p.prefetch_residual) {
    std::set<int> made{p.y};
    for (int ni : p.group->nodes)
      for (int t : g.nodes().at(ni).outputs) made.insert(t);
    for (int ni : p.group->nodes) {
      if (ni == p.group->anchor || rpre >= 0) continue;
      for (int t : g.nodes().at(ni).inputs) {
        if (made.count(t) || t == p.bias || !like_output(g.tensor(t).desc)) continue;
        rpre = t;
        break;
      }
    }
  }
  // TMA store epilogue: the single 16-bit output, laid out like the GEMM rows, is written as a
  // swizzled tile into shared memory (the residual tile's place, or its own after the stages)
  // and stored with TMA by one thread: whole 128-byte rows, asynchronous, where the per-fragment
  // stores write 16 bytes of each of 8 rows per warp instruction.
  int tout = -1;
  if (tile_ok && p.tma_store && p.group->outputs.size() == 1 &&
      like_output(g.tensor(p.group->outputs[0]).desc))
    tout = p.group->outputs[0];
  const bool tile_smem = rpre >= 0 || tout >= 0;
  // The prefetch, issued by the producer thread with the first k tile's loads: BN / 64 boxes of
  // BM x 64 (128-byte swizzle, as the operand tiles), completing on their own barrier.
  auto prefetch_residual = [&](Writer& b) {
    if (rpre < 0) return;
    b.open("if (kt == 0) {{");
    b.line("kc_mbar_arrive_expect_tx(kc_rbar, {});", rtile_bytes);
    b.line("#pragma unroll");
    b.line("for (int j = 0; j < {}; ++j)", cfg.bn / 64);
    b.line(
        "  kc_tma_load_2d(kc_smem_u32(kc_rtile + j * {}), &kc_rmap, (int)n0 + j * 64, (int)m0, "
        "kc_rbar);",
        cfg.bm * 64);
    b.close();
  };
  // Parameters are only known after the body is generated: emit the body into its own writer.
  Writer body;
  {
    Writer& b = body;
    b.line("extern __shared__ __align__(128) unsigned short kc_smem[];");
    if (n_fast) {
      // N tiles fastest in a 1-D grid: the CTAs that share an A tile run at the same time, so
      // it comes from DRAM once (m tiles fastest streamed A once per N tile where it is bigger
      // than L2: the ResNet-50 1x1 1024 -> 256 conv at N = 128 reads 51 MB of A).
      b.line("const long long kc_mt = blockIdx.x / {};", tiles_n);
      b.line("const long long m0 = kc_mt * {};", cfg.bm);
      b.line("const long long n0 = (long long)(blockIdx.x % {}) * {};", tiles_n, cfg.bn);
    } else {
      b.line("const long long kc_mt = blockIdx.x;");
      b.line("const long long m0 = kc_mt * {};", cfg.bm);
      b.line("const long long n0 = (long long)blockIdx.y * {};", cfg.bn);
    }
    b.line("const int tid = threadIdx.x;");
    if (warp_spec && !cfg.tma) b.line("const int ltid = G::producer_tid();");  // cp.async loaders
    if (pixel_blocks) {  // blockIdx.x -> (image, block row, block column) of output pixels
      const ConvProblem& c = p.conv;
      const int64_t tw = (c.ow.value() + sp_tile.second - 1) / sp_tile.second;
      const int64_t th = (c.oh.value() + sp_tile.first - 1) / sp_tile.first;
      b.line("const long long sp_ow0 = (kc_mt % {}) * {};", tw, sp_tile.second);
      b.line("const long long sp_oh0 = (kc_mt / {} % {}) * {};", tw, th, sp_tile.first);
      b.line("const long long sp_n = kc_mt / {};", tw * th);
    }
    if (!p.is_conv && !p.mm.batch.empty()) {
      b.line("long long bz = blockIdx.z;");
      for (size_t i = p.mm.batch.size(); i-- > 0;) {
        std::string d = a.dim(p.mm.batch[i]);
        b.line("const long long b{} = bz % {}; bz /= {};", i, d, d);
      }
    }
    if (tile_smem) {
      b.line("// the residual / output tile: {} slabs of {} x 64 after the stages, then a barrier",
             cfg.bn / 64, cfg.bm);
      b.line("unsigned short* const kc_rtile = G::aligned(kc_smem) + {};", stage_region / 2);
      b.line("const unsigned kc_rbar = kc_smem_u32(kc_rtile + {});", cfg.bm * cfg.bn);
    }
    if (rpre >= 0) {
      a.tensor(g, rpre, true);  // a plain pointer too, as every TMA operand has
      const std::string mr = a.tensor_map_2d(rpre, gm, gn, gn, cfg.bm, 64);
      b.line("const KcTmaDesc& kc_rmap = {};", mr);
      b.line("if (threadIdx.x == 0) kc_mbar_init(kc_rbar, 1);  // fenced and synced by mainloop");
    }
    if (tout >= 0) {
      a.tensor(g, tout, false);
      const std::string mo = a.tensor_map_2d(tout, gm, gn, gn, cfg.bm, 64);
      b.line("const KcTmaDesc& kc_omap = {};", mo);
    }
    if (rowfold) {
      // k tile kt = filter rows kt * A_SLOTS .. (B: the KRSC filter, one row = S x C contiguous
      // values). For each slot and tile row, one box of A_SUB_ROWS 16-byte chunks of the input
      // row (the map: chunks of 8 values along W x C, rows, images; no swizzle); chunks and rows
      // outside the image read as zero (the padding), and so do filter rows past R, whose
      // filter values are zero too.
      const ConvProblem& c = p.conv;
      const Dim chunks(c.w.value() * c.c / 8);
      const std::string ma = a.tensor_map(p.x, {Dim(8), chunks, c.h, c.n},
                                          {Dim(8), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
                                          {8, rf_sub_rows, 1, 1}, {1, 1, 1, 1}, 0);
      b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
      b.line("#pragma unroll");
      b.open("for (int j = 0; j < G::A_SLOTS; ++j) {{");
      b.line("const int r = kt * G::A_SLOTS + j;");
      b.line("#pragma unroll");
      b.line("for (int i = 0; i < G::A_BH; ++i)");
      b.line(
          "  kc_tma_load_4d(kc_smem_u32(s + (j * G::A_BH + i) * G::A_SUB_ROWS * 8), &{}, 0, "
          "(int)sp_ow0 - {}, (int)(sp_oh0 + i) * {} - {} + r * {}, (int)sp_n, bar);",
          ma, c.pad_l * c.c / 8, c.stride_h, c.pad_t, c.dil_h);
      b.close();
      b.close("};");
      const Dim kdim(c.r * c.s * c.c);
      const std::string mb = a.tensor_map_2d(p.w, gn, kdim, kdim, cfg.bn, 64);
      b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
      b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)n0, bar);", mb);
      b.close("};");
    } else if (im2col || spatial) {
      // k tile kt = filter tap (r, s) x 64 channels. im2col: one load of the tile's BM output
      // pixels (consecutive GEMM rows, across output rows and images) at the tap's offset.
      // Spatial: a [BH][BW][64] box of the NHWC input at the tap's offset (traversal stride =
      // conv stride). Taps outside the image read zeros (padding).
      const ConvProblem& c = p.conv;
      std::string ma;
      if (im2col) {
        const int64_t oh = c.oh.value(), ow = c.ow.value();
        ma = a.tensor_map_im2col(
            p.x, {Dim(c.c), c.w, c.h, c.n}, {Dim(c.c), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
            {1, static_cast<int>(c.stride_w), static_cast<int>(c.stride_h), 1},
            {static_cast<int>(-c.pad_l), static_cast<int>(-c.pad_t),
             static_cast<int>(im2col_upper(c.w.value(), ow, c.stride_w, c.pad_l)),
             static_cast<int>(im2col_upper(c.h.value(), oh, c.stride_h, c.pad_t)), 64, cfg.bm});
        // The tile's first output pixel (image, row, column) -> its window's top-left pixel.
        b.line("const int i2c_n = (int)(m0 / {});", oh * ow);
        b.line("const int i2c_h = (int)(m0 / {} % {}) * {} - {};", ow, oh, c.stride_h, c.pad_t);
        b.line("const int i2c_w = (int)(m0 % {}) * {} - {};", ow, c.stride_w, c.pad_l);
      } else {
        const auto [bh, bw] = sp_tile;
        ma = a.tensor_map(
            p.x, {Dim(c.c), c.w, c.h, c.n}, {Dim(c.c), Dim(c.c) * c.w, Dim(c.c) * c.w * c.h},
            {64, static_cast<int>(bw * c.stride_w), static_cast<int>(bh * c.stride_h), 1},
            {1, static_cast<int>(c.stride_w), static_cast<int>(c.stride_h), 1});
      }
      const int64_t cb = c.c / 64;
      b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
      b.line("const int rs = kt / {}, cb = kt - rs * {};", cb, cb);
      b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
      if (im2col) {
        b.line(
            "kc_tma_load_im2col_4d(kc_smem_u32(s), &{}, cb * 64, i2c_w, i2c_h, i2c_n, "
            "(unsigned short)(sx * {}), (unsigned short)(r * {}), bar);",
            ma, c.dil_w, c.dil_h);
      } else {
        b.line(
            "kc_tma_load_4d(kc_smem_u32(s), &{}, cb * 64, (int)sp_ow0 * {} - {} + sx * {}, "
            "(int)sp_oh0 * {} - {} + r * {}, (int)sp_n, bar);",
            ma, c.stride_w, c.pad_l, c.dil_w, c.stride_h, c.pad_t, c.dil_h);
      }
      b.close("};");
      const Dim kdim(c.r * c.s * c.c);  // filter KRSC: row k is (r, s, c) contiguous
      const std::string mb = a.tensor_map_2d(p.w, gn, kdim, kdim, cfg.bn, 64);
      b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
      b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)n0, bar);", mb);
      prefetch_residual(b);
      b.close("};");
    } else if (cfg.tma) {
      // One producer thread loads each stage with TMA boxes (128-byte swizzle: the layout the
      // wgmma descriptors read); rows and k past the ends arrive as zeros.
      const Dim kdim = p.is_conv ? Dim(p.conv.c) : p.mm.k;
      const std::string ma = a.tensor_map_2d(p.x, gm, kdim, kdim, cfg.bm, 64);
      b.open("auto load_a = [&](unsigned short* s, int kt, unsigned bar) {{");
      b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)m0, bar);", ma);
      b.close("};");
      if (b_kmajor) {  // conv filter [K, C] / transposed B [N, K]: one box of BN rows
        const std::string mb = a.tensor_map_2d(p.w, gn, kdim, kdim, cfg.bn, 64);
        b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
        b.line("kc_tma_load_2d(kc_smem_u32(s), &{}, kt * 64, (int)n0, bar);", mb);
        prefetch_residual(b);
        b.close("};");
      } else {  // B [K, N]: one 64 x 64 box per 64-column slab
        const std::string mb = a.tensor_map_2d(p.w, kdim, gn, gn, 64, 64);
        b.open("auto load_b = [&](unsigned short* s, int kt, unsigned bar) {{");
        b.line("#pragma unroll");
        b.line("for (int j = 0; j < {}; ++j)", cfg.bn / 64);
        b.line(
            "  kc_tma_load_2d(kc_smem_u32(s + j * 64 * 64), &{}, (int)n0 + j * 64, kt * 64, bar);",
            mb);
        prefetch_residual(b);
        b.close("};");
      }
    } else if (p.is_conv) {
      const ConvProblem& c = p.conv;
      int cpr = cfg.bk / 8;
      int passes = cfg.bm * cpr / lthreads;
      KILN_ASSERT(cfg.bm * cpr % lthreads == 0, "A tile does not split over threads");
      std::string oh = a.dim(c.oh), ow = a.dim(c.ow), h = a.dim(c.h), wdim = a.dim(c.w);
      b.line("long long a_base[{}];", passes);
      b.line("int a_ih[{}], a_iw[{}];", passes, passes);
      b.line("#pragma unroll");
      {
        auto l = b.block("for (int p = 0; p < {}; ++p) {{", passes);
        b.line("const long long m = m0 + ({} + p * {}) / {};", ltid_conv, lthreads, cpr);
        b.open("if (m < {}) {{", m_code);
        b.line("long long q = m;");
        b.line("const int ow = (int)(q % {}); q /= {};", ow, ow);
        b.line("const int oh = (int)(q % {}); q /= {};", oh, oh);
        b.line("a_base[p] = q * {};", xst[0]);
        b.line("a_ih[p] = oh * {} - {};", c.stride_h, c.pad_t);
        b.line("a_iw[p] = ow * {} - {};", c.stride_w, c.pad_l);
        b.close();
        b.open("else {{");
        b.line("a_base[p] = 0;");
        b.line("a_ih[p] = -(1 << 29);");
        b.line("a_iw[p] = -(1 << 29);");
        b.close();
      }
      b.open("auto load_a = [&](unsigned short* s, int kt) {{");
      b.line("#pragma unroll");
      b.open("for (int p = 0; p < {}; ++p) {{", passes);
      b.line("const int id = {} + p * {};", ltid_conv, lthreads);
      b.line("const int lm = id / {}, lk = (id % {}) * 8;", cpr, cpr);
      b.line("const unsigned dst = kc_smem_u32(s + G::a_off(lm, lk));");
      b.line("const int k = kt * {} + lk;", cfg.bk);
      if (conv_a_vec) {
        b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
        b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
        b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
        b.line("const bool v = k < {} && ih >= 0 && ih < {} && iw >= 0 && iw < {};", kred, h, wdim);
        b.line("const unsigned short* src = v ? {} + a_base[p] + ih * {} + iw * {} + cc : {};", xs,
               xst[2], xst[3], xs);
        b.line("kc_cp_async16(dst, src, v);");
      } else if (conv_a_half) {
        // C % 4 == 0: each 8-byte half of the chunk is 4 channels of one filter tap.
        for (int hh = 0; hh < 2; ++hh) {
          b.line("const int k{0} = k + {1};", hh, 4 * hh);
          b.line("const int rs{0} = k{0} / {1}, cc{0} = k{0} - rs{0} * {1};", hh, c.c);
          b.line("const int r{0} = rs{0} / {1}, sx{0} = rs{0} - r{0} * {1};", hh, c.s);
          b.line("const int ih{0} = a_ih[p] + r{0} * {1}, iw{0} = a_iw[p] + sx{0} * {2};", hh,
                 c.dil_h, c.dil_w);
          b.line(
              "const bool v{0} = k{0} < {1} && ih{0} >= 0 && ih{0} < {2} && iw{0} >= 0 && iw{0} < "
              "{3};",
              hh, kred, h, wdim);
          b.line(
              "kc_cp_async8(dst + {0}, v{1} ? {2} + a_base[p] + ih{1} * {3} + iw{1} * {4} + cc{1} "
              ": {2}, "
              "v{1});",
              8 * hh, hh, xs, xst[2], xst[3]);
        }
      } else {
        b.line("unsigned pk[4] = {{0u, 0u, 0u, 0u}};");
        // (r, s, c) of the chunk's first k decoded once, then stepped per element (no div/mod
        // in the element loop: the C = 3 stem's loader).
        b.line("const int rs0 = k / {};", c.c);
        b.line("int cc = k - rs0 * {}, r = rs0 / {};", c.c, c.s);
        b.line("int sx = rs0 - r * {};", c.s);
        b.line("#pragma unroll");
        {
          auto el = b.block("for (int j = 0; j < 8; ++j) {{");
          b.line("const int kj = k + j;");
          b.line("const int ih = a_ih[p] + r * {}, iw = a_iw[p] + sx * {};", c.dil_h, c.dil_w);
          b.line("const bool v = kj < {} && ih >= 0 && ih < {} && iw >= 0 && iw < {};", kred, h,
                 wdim);
          b.line(
              "const unsigned e = v ? (unsigned){}[a_base[p] + ih * {} + iw * {} + cc * {}] : 0u;",
              xs, xst[2], xst[3], xst[1]);
          b.line("pk[j >> 1] |= e << ((j & 1) * 16);");
          b.line("if (++cc == {}) {{ cc = 0; if (++sx == {}) {{ sx = 0; ++r; }} }}", c.c, c.s);
        }
        b.line("kc_st_shared_v4(dst, pk[0], pk[1], pk[2], pk[3]);");
      }
      b.close();
      b.close("};");
    } else {
      emit_strided_loader(b, aop, "a", cfg.bm, cfg.bk, lthreads, "m0", "a_off", ltid_strided);
    }
    if (!cfg.tma)
      emit_strided_loader(b, bop, "b", cfg.bn, cfg.bk, lthreads, "n0", "b_off", ltid_strided);
    b.line("float acc[G::MI][G::NI][4];");
    b.line("const int ktiles = (int)(({} + {}) / {});", kred, cfg.bk - 1, cfg.bk);
    if (splits > 1) {
      // Split z takes k tiles [kt0, kt1) (possibly none: its partial sum is zero).
      b.line("const int kper = (ktiles + {}) / {};", splits - 1, splits);
      b.line("const int kt0 = min(ktiles, (int)blockIdx.z * kper), kt1 = min(ktiles, kt0 + kper);");
    } else {
      b.line("const int kt0 = 0, kt1 = ktiles;");
    }
    if (wg) {
      b.line(
          "auto mma = [](const unsigned long long (&da)[4], const unsigned long long (&db)[4], "
          "float (&c)[1][G::NI][4]) {{ kc_wgmma4_n{}(da, db, c); }};",
          cfg.bn);
      if (warp_spec) {
        b.line(
            "if (!G::mainloop(G::aligned(kc_smem), load_a, load_b, mma, kt0, kt1, acc)) return;");
      } else {
        b.line("G::mainloop(G::aligned(kc_smem), load_a, load_b, mma, kt0, kt1, acc);");
      }
    } else {
      b.line("G::mainloop(kc_smem, load_a, load_b, kt0, kt1, acc);");
    }
    if (splits > 1) {
      // Each split stores its f32 partial tile (element i of thread t at i * THREADS + t); the
      // last CTA of a tile to arrive (counter per tile, reset to zero by that CTA) sums the
      // partials in split order and runs the epilogue.
      std::string ws = a.scratch(false, Dim(0)), cnt = a.scratch(true, Dim(0));
      b.line("__shared__ unsigned kc_is_last;");
      b.line("const unsigned tile = blockIdx.x + blockIdx.y * gridDim.x;");
      b.line("float* part = {} + (size_t)tile * {} * {};", ws, splits, cfg.bm * cfg.bn);
      b.line("#pragma unroll");
      b.open("for (int mi = 0; mi < G::MI; ++mi) {{");
      b.line("#pragma unroll");
      b.open("for (int ni = 0; ni < G::NI; ++ni) {{");
      b.line("#pragma unroll");
      b.open("for (int e = 0; e < 4; ++e) {{");
      b.line("const int i = (mi * G::NI + ni) * 4 + e;");
      b.line("kc_st_cg_f32(part + (size_t)blockIdx.z * {} + i * {} + tid, acc[mi][ni][e]);",
             cfg.bm * cfg.bn, threads);
      b.close();
      b.close();
      b.close();
      b.line("kc_fence_gpu();");
      b.line("__syncthreads();");
      b.open("if (tid == 0) {{");
      b.line("const unsigned prev = kc_atom_add_u32({} + tile, 1u);", cnt);
      b.line("kc_is_last = prev == {}u;", splits - 1);
      b.line("if (prev == {}u) {}[tile] = 0u;", splits - 1, cnt);
      b.close();
      b.line("__syncthreads();");
      b.line("if (!kc_is_last) return;");
      b.line("kc_fence_gpu();");
      b.line("#pragma unroll");
      b.open("for (int mi = 0; mi < G::MI; ++mi) {{");
      b.line("#pragma unroll");
      b.open("for (int ni = 0; ni < G::NI; ++ni) {{");
      b.line("#pragma unroll");
      b.open("for (int e = 0; e < 4; ++e) {{");
      b.line("const int i = (mi * G::NI + ni) * 4 + e;");
      b.line("float sum = 0.f;");
      b.open("for (int z = 0; z < {}; ++z) {{", splits);
      b.line("sum += kc_ld_cg_f32(part + (size_t)z * {} + i * {} + tid);", cfg.bm * cfg.bn,
             threads);
      b.close();
      b.line("acc[mi][ni][e] = sum;");
      b.close();
      b.close();
      b.close();
    }
    // Every column of the grid's tiles is in range when the tiles divide N exactly (grid y is
    // N / BN, a CTA's columns n0 .. n0 + BN - 1): no column check, which would be dead code
    // (and the unrolled epilogue's compare-and-branch per column group costs NVRTC time).
    const bool cols_exact = gn.is_static() && gn.value() % cfg.bn == 0;
    // The epilogue over columns col0 .. col0 + width - 1 (e), each output's values into o<t>[e].
    auto lane_loop = [&](int width, const std::string& acc_v, const EpilogueCode& e) {
      for (int t : p.group->outputs) b.line("float o{}[{}];", t, width);
      b.line("#pragma unroll");
      b.open("for (int e = 0; e < {}; ++e) {{", width);
      b.line("const long long col = col0 + e;");
      b.line("const float acc_v = {};", acc_v);
      for (auto& l : e.lines) b.put(l);
      b.close();
    };
    // The offset of output t's element at the epilogue coordinates, column col0.
    auto col0_offset = [&](int t) {
      const auto st = stride_code(a, g.tensor(t).desc);
      std::string off;
      for (size_t i = 0; i < coords.size(); ++i)
        off += fmt::format("{}{} * {}", i ? " + " : "", coords[i] == "col" ? "col0" : coords[i],
                           st[i]);
      return off;
    };
    // ---- staged epilogue (TMA GEMM kernels, opt-in: contraction.staged=1): the consumers write
    // their accumulators to the (now idle) stage buffers as a BM x BN f32 tile (rows padded by 8
    // floats: a half-warp's 8-byte fragment stores hit distinct banks), then each thread runs the
    // epilogue over whole 8-column vectors of a row: 16-byte loads of 16-bit residual / bias
    // operands and 16-byte stores, a warp covering 32 consecutive vectors, where the per-fragment
    // epilogue below moves 4 bytes per access. Measured no faster on the ResNet-50 expansion conv
    // (run 24; that kernel is latency-bound) and ~10 % slower to compile, hence not the rule.
    const int ethreads = (cfg.bm / 64) * 128;  // the consumer warpgroups
    const int pitch = cfg.bn + 8;
    const bool staged =
        p.staged_epilogue && wg && warp_spec && cfg.tma && splits == 1 && !pixel_blocks &&
        outputs_pair_storable(p, a, 8) &&
        int64_t{cfg.bm} * pitch * 4 <= int64_t{cfg.stages} * (cfg.bm + cfg.bn) * cfg.bk * 2;
    if (staged) {
      b.line("// staged epilogue: {} x {} f32 tile in shared memory, 8-column vectors", cfg.bm,
             cfg.bn);
      b.line("float* const kc_tile = reinterpret_cast<float*>(G::aligned(kc_smem));");
      // Every consumer's wgmma has retired (mainloop) and no stage is read again: the stage
      // buffers are free once all consumers are past this barrier (the producer has returned).
      b.line("asm volatile(\"bar.sync 1, {};\" ::: \"memory\");", ethreads);
      b.line("const int warp = tid >> 5, lane = tid & 31;");
      b.line("const int wrow = (warp >> 2) * {} + (warp & 3) * 16 + (lane >> 2);", cfg.wm);
      b.line("#pragma unroll");
      b.open("for (int mi = 0; mi < G::MI; ++mi) {{");
      b.line("#pragma unroll");
      b.open("for (int ni = 0; ni < G::NI; ++ni) {{");
      b.line("#pragma unroll");
      b.open("for (int hh = 0; hh < 2; ++hh) {{");
      b.line(
          "*reinterpret_cast<float2*>(kc_tile + (wrow + mi * 16 + hh * 8) * {} + ni * 8 + (lane "
          "& 3) * 2) = make_float2(acc[mi][ni][hh * 2], acc[mi][ni][hh * 2 + 1]);",
          pitch);
      b.close();
      b.close();
      b.close();
      b.line("asm volatile(\"bar.sync 1, {};\" ::: \"memory\");", ethreads);
      // Two loops: a full tile (every row in range; columns exact) unrolled so that several
      // vectors' operand loads are in flight per thread before their first use, and the
      // bottom edge tile with row checks.
      const int iters = cfg.bm * cfg.bn / 8 / ethreads;
      auto vector_loop = [&](bool checked) {
        b.line("#pragma unroll {}", checked ? 1 : std::min(4, iters));
        b.open("for (int i = tid; i < {}; i += {}) {{", cfg.bm * cfg.bn / 8, ethreads);
        b.line("const int tr = i / {}, tc = (i % {}) * 8;", cfg.bn / 8, cfg.bn / 8);
        b.line("const long long row = m0 + tr;");
        if (checked) b.line("if (row >= {}) continue;", m_code);
        b.line("const long long col0 = n0 + tc;");
        if (!cols_exact) b.line("if (col0 >= {}) continue;", n_code);
        coords = epilogue_coords(b, p, a);
        EpiloguePairs pairs;
        pairs.width = 8;
        EpilogueCode e = epilogue(p, a, coords, "acc_v", "", "o", "e", &pairs);
        for (auto& l : pairs.pre) b.put(l);
        b.line("const float4 s0 = *reinterpret_cast<const float4*>(kc_tile + tr * {} + tc);",
               pitch);
        b.line("const float4 s1 = *reinterpret_cast<const float4*>(kc_tile + tr * {} + tc + 4);",
               pitch);
        b.line("const float accs[8] = {{s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w}};");
        lane_loop(8, "accs[e]", e);
        for (int t : p.group->outputs)
          b.line("kc_st_{}x8({} + {}, o{});", dtype_name(g.tensor(t).desc.dtype),
                 a.tensor(g, t, false), col0_offset(t), t);
        b.close();
      };
      b.open("if (m0 + {} <= {}) {{", cfg.bm, m_code);
      vector_loop(false);
      b.reopen("} else {");
      vector_loop(true);
      b.close();
    }
    // ---- epilogue: accumulator (mi, ni, e) of lane l sits at row mi*16 + l/4 + (e/2)*8,
    // column ni*8 + (l%4)*2 + e%2 of the warp tile (mma.sync m16n8 and wgmma m64nN alike; a
    // wgmma warp tile is 16 rows x BN: warp w of warpgroup g owns rows g*64 + w*16).
    if (!staged) {
      if (tile_smem) {
        // The tile's word at tile row r, column c (even): slab c / 64, row r, 16-byte chunk
        // (c % 64) / 8 swizzled by r % 8 (the TMA boxes' 128-byte swizzle).
        if (rpre >= 0) b.line("kc_mbar_wait(kc_rbar, 0);");
        b.open("auto kc_tword = [&](int r, int c) -> unsigned* {{");
        b.line("const int cc = c & 63;");
        b.line(
            "return reinterpret_cast<unsigned*>(kc_rtile + (c >> 6) * {} + r * 64 + "
            "((((cc >> 3) ^ (r & 7)) << 3) | (cc & 7)));",
            cfg.bm * 64);
        b.close("};");
      }
      b.line("const int warp = tid >> 5, lane = tid & 31;");
      if (wg) {
        b.line("const int wm = warp >> 2, wn = 0, wr = (warp & 3) * 16;");
      } else {
        b.line("const int wm = warp % G::WARPS_M, wn = warp / G::WARPS_M, wr = 0;");
      }
      b.line("#pragma unroll");
      auto lmi = b.block("for (int mi = 0; mi < G::MI; ++mi) {{");
      b.line("#pragma unroll");
      auto lh = b.block("for (int hh = 0; hh < 2; ++hh) {{");
      if (pixel_blocks) {  // tile row -> output pixel of the CTA's block
        b.line("const int lrow = wm * {} + wr + mi * 16 + hh * 8 + (lane >> 2);", cfg.wm);
        b.line("const long long oh = sp_oh0 + lrow / {}, ow = sp_ow0 + lrow % {};", sp_tile.second,
               sp_tile.second);
        b.line("if (oh >= {} || ow >= {}) continue;", p.conv.oh.value(), p.conv.ow.value());
        b.line("const long long n = sp_n;");
        coords = {"n", "col", "oh", "ow"};
      } else {
        // The tile's row (and column) as 32-bit values beside the 64-bit global ones: the tile
        // word addresses from them (64-bit differences per fragment cost NVRTC ~15 % on the
        // 128x256 expansion conv).
        b.line("const int lrow = wm * {} + wr + mi * 16 + hh * 8 + (lane >> 2);", cfg.wm);
        b.line("const long long row = m0 + lrow;");
        b.line("if (row >= {}) continue;", m_code);
        coords = epilogue_coords(b, p, a);
      }
      b.line("#pragma unroll");
      auto lni = b.block("for (int ni = 0; ni < G::NI; ++ni) {{");
      if (outputs_pair_storable(p, a)) {
        // Columns (2 l, 2 l + 1) of a lane are adjacent in memory: one 4-byte (16-bit types) or
        // 8-byte (f32) store per pair, and one 4-byte load per pair of a 16-bit operand read
        // along the columns (EpiloguePairs).
        b.line("const int lcol = wn * {} + ni * 8 + (lane & 3) * 2;", cfg.wn);
        b.line("const long long col0 = n0 + lcol;");
        if (!cols_exact) b.line("if (col0 >= {}) continue;", n_code);
        EpiloguePairs pairs;
        if (rpre >= 0) pairs.smem_words[rpre] = "*kc_tword(lrow, lcol)";
        EpilogueCode e = epilogue(p, a, coords, "acc_v", "", "o", "e", &pairs);
        for (auto& l : pairs.pre) b.put(l);
        lane_loop(2, "acc[mi][ni][hh * 2 + e]", e);
        for (int t : p.group->outputs) {
          const TensorDesc& td = g.tensor(t).desc;
          const std::string off = col0_offset(t);
          std::string ptr = a.tensor(g, t, false);
          if (t == tout) {
            b.line("*kc_tword(lrow, lcol) = kc_pack_{}(o{}[0], o{}[1]);", dtype_name(td.dtype), t,
                   t);
          } else if (td.dtype == DType::F32) {
            b.line("kc_st_f32x2({} + {}, o{}[0], o{}[1]);", ptr, off, t, t);
          } else {
            b.line("*reinterpret_cast<unsigned*>({} + {}) = kc_pack_{}(o{}[0], o{}[1]);", ptr, off,
                   dtype_name(td.dtype), t, t);
          }
        }
      } else {
        b.line("#pragma unroll");
        auto le = b.block("for (int e = 0; e < 2; ++e) {{");
        b.line("const long long col = n0 + wn * {} + ni * 8 + (lane & 3) * 2 + e;", cfg.wn);
        if (!cols_exact) b.line("if (col >= {}) continue;", n_code);
        b.line("const float acc_v = acc[mi][ni][hh * 2 + e];");
        EpilogueCode e = epilogue(p, a, coords, "acc_v", "");
        for (auto& l : e.lines) b.put(l);
      }
    }
    if (tout >= 0) {  // (tile_ok: not staged)
      // Every consumer's tile words are written: visible to the async proxy, then one thread
      // stores the slabs (rows past M are clipped by the map) and waits for them.
      b.line("kc_fence_proxy_async();");
      b.line("asm volatile(\"bar.sync 1, {};\" ::: \"memory\");", ethreads);
      b.open("if (tid == 0) {{");
      b.line("#pragma unroll");
      b.line("for (int j = 0; j < {}; ++j)", cfg.bn / 64);
      b.line(
          "  kc_tma_store_2d(&kc_omap, (int)n0 + j * 64, (int)m0, kc_smem_u32(kc_rtile + j * {}));",
          cfg.bm * 64);
      b.line("kc_tma_store_wait();");
      b.close();
    }
  }
  std::string device = device_preamble() + device_text("contraction_mma.cuh") + "\n";
  if (wg) device += device_text("contraction_wgmma.cuh") + "\n";
  device += w.str();

  KernelSpec k;
  k.name = name;
  k.entry = name;
  k.source = assemble_kernel(device, {name, std::to_string(threads), 0, 0, a.params()}, body.str());
  k.args = a.args();
  k.grid = {(gm + Dim(cfg.bm - 1)) / Dim(cfg.bm), (gn + Dim(cfg.bn - 1)) / Dim(cfg.bn), gbatch};
  if (pixel_blocks)
    k.grid[0] = p.conv.n * Dim(((p.conv.oh.value() + sp_tile.first - 1) / sp_tile.first) *
                               ((p.conv.ow.value() + sp_tile.second - 1) / sp_tile.second));
  if (n_fast) {
    k.grid[0] = k.grid[0] * Dim(tiles_n);
    k.grid[1] = Dim(1);
  }
  if (splits > 1) {
    k.grid[2] = Dim(splits);
    Dim tiles = k.grid[0] * k.grid[1];
    for (KernelArg& ka : k.args) {
      if (ka.kind == KernelArg::Kind::Scratch)
        ka.value = tiles * Dim(int64_t{splits} * cfg.bm * cfg.bn * 4);
      if (ka.kind == KernelArg::Kind::Counters) ka.value = tiles;
    }
  }
  k.block = {threads, 1, 1};
  k.smem_bytes = tile_smem ? static_cast<int>(1024 + stage_region + rtile_bytes + 8)
                 : rowfold ? rf_smem
                           : cfg.smem_bytes();
  if (wg) k.arch = "sm_90a";
  k.bytes_moved = bytes_moved(p);
  k.flops = flops(p);
  k.group = p.group->id;
  (void)sm;
  return k;
}

}  // namespace kiln::contraction
