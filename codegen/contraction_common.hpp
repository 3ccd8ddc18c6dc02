// Shared pieces of the conv2d / matmul emitters (codegen/contraction/): the problem description
// taken from a Contraction group, symbolic kernel arguments, tensor addressing, the fused
// epilogue, and the kernels' entry points.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/writer.hpp"
#include "heuristics/contraction_config.hpp"
#include "heuristics/grouped_conv_layout.hpp"
#include "kiln/graph.hpp"

namespace kiln::contraction {

// The conv2d problem, logical x [N, C, H, W], w [K, C/groups, R, S], y [N, K, OH, OW].
struct ConvProblem {
  Dim n, h, w, oh, ow;  // possibly symbolic
  int64_t c = 0, k = 0, r = 0, s = 0, groups = 1;
  int64_t stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0, dil_h = 1, dil_w = 1;
};

// The matmul problem: y[b..., M, N] = op(A)[b..., M, K] op(B)[b..., K, N] (+ bias[N]).
struct MatmulProblem {
  Dim m, n, k;
  Shape batch;  // broadcast batch dims of the output
  bool ta = false, tb = false;
  // fold_matmul_batch(): batch dims folded into M (rows of one GEMM), and M of one batch.
  Shape fold;
  Dim m_inner;
};

struct Problem {
  const Graph* graph = nullptr;
  const FusionGroup* group = nullptr;
  const Node* anchor = nullptr;
  bool is_conv = false;
  // conv_transpose2d (codegen/contraction/conv_transpose.cpp): `conv` holds x [N, C, H, W],
  // y [N, K, OH, OW], the filter [C, K/groups, R, S] and the attributes; is_conv is false.
  bool is_conv_transpose = false;
  DType dtype = DType::F32;               // of the anchor's inputs
  int x = -1, w = -1, bias = -1, y = -1;  // tensor ids (x = A, w = B for matmul)
  ConvProblem conv;
  MatmulProblem mm;
  std::string where;  // "group 3 (conv1 relu)" for messages
  // Convs may load A by im2col-mode TMA (KILN_SCHEDULE contraction.im2col=2: never, the
  // spatial pixel blocks instead).
  bool im2col_allowed = true;
  // Convs may load a row-folded A (KILN_SCHEDULE contraction.rowfold=2: never).
  bool rowfold_allowed = true;
  // The TMA GEMM-row kernels prefetch a residual operand's tile into shared memory with TMA at
  // the start, so that the epilogue does not wait on its DRAM reads (KILN_SCHEDULE
  // contraction.prefetch=2: off).
  bool prefetch_residual = true;
  // ... and store a single 16-bit output tile with TMA from shared memory (KILN_SCHEDULE
  // contraction.tmastore=2: off, per-fragment global stores).
  bool tma_store = true;
};

Problem describe(const Graph& g, const FusionGroup& grp);
// A batched matmul whose B is one matrix (rank 2), A not transposed, A dense row-major and the
// output row-major or strided (stored through the folded row's coordinates) with the same batch
// dims, as one GEMM of batch x M rows (TMA-loadable as a plain GEMM; a transformer's
// [N, tokens, C] x [C, D] projections; every contraction kernel). Other problems are returned
// unchanged.
Problem fold_matmul_batch(const Problem& p);

// Kernel arguments: tensors (by graph id) and symbolic ints; static dims become literals.
class ArgList {
 public:
  // The C++ parameter name of tensor `id`, registered on first use.
  std::string tensor(const Graph& g, int id, bool is_const);
  // A literal for a static dim, else the name of a `long long` parameter carrying it.
  std::string dim(const Dim& d);
  // A pointer to executor-owned scratch: `amount` bytes of f32 workspace (counters false) or
  // `amount` zero-initialized self-resetting 32-bit counters (counters true).
  std::string scratch(bool counters, const Dim& amount);
  // The kernel's error word (KernelArg::ErrorWord), reported against the node producing tensor
  // `id`: `unsigned* kc_err`.
  std::string error_word(int id);
  // A TMA descriptor over tensor `id` (see KernelArg::Kind::TensorMap; innermost dim first).
  std::string tensor_map(int id, std::vector<Dim> dims, std::vector<Dim> strides,
                         std::vector<int> box, std::vector<int> elem_strides, int swizzle = 128,
                         Dim offset = Dim(0));
  // The row-major 2-D case: `rows` x `cols`, rows `row_stride` apart, boxes box_rows x box_cols.
  std::string tensor_map_2d(int id, const Dim& rows, const Dim& cols, const Dim& row_stride,
                            int box_rows, int box_cols) {
    return tensor_map(id, {cols, rows}, {row_stride}, {box_cols, box_rows}, {1, 1});
  }
  // An im2col-mode TMA descriptor over the 4-D NHWC tensor `id` (dims C, W, H, N; traversal
  // strides; KernelArg::map_im2col).
  std::string tensor_map_im2col(int id, std::vector<Dim> dims, std::vector<Dim> strides,
                                std::vector<int> elem_strides, std::vector<int> im2col);
  std::string params() const;  // "const float* __restrict__ t3, long long s0, ..."
  const std::vector<KernelArg>& args() const { return args_; }

