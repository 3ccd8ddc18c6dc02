// Graph passes around contractions (conv2d / matmul).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln {

// A movement op that moves nothing is its input: its readers read that, and the copy kernel goes.
// A pad of zero width on every side (Swin's pad of the map to a multiple of its window, when it
// is one already), a slice that keeps every element (Swin's crop back to the unpadded map).
// Returns the number dropped (their names in `dropped`).
int drop_identity_movements(Graph& g, std::vector<std::string>* dropped = nullptr);
bool has_identity_movement(const Graph& g);

// torch.roll as exported, concat([slice(x, s, L), slice(x, 0, s)]) along one axis of a row-major
// x, is one gather of the axis's positions in rotated order (three copy kernels before); a roll
// along the next axis of a roll that only it reads is one gather of both axes' positions, x
// viewed with the two flattened (Swin's shifted windows roll H then W). Returns the number of
// gathers made (the concats' names in `rewritten`).
int rolls_as_gathers(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_roll(const Graph& g);

// An average pool read only by a 1x1 stride-1 unpadded one-group conv with fewer output than
// input channels (Inception's pool branches: avg_pool2d(3, 1, 1), then a 1x1 conv to a quarter
// of the channels) runs after the conv: both are linear per pixel and channel (a padded
// tap reads 0 either way), so the conv reads the pool's input and the pool averages the conv's
// fewer channels; the conv's bias is added after the pool (a padded tap averages 0, not the
// bias). Returns the number swapped (the convs' names in `swapped`).
int pools_after_convs(Graph& g, std::vector<std::string>* swapped = nullptr);
bool has_pool_before_narrowing_conv(const Graph& g);

// A matmul by constant weights (and bias) whose result only a multiplication by a constant scalar
// reads is the matmul by the scaled weights (and bias): Whisper's and CLIP's q scaled by
// 1 / sqrt(head dim), which then merges with k and v (merge_sibling_matmuls). Returns the number
// folded (the matmuls' names in `folded`).
int fold_matmul_scales(Graph& g, std::vector<std::string>* folded = nullptr);
bool has_scaled_matmul(const Graph& g);

// An f16 l2 normalization over the last dim as exported (div(x, expand(clamp(reduce_l2(x),
// eps)))), Swin V2's cosine attention's q and k: two kernels, the norms between them in memory)
// is one row norm, rmsnorm(x, eps^2 / D) / sqrt(D) = x / sqrt(|x|^2 + eps^2), which for f16 rows
// differs from x / max(|x|, eps) by under 1.5e-6 (eps <= 1e-10). Returns the number rewritten.
int l2_normalizations_as_rmsnorms(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_l2_normalization(const Graph& g);

// A matmul result scaled by one factor per batch index (a [..., 1, 1] tensor: Swin V2's per-head
// logit scale on its cosine attention scores) is the matmul of the left operand so scaled:
// (A @ B) * s = (A * s) @ B. The scale then fuses into A's producer, and the scores reach the
// softmax unscaled (the fused attention takes a scalar scale only). Returns the number moved
// (the matmuls' names in `moved`).
int scales_before_matmuls(Graph& g, std::vector<std::string>* moved = nullptr);
bool has_batch_scaled_matmul(const Graph& g);

// 16-bit matmuls of one input by constant weights whose results only reach matmuls through
// movement ops (HF's separate q, k and v projections, the attention's operands) are one matmul by
// the weights side by side, the results slices of its result along the last dim (which the
// attention reads through, as torchvision's in-projection): one GEMM of the summed width reads the
// input once. A missing bias is zeros where another has one. Returns the number of merges (the
// matmuls' names in `merged`).
int merge_sibling_matmuls(Graph& g, std::vector<std::string>* merged = nullptr);
bool has_sibling_matmuls(const Graph& g);

// A gather of constant indices whose result only reshapes and transposes rearrange along the
// gathered axis (the dims before and after it staying in place) is one gather with its indices in
// the rearranged order: Swin's roll of the map (a gather of its flattened positions) and the
// window partition after it are one gather (two copy kernels before). Returns the number
// rewritten (the last transposes' names in `rewritten`).
int gathers_through_permutes(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_permuted_gather(const Graph& g);

// A concat of strided slices of one row-major tensor that take each of its elements once, in
// mixed-radix order of their starts (Swin's patch merging: x[:, 0::2, 0::2], x[:, 1::2, 0::2],
// x[:, 0::2, 1::2], x[:, 1::2, 1::2] concatenated along C), is one transpose of the tensor with
// each strided axis split into [extent / step, step]: six slice copies and a concat copy become
// one transpose, which the movement chains compose with the reshapes around it. Returns the
// number rewritten (the concats' names in `rewritten`).
int strided_concats_as_transposes(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_strided_concat(const Graph& g);

// Folds inference batchnorm into the conv2d / matmul that feeds it when the contraction's weights
// (and bias, if any) and the batchnorm's scale, bias, mean and var are constants and nothing else
// reads the contraction's output:
//   W' = W * gamma / sqrt(var + eps)   (per output channel)
//   b' = (b - mean) * gamma / sqrt(var + eps) + beta
// The contraction gets new constants W' and b' and takes over the batchnorm's output tensor; the
// batchnorm node disappears. Matmul folds only when its output is 2-D (channel = the last dim).
// A batchnorm that only a conv2d reads (as its input; constant weights, one group, no padding:
// MaxViT's and pre-activation blocks' norm before a 1x1 conv) folds into it the other way:
//   W'[k, c, r, s] = W[k, c, r, s] * f[c],  b'[k] = b[k] + sum over c, r, s of W[k, c, r, s] t[c]
// with f = gamma / sqrt(var + eps), t = beta - mean * f; the conv reads the batchnorm's input.
// Returns the number of batchnorm nodes folded. Dead nodes and tensors are pruned.
int fold_batchnorm(Graph& g);

// Cheap test: some batchnorm reads a conv2d / matmul output or only a conv2d reads a batchnorm
// (fold_batchnorm may change `g`).
bool has_batchnorm_next_to_contraction(const Graph& g);

// A channel shuffle of a channels-last map, reshape([N, C, H, W] -> [N, g, C/g, H, W]) then
// transpose(0, 2, 1, 3, 4) then reshape back to [N, C, H, W] (ShuffleNet's, as ONNX exporters
// and core ATen write it), becomes one gather of the channels (output channel j g + i is input
// channel i C/g + j) that stays channels-last: in row-major 5-D form the first reshape is a copy
// out of channels-last order and the transpose another, and every conv after the shuffle read a
// row-major map (SIMT NCHW kernels). The layouts after it are inferred again; a shuffle that
// would change a graph output's layout is left as it is. Returns the number rewritten ("name (g
// groups of C/g)" in `rewritten`); the reshapes and transposes are pruned.
int channel_shuffles_as_gathers(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_reshape_of_channels_last(const Graph& g);

// The constant filter of a conv2d over NHWC activations, held [K, C, R, S] (NCHW: the torch
// backend's weights, a C++ graph's), becomes a constant laid out NHWC ([K, R, S, C] in memory,
// "<w>_krsc", the same values): the TMA and im2col loaders read a filter row (r, s, c) as one
// contiguous run and take NHWC filters only (codegen/contraction/support.cpp), as the ONNX
// importer writes them. A filter several such convs read is relaid once. Returns the number of
// filters relaid.
// 1-D convs (reshape [N, C, W] -> [N, C, 1, W], a 16-bit conv2d, reshape back) over row-major
// maps read and write channels-last, and so do the 3-D maps around them (the reshapes are views;
// a row-major map entering the first conv takes one transpose copy): tensor-core convs instead of
// SIMT ones (Whisper's stem). `rewritten` gets each conv's name. Returns how many.
int conv1d_channels_last(Graph& g, std::vector<std::string>* rewritten);
bool has_row_major_conv1d(const Graph& g);

int channels_last_filters(Graph& g);
bool has_channels_last_conv_with_nchw_filter(const Graph& g);

// Channel padding for the vectorized implicit-GEMM conv: its loads are 16-byte chunks of 8
// consecutive f16/bf16 channels, so a conv whose input has C % 8 != 0 channels (the RGB stem:
// C = 3) would load them one by one. A conv2d qualifies when x is f16/bf16 NHWC, groups is 1,
// C % 8 != 0 and C != 4 (C = 4 convs load 8-byte halves of a chunk), C < kMaxPaddedConvChannels
// (the small channel counts of input stems), the filter is a constant and it is not 1x1 (an R x S
// > 1 conv gains more than the pad's pass over x costs, a 1x1 conv does not: docs/PERFORMANCE.md).
// Its filter becomes a constant [K, Cp, R, S] (Cp = 4 for C < 4, which halves the stem's MMA work
// against 8; else C rounded up to 8) whose extra channels are 0, and it reads x through a new `pad`
// node ("<conv>_pad_c<Cp>", output "<x>_c<Cp>") that appends Cp - C zero channels: every sum gains
// only 0 * 0 terms, so the conv computes the same values. A tensor feeding several such convs is
// padded once. Returns the number of convs rewritten, and in `padded` (optional) one "conv1 (3 ->
// 8)" per conv; the unpadded filters are pruned.
constexpr int64_t kMaxPaddedConvChannels = 64;
int pad_conv_channels(Graph& g, std::vector<std::string>* padded = nullptr);

// Cheap test: pad_conv_channels would change `g`.
bool has_paddable_conv(const Graph& g);

// A matmul whose B is a transpose of the last two dims of X reads X with transpose_b flipped (a
// K-major B is what the tensor-core loaders like best); the transpose goes when nothing else reads
// it. Returns the number of matmuls rewritten ("kt -> qk" in `absorbed`).
int absorb_matmul_transposes(Graph& g, std::vector<std::string>* absorbed = nullptr);

// A matmul with a 2-D B whose output only a reshape reads, to other row dims with the same
// columns ([N*S, K] x [K, M] -> [N*S, M] -> [N, S, M], a Linear as exporters write it; Swin's
// window rows [N W, 49, C] -> [N, h, w, 7, 7, C] before its departition), computes the reshape's
// shape from A reshaped alike (a view); the reshape's readers read the matmul output, so its
// elementwise readers can join the matmul's epilogue and a transpose after it is its store
// layout. Returns the number of matmuls
// rewritten ("fc -> view" in `lifted`).
int lift_matmul_reshapes(Graph& g, std::vector<std::string>* lifted = nullptr);
bool has_matmul(const Graph& g);

// A matmul whose A is a permute of a dense x's dims before K (the last dim stays), with B 2-D
// (torchvision ViT's [T, N, E] attention input over [N, T, E] tokens), reads x itself (one GEMM
// of every row) and the permute moves to its output (a view or the GEMM's store layout). Returns
// the number rewritten ("perm -> fc" in `lifted`).
int lift_matmul_row_permutes(Graph& g, std::vector<std::string>* lifted = nullptr);

// A patch embedding's tokens: reshape([N, C, H, W] NHWC -> [N, C, H*W]) then transpose(0, 2, 1)
// become transpose(x, {0, 2, 3, 1}) then reshape to [N, H*W, C], both views of the channels-last
// memory (two copy kernels before). Returns the number rewritten ("flat + perm" in `rewritten`).
int channels_last_tokens(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_reshape(const Graph& g);

// A chain of reshapes and transposes (each tensor between them read by the next alone) costs a
// copy kernel per transpose; composed, it is one transpose of its input viewed in finer dims (the
// input's dims split where a reshape of the chain splits them), between reshapes that are views.
// Where every reader of a 4-D output takes channels-last memory and a conv or pool reads it
// (directly or after elementwise ops), the transpose writes [N, H, W, C] and the output is that
// memory as [N, C, H, W] channels-last (MaxViT's window and grid departitions, so that its MBConv
// blocks run NHWC convs); the layouts after it are inferred again. Chains that a matmul or
// attention reads stay (their operands are strided views). Returns the number of chains rewritten
// ("last node (k copies -> 1)" in `rewritten`).
int compose_movement_chains(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_transpose(const Graph& g);

// An elementwise op that alone reads a transpose relabeling a contraction's row-major [N, H, W, C]
// result as a channels-last [N, C, H, W] (a view: ConvNeXt's permute after fc2, then its layer
// scale and residual add) moves above it, in the contraction's coordinates (a constant operand
// reshaped where its dims keep their order, a run-time one read through the inverse transpose,
// a view of its channels-last memory), so that it joins the contraction's epilogue; the relabel
// follows it, op after op. Returns the number moved (their names in `moved`).
int elementwise_before_relabels(Graph& g, std::vector<std::string>* moved = nullptr);

// Scores reshaped to split their first dim ([N W, H, S, S] -> [N, W, H, S, S]) for a mask that
// broadcasts over N, then reshaped back before the softmax (Swin's shifted-window mask): the split
// moves before the scores' matmul (q, k and v reshaped, views) and the merge after the softmax's
// matmul, so that the planner sees one attention chain over two batch dims. Returns the number
// rewritten (the scores' matmuls in `rewritten`).
int split_attention_batches(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_reshape_and_softmax(const Graph& g);

// reduce_mean over the two spatial dims of a 4-D activation, keeping them (adaptive_avg_pool2d(x,
// 1) in core ATen), becomes global_avgpool: the same output from the window family's parallel
// pool. Returns the number rewritten (their names in `rewritten`).
int spatial_means_as_pools(Graph& g, std::vector<std::string>* rewritten = nullptr);
bool has_spatial_mean(const Graph& g);

// Reshapes and transposes that need no copy kernel become views (TensorInfo::view_of): the
// tensor is the same memory as its root, laid out as its desc says (Strided where it is not
// row-major). In node order:
//  - a reshape of a row-major tensor into a row-major one;
//  - a transpose read only by matmuls, contiguous along its last dim: the matmul loaders take any
//    strides (a head split [N, T, H, D] -> [N, H, T, D] of attention);
//  - a transpose of a matmul's private result into a row-major tensor: the matmul's epilogue
//    stores straight into the transposed layout (the heads merge of attention).
// Graph outputs and constants are never views, roots are never views. The planner gives a view
// node a group without a kernel; the arena gives a view its root's memory. Returns the number of
// views ("name (reshape)" in `views`).
int fold_movement_views(Graph& g, std::vector<std::string>* views = nullptr);
bool has_movement(const Graph& g);
// The movement node is a view made by fold_movement_views, fold_concat_views or
// fold_slice_views (its inputs and output share memory).
bool is_view_node(const Graph& g, const Node& n);

// Concat elimination: each input of a concat becomes a view of the output at its place along the
// axis (offset = the place x the output's stride there; the output's strides), so its producer
// stores straight into the concat buffer (a channels-last channel concat: each conv writes its
// channels with the pixel stride of all of them) and the concat node costs no kernel. An input
// is written in place when its producer stores through strides (an elementwise op, a
// contraction or a pool: strided_views.hpp) and its other readers are elementwise, or when it is
// itself the output of an earlier concat that becomes a view too (DenseNet's growing features:
// every producer writes into the last buffer); any other input (a graph input, a constant, a norm's
// output, a tensor a conv also reads, an input listed twice) is copied in by an
// `identity` node ("<concat>.in<k>") that writes its place, so the others still need no copy.
// A concat stays a copy where no input is written in place, the output's strides are not static
// or an input's place is not 16 bytes aligned. Concats are visited consumers first. Returns the
// number eliminated
// ("cat1" or "cat1 (1 of 3 inputs copied in)" in `eliminated`); `kept` says why each other
// concat stays a copy kernel ("cat2 (input 1 would start at 58 of dim 1, not 16 bytes into the
// buffer)").
int fold_concat_views(Graph& g, std::vector<std::string>* eliminated = nullptr,
                      std::vector<std::string>* kept = nullptr);
bool has_concat(const Graph& g);

// A slice with positive steps (a split's slices among them) whose readers are all elementwise
// becomes a view of its input (offset = its start, strides scaled by its steps), and so do an
// expand (stride 0 along the broadcast dims) and a gather whose indices are a constant
// progression in range (a scalar index drops the axis: ViT's x[:, 0]); offsets stay 16 bytes
// aligned and constants are never viewed. Returns the number of views ("name (slice)" in
// `views`); `kept` says why each other slice, expand or gather stays a copy kernel ("s (slice:
// conv2d 'c' reads dense memory only)").
int fold_slice_views(Graph& g, std::vector<std::string>* views = nullptr,
                     std::vector<std::string>* kept = nullptr);
bool has_slice_or_expand(const Graph& g);

// Each split node becomes one slice node per output (named "<split>.<k>", writing the split's
// output k), inserted where the split was: the planner, codegen, the memory plan and the
// executor see only single-output nodes. Runs with fusion on or off. Returns the number of
// splits lowered ("name (3 slices)" in `lowered`).
int lower_splits(Graph& g, std::vector<std::string>* lowered = nullptr);
bool has_split(const Graph& g);

// The graph passes lowering (engine/api/lower.hpp) runs before planning, so that the Engine and
// `kiln plan|emit|explain` see the same graph: the list in engine/passes/pass_list.cpp (splits
// lowered to slices, always; with fusion on, batchnorm folding, channel padding, matmul
// transposes absorbed, then movement views). `g` is returned unchanged (no copy) when no pass
// applies. `note` (optional) says what changed.
std::shared_ptr<const Graph> apply_engine_passes(std::shared_ptr<const Graph> g, bool fusion,
                                                 std::string* note = nullptr);

}  // namespace kiln
