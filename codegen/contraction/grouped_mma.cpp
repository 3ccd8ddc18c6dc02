// The tensor-core grouped conv kernel (NHWC f16 / bf16, 8 | channels per group, sm_80+): an
// implicit GEMM per group, mma.sync m16n8k16 (m16n8k8 where the group has 8 | cg but not 16),
// f32 accumulators. A CTA takes one group's mma_n output channels (heuristics/
// grouped_conv_layout.hpp) for mma_warps x mma_mt x 16 consecutive output pixels; its filters
// sit in shared memory as [tap][channel][cg + 8] 16-bit values (the padding spreads the lanes'
// B words over the banks). Each lane reads its A fragment words (two channels of one pixel and
// tap) straight from global memory: a group's input is re-read by every tap and output-channel
// slice, from L1 / L2.
#include "codegen/contraction_common.hpp"
#include "codegen/kernel_assembly.hpp"
#include "engine/base/check.hpp"

namespace kiln::contraction {
namespace {

struct MmaKernel {
  const Problem& p;
  const GroupedConvLayout& L;
  ArgList a = ArgList();
  Writer b = Writer();
  std::string xs = "", ws = "";
  std::vector<std::string> xst = {}, wst = {};
  int ldb = 0;  // 16-bit values per filter row in shared memory
};

// The CTA's group and channels, its filters into shared memory, and each lane's GEMM rows.
void emit_prologue(MmaKernel& k, const std::string& m_code) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const int64_t slices = L.kg / L.mma_n, bm = int64_t{L.mma_warps} * L.mma_mt * 16;
  b.line("extern __shared__ __align__(16) unsigned short kg_b[];");
  b.line("const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;");
  b.line("const long long g = blockIdx.y / {};", slices);
  b.line("const long long kbase = g * {} + (long long)(blockIdx.y % {}) * {};", L.kg, slices,
         L.mma_n);
  {
    auto l =
        b.block("for (int i = tid; i < {}; i += {}) {{", c.r * c.s * L.mma_n * L.cg, L.threads);
    b.line("const int ci = i % {};", L.cg);
    b.line("int q = i / {};", L.cg);
    b.line("const int nl = q % {}, tap = q / {};", L.mma_n, L.mma_n);
    b.line("const int r = tap / {}, sx = tap % {};", c.s, c.s);
    b.line("kg_b[(tap * {} + nl) * {} + ci] = {}[(kbase + nl) * {} + ci * {} + r * {} + sx * {}];",
           L.mma_n, k.ldb, k.ws, k.wst[0], k.wst[1], k.wst[2], k.wst[3]);
  }
  b.line("__syncthreads();");
  b.line("const long long m0 = (long long)blockIdx.x * {} + warp * {};", bm, L.mma_mt * 16);
  b.line("long long xb[{}][2];", L.mma_mt);
  b.line("int ih0[{}][2], iw0[{}][2];", L.mma_mt, L.mma_mt);
  b.line("#pragma unroll");
  auto lm = b.block("for (int mt = 0; mt < {}; ++mt) {{", L.mma_mt);
  b.line("#pragma unroll");
  auto lh = b.block("for (int hh = 0; hh < 2; ++hh) {{");
  b.line("const long long row = m0 + mt * 16 + hh * 8 + (lane >> 2);");
  b.line("xb[mt][hh] = 0;");
  b.line("ih0[mt][hh] = -(1 << 29);  // rows past M read nothing");
  b.line("iw0[mt][hh] = 0;");
  auto lr = b.block("if (row < {}) {{", m_code);
  const std::string ow = k.a.dim(c.ow), oh = k.a.dim(c.oh);
  b.line("const long long ow = row % {}, q = row / {};", ow, ow);
  b.line("const long long oh = q % {}, n = q / {};", oh, oh);
  b.line("xb[mt][hh] = n * {} + g * {} + (lane & 3) * 2;", k.xst[0], L.cg);
  b.line("ih0[mt][hh] = (int)(oh * {} - {});", c.stride_h, c.pad_t);
  b.line("iw0[mt][hh] = (int)(ow * {} - {});", c.stride_w, c.pad_l);
}

// Per filter tap: the rows' input pointers (zero words in the padding), then per k step the A
// words of every m tile against each n tile's B words.
void emit_mainloop(MmaKernel& k) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  Writer& b = k.b;
  const int nt = L.mma_n / 8;
  b.line("float acc[{}][{}][4];", L.mma_mt, nt);
  b.line("#pragma unroll");
  b.line("for (int mt = 0; mt < {}; ++mt)", L.mma_mt);
  b.line("  #pragma unroll");
  b.line("  for (int j = 0; j < {}; ++j) acc[mt][j / 4][j % 4] = 0.f;", nt * 4);
  b.put(L.unroll_rows ? "#pragma unroll" : "#pragma unroll 1");
  auto lr = b.block("for (int r = 0; r < {}; ++r) {{", c.r);
  b.line("#pragma unroll");
  auto ls = b.block("for (int s = 0; s < {}; ++s) {{", c.s);
  b.line("const int tap = r * {} + s;", c.s);
  b.line("const {}* xp[{}][2];", raw_type(k.p.dtype), L.mma_mt);
  b.line("bool ok[{}][2];", L.mma_mt);
  b.line("#pragma unroll");
  b.line("for (int mt = 0; mt < {}; ++mt)", L.mma_mt);
  b.line("  #pragma unroll");
  b.open("  for (int hh = 0; hh < 2; ++hh) {{");
  b.line("const int ih = ih0[mt][hh] + r * {}, iw = iw0[mt][hh] + s * {};", c.dil_h, c.dil_w);
  b.line("ok[mt][hh] = ih >= 0 && ih < {} && iw >= 0 && iw < {};", k.a.dim(c.h), k.a.dim(c.w));
  b.line("xp[mt][hh] = {} + (ok[mt][hh] ? xb[mt][hh] + ih * {} + iw * {} : 0);", k.xs, k.xst[2],
         k.xst[3]);
  b.close();
  b.line("#pragma unroll");
  auto lk = b.block("for (int kc = 0; kc < {}; kc += {}) {{", L.cg, L.mma_k);
  b.line("unsigned a[{}][4];", L.mma_mt);
  b.line("#pragma unroll");
  b.open("for (int mt = 0; mt < {}; ++mt) {{", L.mma_mt);
  b.line("a[mt][0] = ok[mt][0] ? kc_ld_x2(xp[mt][0] + kc) : 0u;");
  b.line("a[mt][1] = ok[mt][1] ? kc_ld_x2(xp[mt][1] + kc) : 0u;");
  if (L.mma_k == 16) {
    b.line("a[mt][2] = ok[mt][0] ? kc_ld_x2(xp[mt][0] + kc + 8) : 0u;");
    b.line("a[mt][3] = ok[mt][1] ? kc_ld_x2(xp[mt][1] + kc + 8) : 0u;");
  } else {
    b.line("a[mt][2] = a[mt][3] = 0u;");
  }
  b.close();
  b.line("#pragma unroll");
  auto ln = b.block("for (int j = 0; j < {}; ++j) {{", nt);
  b.line(
      "const unsigned short* bp = kg_b + (tap * {} + j * 8 + (lane >> 2)) * {} + kc + (lane & 3) * "
      "2;",
      L.mma_n, k.ldb);
  b.line("const unsigned b0 = *reinterpret_cast<const unsigned*>(bp);");
  b.line("const unsigned b1 = {};",
         L.mma_k == 16 ? "*reinterpret_cast<const unsigned*>(bp + 8)" : "0u");
  b.line("#pragma unroll");
  b.line("for (int mt = 0; mt < {}; ++mt) kg_mma{}_{}(acc[mt][j], a[mt], b0, b1);", L.mma_mt,
         L.mma_k, dtype_name(k.p.dtype));
}

