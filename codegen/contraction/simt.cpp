// Tiled SIMT kernel for conv2d (groups == 1, any layout) and matmul (any layout, transposes,
// batches): exact f32 math (f32 accumulate of the operands widened to f32), a 128x128 block tile
// staged through shared memory 8 deep in K, 256 threads, each an 8x8 register block. The path
// for f32 and for f16/bf16 problems the tensor-core kernel does not take (NCHW activations).
#include "codegen/contraction_common.hpp"
#include "codegen/kernel_assembly.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256;

// The GEMM the kernel runs, its operands, and the kernel name's stem.
struct SimtGemm {
  Dim gm, gn, gbatch{1};
  std::string kred;  // K, code
  std::string xs, ws, ldx, ldw;
  std::vector<std::string> xst, wst;
  std::string name;
};

// A conv's loaders: `load_a(k)` / `load_b(k)` return A(am, k) / B(bn, k), 0 when out of range;
// k = (r * S + s) * C + c for both operands.
void conv_loaders(Writer& b, const Problem& p, ArgList& a, SimtGemm* m) {
  const ConvProblem& c = p.conv;
  const auto& xst = m->xst;
  const auto& wst = m->wst;
  m->gm = c.n * c.oh * c.ow;
  m->gn = Dim(c.k);
  m->kred = fmt::format("{}", c.r * c.s * c.c);
  const std::string& kred = m->kred;
  std::string mcode = a.dim(m->gm), oh = a.dim(c.oh), ow = a.dim(c.ow);
  b.line("long long a_base = 0;");
  b.line("int a_ih = -(1 << 29), a_iw = -(1 << 29);");
  {
    auto s = b.block("if (am < {}) {{", mcode);
    b.line("long long q = am;");
    b.line("const int ow = (int)(q % {}); q /= {};", ow, ow);
    b.line("const int oh = (int)(q % {}); q /= {};", oh, oh);
    b.line("a_base = q * {};", xst[0]);
    b.line("a_ih = oh * {} - {};", c.stride_h, c.pad_t);
    b.line("a_iw = ow * {} - {};", c.stride_w, c.pad_l);
  }
  b.open("auto load_a = [&](int k) -> float {{");
  b.line("if (k >= {}) return 0.f;", kred);
  b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
  b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
  b.line("const int ih = a_ih + r * {}, iw = a_iw + sx * {};", c.dil_h, c.dil_w);
  b.line("if (ih < 0 || ih >= {} || iw < 0 || iw >= {}) return 0.f;", a.dim(c.h), a.dim(c.w));
  b.line("return {}({} + a_base + cc * {} + ih * {} + iw * {});", m->ldx, m->xs, xst[1], xst[2],
         xst[3]);
  b.close("};");
  b.open("auto load_b = [&](int k) -> float {{");
  b.line("if (k >= {} || bn >= {}) return 0.f;", kred, c.k);
  b.line("const int rs = k / {}, cc = k - rs * {};", c.c, c.c);
  b.line("const int r = rs / {}, sx = rs - r * {};", c.s, c.s);
  b.line("return {}({} + bn * {} + cc * {} + r * {} + sx * {});", m->ldw, m->ws, wst[0], wst[1],
         wst[2], wst[3]);
  b.close("};");
  const TensorDesc& xd = p.graph->tensor(p.x).desc;
  m->name = fmt::format("conv_{}_{}_{}x{}", dtype_name(p.dtype),
                        xd.layout == Layout::NHWC ? "nhwc" : "nchw", c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1) m->name += fmt::format("_s{}", c.stride_h);
}

