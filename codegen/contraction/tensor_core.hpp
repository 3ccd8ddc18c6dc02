// The tensor-core conv2d / matmul kernels' emitters (codegen/contraction/): the problem as a
// GEMM, the kernel being printed, and the pieces each mainloop's emitter assembles it from. The
// layout (heuristics/contraction_layout.hpp) has made every decision; these only print it.
#pragma once

#include <string>
#include <vector>

#include "codegen/contraction_common.hpp"
#include "codegen/writer.hpp"
#include "heuristics/contraction_layout.hpp"

namespace kiln::contraction {

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

// The problem as a GEMM of gm x gn (x gbatch) over K = kred: its operands and the kernel name's
// stem ("conv_f16_nhwc_3x3_s2", "matmul_bf16_tb_batched").
struct GemmView {
  Dim gm, gn, gbatch{1};
  std::string kred;                   // K, code
  std::string xs, ws;                 // the operands' pointer parameters
  std::vector<std::string> xst, wst;  // their strides, code
  StridedOperand aop, bop;            // a matmul's A and B, a conv's filter (bop; aop K-major)
  // A conv's A: 16-byte chunks of 8 channels, else 8-byte halves of 4, else scalar gathers.
  bool conv_a_vec = false, conv_a_half = false;
  std::string name;
};
// Registers the operands and their strides in `a` first (the kernels' parameter order).
GemmView gemm_view(const Problem& p, ArgList& a);
// What the layout needs of the problem; `scratch` (a copy of the kernel's arguments) takes the
// stride checks, so that the kernel's parameters keep the order of their first use in it.
ContractionShape layout_shape(const Problem& p, const GemmView& v, ArgList scratch);

// One tensor-core kernel being printed: `device` holds what follows the device files (the tile
// typedef G, the wgmma instruction), `body` the kernel body.
struct TcKernel {
  const Problem& p;
  const ContractionLayout& L;
  const GemmView& v;
  ArgList& a;
  std::string m_code, n_code;  // GEMM M and N, code
  Writer device, body;
};

// The kernel frame (frame.cpp): the tile's origin (m0, n0, tid), then what locates it further
// (pixel block, batch, the epilogue tile and its TMA maps); the k-tile range (split-K); the
// mainloop call of G; split-K's reduction of the partial tiles.
void emit_tile_origin(TcKernel& k);
void emit_tile_decode(TcKernel& k);
void emit_k_range(TcKernel& k);
void emit_mainloop_call(TcKernel& k);
void emit_split_k_reduction(TcKernel& k);
// The epilogue of every tensor-core kernel (epilogue.cpp): per-fragment values and stores, from
// and into the epilogue tile where the layout has one, then its TMA store.
void emit_epilogue(TcKernel& k);

// cp.async loaders (loader_cp_async.cpp): A (conv gather or strided) and B, issued by
// `tid` among the layout's loader threads.
void emit_cp_async_loaders(TcKernel& k, const std::string& conv_tid,
                           const std::string& strided_tid);
// TMA loaders, one producer thread: B as boxes of BN K-major rows with the residual prefetch
// (loader_tma.cpp), A per the layout's TmaLoader.
void emit_tma_b_rows_loader(TcKernel& k, const Dim& kdim);
void emit_residual_prefetch(TcKernel& k);
void emit_gemm_rows_loaders(TcKernel& k);    // loader_gemm_rows.cpp
void emit_pixel_blocks_loader(TcKernel& k);  // loader_pixel_blocks.cpp
void emit_im2col_loader(TcKernel& k);        // loader_im2col.cpp
void emit_rowfold_loader(TcKernel& k);       // loader_rowfold.cpp
// `load_a`'s frame for a conv whose k tile is one filter tap x 64 channels: (r, sx, cb) decoded,
// then `load` (a TMA box load at that tap).
void emit_tap_loader(TcKernel& k, const std::string& load);

// One emitter per mainloop (mainloop_*.cpp), dispatched on the layout by emit_mma.
void emit_mma_sync(TcKernel& k);
void emit_wgmma_cpasync(TcKernel& k);
void emit_wgmma_warp_specialized(TcKernel& k);
void emit_wgmma_tma(TcKernel& k);
// `void kc_wgmma4_n<N>(desc_a[4], desc_b[4], acc)`: the four wgmma.mma_async m64nNk16 of a
// 64-wide k tile in one asm statement (wgmma_instruction.cpp).
std::string wgmma_instruction(int n, bool bf16, bool b_kmajor);
// `kc_wgmma_rs4_n<N>`: four k16 steps of m64nNk16 with A from registers (a[4][4]: the four steps'
// fragments, the mma.sync m16n8k16 A layout per warp) and B an N-major shared-memory operand
// (trans-b), accumulating (scale-d = 1): the attention kernel's O += P V.
std::string wgmma_rs_instruction(int n, bool bf16);

// The im2col bounding box's upper corner along one spatial dim (support.cpp).
int64_t im2col_upper(int64_t in, int64_t out, int64_t stride, int64_t pad);

}  // namespace kiln::contraction