// Accumulator (mt, j, hh * 2 + e) of a lane: GEMM row m0 + mt * 16 + hh * 8 + lane / 4, output
// channel kbase + j * 8 + (lane % 4) * 2 + e; the fused epilogue over each pair, stored as one
// word (16-bit) or two floats where the output is dense NHWC.
void emit_stores(MmaKernel& k, const std::string& m_code) {
  const ConvProblem& c = k.p.conv;
  const GroupedConvLayout& L = k.L;
  const Graph& g = *k.p.graph;
  Writer& b = k.b;
  b.line("#pragma unroll");
  auto lm = b.block("for (int mt = 0; mt < {}; ++mt) {{", L.mma_mt);
  b.line("#pragma unroll");
  auto lh = b.block("for (int hh = 0; hh < 2; ++hh) {{");
  b.line("const long long row = m0 + mt * 16 + hh * 8 + (lane >> 2);");
  b.line("if (row >= {}) continue;", m_code);
  const std::string ow = k.a.dim(c.ow), oh = k.a.dim(c.oh);
  b.line("const long long ow = row % {}, q = row / {};", ow, ow);
  b.line("const long long oh = q % {}, n = q / {};", oh, oh);
  b.line("#pragma unroll");
  auto lj = b.block("for (int j = 0; j < {}; ++j) {{", L.mma_n / 8);
  b.line("const long long col0 = kbase + j * 8 + (lane & 3) * 2;");
  for (int t : k.p.group->outputs) b.line("float o{}[2];", t);
  EpilogueCode e = epilogue(k.p, k.a, {"n", "col", "oh", "ow"}, "acc_v", "", "o", "e");
  {
    b.line("#pragma unroll");
    auto le = b.block("for (int e = 0; e < 2; ++e) {{");
    b.line("const long long col = col0 + e;");
    b.line("const float acc_v = acc[mt][j][hh * 2 + e];");
    for (auto& l : e.lines) b.put(l);
  }
  for (int t : k.p.group->outputs) {
    const TensorDesc& td = g.tensor(t).desc;
    const auto st = stride_code(k.a, td);
    const std::string ptr = k.a.tensor(g, t, false);
    const std::string off = fmt::format("n * {} + col0 + oh * {} + ow * {}", st[0], st[2], st[3]);
    if (td.layout == Layout::NHWC && st[1] == "1LL") {
      if (td.dtype == DType::F32)
        b.line("kg_st_f32<2>({} + {}, o{});", ptr, off, t);
      else
        b.line("*reinterpret_cast<unsigned*>({} + {}) = kg_pack_{}(o{}[0], o{}[1]);", ptr, off,
               dtype_name(td.dtype), t, t);
    } else {
      b.line("for (int e = 0; e < 2; ++e)");
      b.line("  {}({} + n * {} + (col0 + e) * {} + oh * {} + ow * {}, o{}[e]);", store_fn(td.dtype),
             ptr, st[0], st[1], st[2], st[3], t);
    }
  }
}