// A matmul's loaders over strided (batched, transposed) operands.
void matmul_loaders(Writer& b, const Problem& p, ArgList& a, SimtGemm* m) {
  const MatmulProblem& mp = p.mm;
  const TensorDesc& xd = p.graph->tensor(p.x).desc;
  const TensorDesc& wd = p.graph->tensor(p.w).desc;
  const auto& xst = m->xst;
  const auto& wst = m->wst;
  m->gm = mp.m;
  m->gn = mp.n;
  for (const Dim& d : mp.batch) m->gbatch = m->gbatch * d;
  m->kred = a.dim(mp.k);
  const std::string& kred = m->kred;
  size_t ra = xd.shape.size(), rb = wd.shape.size(), nb = mp.batch.size();
  if (nb) {
    b.line("long long bz = blockIdx.z;");
    for (size_t i = nb; i-- > 0;) {
      std::string d = a.dim(mp.batch[i]);
      b.line("const long long b{} = bz % {}; bz /= {};", i, d, d);
    }
  }
  auto base = [&](const TensorDesc& d, const std::vector<std::string>& st) {
    if (!mp.fold.empty()) return std::string();  // A's batch dims are GEMM rows, B has none
    size_t ob = d.shape.size() - 2;
    std::string off;
    for (size_t i = 0; i < ob; ++i) {
      if (d.shape[i].is_static() && d.shape[i].value() == 1) continue;
      off += fmt::format(" + b{} * {}", nb - ob + i, st[i]);
    }
    return off;
  };
  std::string sam = mp.ta ? xst[ra - 1] : xst[ra - 2], sak = mp.ta ? xst[ra - 2] : xst[ra - 1];
  std::string sbn = mp.tb ? wst[rb - 2] : wst[rb - 1], sbk = mp.tb ? wst[rb - 1] : wst[rb - 2];
  std::string mm = a.dim(mp.m), mn = a.dim(mp.n);
  b.open("auto load_a = [&](int k) -> float {{");
  b.line("if (k >= {} || am >= {}) return 0.f;", kred, mm);
  b.line("return {}({}{} + am * {} + (long long)k * {});", m->ldx, m->xs, base(xd, xst), sam, sak);
  b.close("};");
  b.open("auto load_b = [&](int k) -> float {{");
  b.line("if (k >= {} || bn >= {}) return 0.f;", kred, mn);
  b.line("return {}({}{} + bn * {} + (long long)k * {});", m->ldw, m->ws, base(wd, wst), sbn, sbk);
  b.close("};");
  m->name =
      fmt::format("matmul_{}{}{}", dtype_name(p.dtype), mp.ta ? "_ta" : "", mp.tb ? "_tb" : "");
  if (nb) m->name += "_batched";
}

// Main loop: the next tile's values are loaded into registers while this one is computed.
void emit_mainloop(Writer& b, const std::string& kred) {
  b.line("const int ty = tid >> 4, tx = tid & 15;");
  b.line("float acc[8][8];");
  b.line("#pragma unroll");
  b.line("for (int i = 0; i < 8; ++i)");
  b.line("  #pragma unroll");
  b.line("  for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;");
  b.line("float ra[4], rb[4];");
  b.line("#pragma unroll");
  b.line("for (int j = 0; j < 4; ++j) {{ ra[j] = load_a(lk0 + j); rb[j] = load_b(lk0 + j); }}");
  b.line("const int ktiles = (int)(({} + {}) / {});", kred, kBK - 1, kBK);
  auto loop = b.block("for (int kt = 0; kt < ktiles; ++kt) {{");
  b.line("#pragma unroll");
  b.line("for (int j = 0; j < 4; ++j) {{ sa[lk0 + j][lrow] = ra[j]; sb[lk0 + j][lrow] = rb[j]; }}");
  b.line("__syncthreads();");
  {
    auto nx = b.block("if (kt + 1 < ktiles) {{");
    b.line("const int kn = (kt + 1) * {} + lk0;", kBK);
    b.line("#pragma unroll");
    b.line("for (int j = 0; j < 4; ++j) {{ ra[j] = load_a(kn + j); rb[j] = load_b(kn + j); }}");
  }
  b.line("#pragma unroll");
  {
    auto kk = b.block("for (int k = 0; k < {}; ++k) {{", kBK);
    b.line("float av[8], bv[8];");
    b.line("#pragma unroll");
    b.line(
        "for (int i = 0; i < 8; ++i) {{ av[i] = sa[k][ty + 16 * i]; bv[i] = sb[k][tx + 16 * i]; "
        "}}");
    b.line("#pragma unroll");
    b.line("for (int i = 0; i < 8; ++i)");
    b.line("  #pragma unroll");
    b.line("  for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);");
  }
  b.line("__syncthreads();");
}