 private:
  std::vector<KernelArg> args_;
  std::vector<std::string> decls_;
  std::map<int, std::string> tensors_;
  std::map<std::string, std::string> dims_;
};

// Element strides of a tensor as code (literals or parameters).
std::vector<std::string> stride_code(ArgList& a, const TensorDesc& d);
// The storage type name in generated code: float / unsigned short (unsigned char: bool; int /
// long long: i32 / i64).
const char* raw_type(DType t);
// Load / store helper names: kc_ld_f16, kc_st_bf16 ...
std::string load_fn(DType t);
std::string store_fn(DType t);

// The pointwise epilogue after the anchor. `coords` are code expressions of the anchor output's
// logical coordinates (one per dim); `acc` names the f32 anchor result (bias not yet applied).
// Returns lines of code that compute every epilogue value and store every group output.
struct EpilogueCode {
  std::vector<std::string> lines;
  std::vector<std::string> ops;  // op names for the kernel name ("bias", "relu", ...)
};
// Pair loads, for an epilogue that runs over the two columns (col0, col0 + 1) of a pair in a loop
// over `e` (0, 1; coords name the column `col` == col0 + e): a 16-bit operand contiguous along the
// column, with every other stride an even literal, is read as one 32-bit word per pair (declared
// in `pre`, lines for before the loop, addressed by col0: `a<tensor id>_<n>`) and element `e` of
// it taken in the loop. The same values as two 16-bit loads (buffers are 16-byte aligned and the
// offset is even), half the loads.
struct EpiloguePairs {
  std::string col0 = "col0", e = "e";
  std::vector<std::string> pre;              // filled by epilogue()
  std::map<std::string, std::string> words;  // load expression -> its word's name
  // Operands already in shared memory (the TMA kernels' prefetched residual tile): tensor id ->
  // the expression of its word at the pair's row and column (names in scope).
  std::map<int, std::string> smem_words;
};
// With `capture` set, output values are assigned to `<capture>{tensor}[<capture_index>]` instead
// of stored (the caller stores them, e.g. as vector pairs). With `pairs`, see EpiloguePairs.
EpilogueCode epilogue(const Problem& p, ArgList& args, const std::vector<std::string>& coords,
                      const std::string& acc, const std::string& indent,
                      const std::string& capture = "", const std::string& capture_index = "",
                      EpiloguePairs* pairs = nullptr);
// True when every output of the group is contiguous along the last GEMM coordinate (the conv
// channel / matmul column) with an even static extent: pairs of columns can be stored as one.
bool outputs_pair_storable(const Problem& p, ArgList& args);
// The epilogue's logical output coordinates of GEMM row `row` and column `col` (code names in
// scope): a conv writes the decomposition of `row` into (n, oh, ow) to `w` and returns
// {n, col, oh, ow}; a matmul returns {b0.., row, col}.
std::vector<std::string> epilogue_coords(Writer& w, const Problem& p, ArgList& args);

// Names of the epilogue ops for kernel names ("bias_relu").
std::string epilogue_suffix(const Problem& p);

// The device helper text every contraction kernel starts with (prelude + dtype helpers).
std::string device_preamble();
// One embedded device file (codegen/device/<name>).
const std::string& device_text(const std::string& name);

// Whether the output's channel (dim 1) is the epilogue's per-channel column: conv2d and
// conv_transpose2d; a matmul's is its last dim.
inline bool conv_like(const Problem& p) {
  return p.is_conv || p.is_conv_transpose;
}
// The direct gather-form conv_transpose2d kernel (contraction/conv_transpose.cpp).
KernelSpec emit_conv_transpose(const Problem& p);
// The direct SIMT kernel: any shape, layout, group count, dtype (contraction/direct.cpp).
KernelSpec emit_direct(const Problem& p);
// The tensor-core kernels (contraction/tensor_core.cpp: the layout's mainloop): f16/bf16,
// sm_80+; conv needs NHWC activations and groups == 1.
bool mma_supported(const Problem& p);
KernelSpec emit_mma(const Problem& p, const ContractionConfig& cfg, int sm);
// The sm_90a wgmma variant of emit_mma (cfg.kind == Wgmma) applies: mma_supported and A K-major.
bool wgmma_supported(const Problem& p);
// The operands can be loaded with TMA as plain GEMM boxes (ContractionConfig::tma): an unbatched
// matmul (or batch dims folded into M) of dense row-major operands with A not transposed and
// 16-byte aligned rows, or a 1x1 stride-1 conv over dense NHWC (contraction/support.cpp).
bool tma_supported(const Problem& p);
// A conv the spatially tiled TMA kernel takes (4-D boxes of the NHWC input per filter tap).
bool tma_spatial_supported(const Problem& p);
// ... and also by im2col-mode TMA (the bounding-box corners and tap offsets fit the 4-D map's
// ranges).
bool tma_im2col_supported(const Problem& p);
// A conv whose A the TMA kernel can row-fold (ContractionConfig::rowfold; see
// contraction_wgmma.cuh): 16-bit dense NHWC, C * stride_w = 8 (one 16-byte chunk per output
// column), S * C = 16, 32 or 64 (2, 4 or 8 chunks per filter row), unit column dilation, the
// left padding whole chunks, static spatial dims.
bool tma_rowfold_supported(const Problem& p);
// The kernel for an explicit config (tests and benchmarks force variants with it).
KernelSpec emit_with_config(const Problem& p, const ContractionConfig& cfg, int sm);
// The grouped / depthwise conv kernels (contraction/grouped.cpp, SIMT; contraction/
// grouped_mma.cpp, tensor cores): NHWC f16 / bf16 / f32, 1 < groups, the layout
// heuristics/grouped_conv_layout.hpp accepts for the target `sm` (up to 64 input channels per
// group).
GroupedConvShape grouped_shape(const Problem& p, int sm);
bool grouped_supported(const Problem& p, int sm);
KernelSpec emit_grouped(const Problem& p, int sm);
KernelSpec emit_grouped_mma(const Problem& p, const GroupedConvLayout& L);
// The tiled SIMT kernel (contraction/simt.cpp): exact f32 math, any dtype and layout;
// conv needs groups == 1.
bool simt_supported(const Problem& p);
KernelSpec emit_simt(const Problem& p);
// The heuristics' view of the problem (symbolic dims estimated).
ContractionProblemInfo problem_info(const Problem& p, int sm, bool arch_specific = false);
// The value problem_info() assumes for every symbol of the problem.
int64_t symbol_guess(const Problem& p);

Dim bytes_moved(const Problem& p);
Dim flops(const Problem& p);

}  // namespace kiln::contraction