std::string kernel_name(const Problem& p, const GroupedConvLayout& L) {
  const ConvProblem& c = p.conv;
  std::string name = fmt::format("conv_{}_nhwc_g{}_{}x{}", dtype_name(p.dtype), c.groups, c.r, c.s);
  if (c.stride_h != 1 || c.stride_w != 1)
    name += c.stride_h == c.stride_w ? fmt::format("_s{}", c.stride_h)
                                     : fmt::format("_s{}x{}", c.stride_h, c.stride_w);
  if (c.dil_h != 1 || c.dil_w != 1) name += fmt::format("_d{}", std::max(c.dil_h, c.dil_w));
  return name + fmt::format("_mma_m{}n{}k{}", L.mma_warps * L.mma_mt * 16, L.mma_n, L.mma_k) +
         epilogue_suffix(p);
}

}  // namespace

KernelSpec emit_grouped_mma(const Problem& p, const GroupedConvLayout& L) {
  KILN_ASSERT(L.ok && L.mma, "{}: tensor-core grouped conv kernel without its layout", p.where);
  const Graph& g = *p.graph;
  MmaKernel k{p, L};
  k.ldb = static_cast<int>(L.cg + 8);
  k.xs = k.a.tensor(g, p.x, true);
  k.ws = k.a.tensor(g, p.w, true);
  k.xst = stride_code(k.a, g.tensor(p.x).desc);
  k.wst = stride_code(k.a, g.tensor(p.w).desc);
  const ConvProblem& c = p.conv;
  const Dim m = c.n * c.oh * c.ow;
  const std::string m_code = k.a.dim(m);
  emit_prologue(k, m_code);
  emit_mainloop(k);
  emit_stores(k, m_code);

  const std::string name = kernel_name(p, L);
  const int64_t bm = int64_t{L.mma_warps} * L.mma_mt * 16;
  KernelSpec s;
  s.name = name;
  s.entry = name;
  s.source = assemble_kernel(device_preamble() + device_text("contraction_grouped.cuh") + "\n",
                             {name, std::to_string(L.threads), 0, 0, k.a.params()}, k.b.str());
  s.args = k.a.args();
  s.grid = {(m + Dim(bm - 1)) / Dim(bm), Dim(c.groups * (L.kg / L.mma_n)), Dim(1)};
  s.block = {L.threads, 1, 1};
  s.smem_bytes = static_cast<int>(L.smem_bytes);
  s.bytes_moved = bytes_moved(p);
  s.flops = flops(p);
  s.group = p.group->id;
  return s;
}

}  // namespace kiln::contraction