// Epilogue: element (i, j) of the thread is row ty + 16 i, column tx + 16 j of the tile.
void emit_epilogue(Writer& b, const Problem& p, ArgList& a, const std::string& m_code,
                   const std::string& n_code) {
  b.line("#pragma unroll");
  auto li = b.block("for (int i = 0; i < 8; ++i) {{");
  b.line("const long long row = m0 + ty + 16 * i;");
  b.line("if (row >= {}) continue;", m_code);
  std::vector<std::string> coords = epilogue_coords(b, p, a);
  b.line("#pragma unroll");
  auto lj = b.block("for (int j = 0; j < 8; ++j) {{");
  b.line("const long long col = n0 + tx + 16 * j;");
  b.line("if (col >= {}) continue;", n_code);
  b.line("const float acc_v = acc[i][j];");
  EpilogueCode e = epilogue(p, a, coords, "acc_v", "");
  for (auto& l : e.lines) b.put(l);
}

}  // namespace

bool simt_supported(const Problem& p) {
  return !p.is_conv || p.conv.groups == 1;
}

KernelSpec emit_simt(const Problem& p_in) {
  KILN_ASSERT(simt_supported(p_in), "{}: tiled SIMT kernel on a grouped conv", p_in.where);
  // Batch dims of A over a 2-D B are GEMM rows: one grid over every row, not one per batch.
  const Problem p = fold_matmul_batch(p_in);
  const Graph& g = *p.graph;
  ArgList a;
  const TensorDesc& xd = g.tensor(p.x).desc;
  const TensorDesc& wd = g.tensor(p.w).desc;
  SimtGemm m;
  m.xs = a.tensor(g, p.x, true);
  m.ws = a.tensor(g, p.w, true);
  m.xst = stride_code(a, xd);
  m.wst = stride_code(a, wd);
  m.ldx = load_fn(xd.dtype);
  m.ldw = load_fn(wd.dtype);
  Writer b;
  b.line("__shared__ float sa[{}][{}];", kBK, kBM);
  b.line("__shared__ float sb[{}][{}];", kBK, kBN);
  b.line("const long long m0 = (long long)blockIdx.x * {};", kBM);
  b.line("const long long n0 = (long long)blockIdx.y * {};", kBN);
  b.line("const int tid = threadIdx.x;");
  // Loader mapping: thread loads row (tid / 2) of the A and B tiles, k = (tid % 2) * 4 + j.
  b.line("const int lrow = tid >> 1, lk0 = (tid & 1) * 4;");
  b.line("const long long am = m0 + lrow, bn = n0 + lrow;");
  if (p.is_conv)
    conv_loaders(b, p, a, &m);
  else
    matmul_loaders(b, p, a, &m);
  std::string name = m.name + fmt::format("_simt_t{}x{}x{}", kBM, kBN, kBK) + epilogue_suffix(p);
  std::string m_code = a.dim(m.gm), n_code = a.dim(m.gn);
  emit_mainloop(b, m.kred);
  emit_epilogue(b, p, a, m_code, n_code);

  KernelSpec k;
  k.name = name;
  k.entry = name;
  k.source = assemble_kernel(device_preamble(), {name, std::to_string(kThreads), 0, 0, a.params()},
                             b.str());
  k.args = a.args();
  k.grid = {(m.gm + Dim(kBM - 1)) / Dim(kBM), (m.gn + Dim(kBN - 1)) / Dim(kBN), m.gbatch};
  k.block = {kThreads, 1, 1};
  k.smem_bytes = 0;  // static shared memory only
  k.bytes_moved = bytes_moved(p);
  k.flops = flops(p);
  k.group = p.group->id;
  return k;
}

}  // namespace kiln::contraction
