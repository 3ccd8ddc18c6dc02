// The tensor-core kernels' epilogue: accumulator (mi, ni, e) of lane l sits at row
// mi*16 + l/4 + (e/2)*8, column ni*8 + (l%4)*2 + e%2 of the warp tile (mma.sync m16n8 and wgmma
// m64nN alike; a wgmma warp tile is 16 rows x BN: warp w of warpgroup g owns rows g*64 + w*16).
// Each lane runs the fused pointwise epilogue (epilogue_values.cpp) over its column pairs, reads
// a prefetched residual from the epilogue tile and writes the TMA-stored output there.
#include "codegen/contraction/tensor_core.hpp"

namespace kiln::contraction {
namespace {

// The offset of output t's element at the epilogue coordinates, column col0.
std::string col0_offset(TcKernel& k, const std::vector<std::string>& coords, int t) {
  const auto st = stride_code(k.a, k.p.graph->tensor(t).desc);
  std::string off;
  for (size_t i = 0; i < coords.size(); ++i)
    off += fmt::format("{}{} * {}", i ? " + " : "", coords[i] == "col" ? "col0" : coords[i], st[i]);
  return off;
}

// The lane's row of the tile, and the epilogue coordinates of it (code names in scope).
std::vector<std::string> emit_row(TcKernel& k) {
  Writer& b = k.body;
  const ContractionLayout& L = k.L;
  b.line("const int lrow = wm * {} + wr + mi * 16 + hh * 8 + (lane >> 2);", L.cfg.wm);
  if (L.pixel_blocks) {  // tile row -> output pixel of the CTA's block
    b.line("const long long oh = sp_oh0 + lrow / {}, ow = sp_ow0 + lrow % {};", L.pixel_cols,
           L.pixel_cols);
    b.line("if (oh >= {} || ow >= {}) continue;", k.p.conv.oh.value(), k.p.conv.ow.value());
    b.line("const long long n = sp_n;");
    return {"n", "col", "oh", "ow"};
  }
  // The tile's row (and column) as 32-bit values beside the 64-bit global ones: the tile word
  // addresses from them (64-bit differences per fragment cost NVRTC time).
  b.line("const long long row = m0 + lrow;");
  b.line("if (row >= {}) continue;", k.m_code);
  return epilogue_coords(b, k.p, k.a);
}

// Columns (2 l, 2 l + 1) of a lane are adjacent in memory: one 4-byte (16-bit types) or 8-byte
// (f32) store per pair, and one 4-byte load per pair of a 16-bit operand read along the columns
// (EpiloguePairs); the TMA-stored output's pair goes to the epilogue tile.
void emit_pair_columns(TcKernel& k, const std::vector<std::string>& coords) {
  Writer& b = k.body;
  const ContractionLayout& L = k.L;
  const Graph& g = *k.p.graph;
  b.line("const int lcol = wn * {} + ni * 8 + (lane & 3) * 2;", L.cfg.wn);
  b.line("const long long col0 = n0 + lcol;");
  if (!L.cols_exact) b.line("if (col0 >= {}) continue;", k.n_code);
  EpiloguePairs pairs;
  if (L.residual >= 0) pairs.smem_words[L.residual] = "*kc_tword(lrow, lcol)";
  EpilogueCode e = epilogue(k.p, k.a, coords, "acc_v", "", "o", "e", &pairs);
  for (auto& l : pairs.pre) b.put(l);
  // The epilogue over columns col0, col0 + 1 (e), each output's values into o<t>[e].
  for (int t : k.p.group->outputs) b.line("float o{}[2];", t);
  b.line("#pragma unroll");
  b.open("for (int e = 0; e < 2; ++e) {{");
  b.line("const long long col = col0 + e;");
  b.line("const float acc_v = acc[mi][ni][hh * 2 + e];");
  for (auto& l : e.lines) b.put(l);
  b.close();
  for (int t : k.p.group->outputs) {
    const TensorDesc& td = g.tensor(t).desc;
    const std::string off = col0_offset(k, coords, t);
    std::string ptr = k.a.tensor(g, t, false);
    if (t == L.tma_store) {
      b.line("*kc_tword(lrow, lcol) = kc_pack_{}(o{}[0], o{}[1]);", dtype_name(td.dtype), t, t);
    } else if (td.dtype == DType::F32) {
      b.line("kc_st_f32x2({} + {}, o{}[0], o{}[1]);", ptr, off, t, t);
    } else {
      b.line("*reinterpret_cast<unsigned*>({} + {}) = kc_pack_{}(o{}[0], o{}[1]);", ptr, off,
             dtype_name(td.dtype), t, t);
    }
  }
}

// One column at a time (outputs whose pairs are not adjacent or aligned).
void emit_single_columns(TcKernel& k, const std::vector<std::string>& coords) {
  Writer& b = k.body;
  b.line("#pragma unroll");
  auto le = b.block("for (int e = 0; e < 2; ++e) {{");
  b.line("const long long col = n0 + wn * {} + ni * 8 + (lane & 3) * 2 + e;", k.L.cfg.wn);
  if (!k.L.cols_exact) b.line("if (col >= {}) continue;", k.n_code);
  b.line("const float acc_v = acc[mi][ni][hh * 2 + e];");
  EpilogueCode e = epilogue(k.p, k.a, coords, "acc_v", "");
  for (auto& l : e.lines) b.put(l);
}

void emit_fragments(TcKernel& k) {
  Writer& b = k.body;
  const ContractionLayout& L = k.L;
  if (L.tile_in_smem()) {
    if (L.residual >= 0) b.line("kc_mbar_wait(kc_rbar, 0);");
    // contraction_epilogue_tile.cuh: the tile's word at a row and an even column.
    b.line("auto kc_tword = [&](int r, int c) {{ return kc_tile_word<{}>(kc_rtile, r, c); }};",
           L.cfg.bm);
  }
  b.line("const int warp = tid >> 5, lane = tid & 31;");
  if (L.mainloop == ContractionMainloop::MmaSync) {
    b.line("const int wm = warp % G::WARPS_M, wn = warp / G::WARPS_M, wr = 0;");
  } else {
    b.line("const int wm = warp >> 2, wn = 0, wr = (warp & 3) * 16;");
  }
  b.line("#pragma unroll");
  auto lmi = b.block("for (int mi = 0; mi < G::MI; ++mi) {{");
  b.line("#pragma unroll");
  auto lh = b.block("for (int hh = 0; hh < 2; ++hh) {{");
  const std::vector<std::string> coords = emit_row(k);
  b.line("#pragma unroll");
  auto lni = b.block("for (int ni = 0; ni < G::NI; ++ni) {{");
  // Kernel parameters are numbered in the order of first use: the outputs' strides here, where
  // the pair check reads them.
  (void)outputs_pair_storable(k.p, k.a);
  if (L.pair_stores)
    emit_pair_columns(k, coords);
  else
    emit_single_columns(k, coords);
}

}  // namespace

void emit_epilogue(TcKernel& k) {
  emit_fragments(k);
  if (k.L.tma_store < 0) return;
  // Every consumer's tile words are written: contraction_epilogue_tile.cuh makes them visible to
  // the async proxy, then one thread stores the slabs (rows past M are clipped by the map).
  k.body.line("kc_tile_store<{}, {}, {}>(&kc_omap, kc_rtile, m0, n0);", k.L.cfg.bm, k.L.cfg.bn,
              k.L.epilogue_threads);
}

}  // namespace kiln::contraction
