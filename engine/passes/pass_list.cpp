// The graph passes the Engine runs before planning, in order (engine/passes/passes.hpp:
// apply_engine_passes). Each entry is the cheap test that says whether the pass may change the
// graph, the pass itself, and the note it leaves: adding a pass is one row here and its own file.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

struct EnginePass {
  // False: the pass would leave the graph as it is (so that a graph no pass applies to is not
  // copied at all).
  bool (*applies)(const Graph& g);
  // Runs the pass; returns what it changed as a note ("" when nothing).
  std::string (*run)(Graph& g);
  // Runs with fusion off too (a rewrite the planner relies on, not an optimization).
  bool always = false;
};

// "title: a, b, c", or "" when `items` is empty.
std::string listed(const char* title, const std::vector<std::string>& items) {
  return items.empty() ? std::string() : fmt::format("{}: {}", title, fmt::join(items, ", "));
}

// "a; b" of two notes, either of which may be "".
std::string joined(const std::string& a, const std::string& b) {
  return a.empty() || b.empty() ? a + b : a + "; " + b;
}

// Splits become slices: every node the planner sees has one output.
std::string run_lower_splits(Graph& g) {
  std::vector<std::string> lowered;
  lower_splits(g, &lowered);
  return listed("splits lowered to one slice per output", lowered);
}

std::string run_drop_identity_movements(Graph& g) {
  std::vector<std::string> dropped;
  drop_identity_movements(g, &dropped);
  return listed("pads and slices that move nothing dropped", dropped);
}

std::string run_fold_matmul_scales(Graph& g) {
  std::vector<std::string> folded;
  fold_matmul_scales(g, &folded);
  return listed("scalar scales folded into the projection's weights", folded);
}

std::string run_l2_normalizations(Graph& g) {
  std::vector<std::string> rewritten;
  l2_normalizations_as_rmsnorms(g, &rewritten);
  return listed("l2 normalizations as row norms", rewritten);
}

std::string run_scales_before_matmuls(Graph& g) {
  std::vector<std::string> moved;
  scales_before_matmuls(g, &moved);
  return listed("per-batch scales moved onto the matmul's left operand", moved);
}

std::string run_merge_sibling_matmuls(Graph& g) {
  std::vector<std::string> merged;
  merge_sibling_matmuls(g, &merged);
  return listed("sibling projections as one matmul", merged);
}

std::string run_pools_after_convs(Graph& g) {
  std::vector<std::string> swapped;
  pools_after_convs(g, &swapped);
  return listed("average pools moved after the narrowing 1x1 conv", swapped);
}

std::string run_gathers_through_permutes(Graph& g) {
  std::vector<std::string> rewritten;
  gathers_through_permutes(g, &rewritten);
  return listed("transposes of gathers as one gather", rewritten);
}

std::string run_strided_concats(Graph& g) {
  std::vector<std::string> rewritten;
  strided_concats_as_transposes(g, &rewritten);
  return listed("concats of strided slices as one transpose", rewritten);
}

std::string run_rolls_as_gathers(Graph& g) {
  std::vector<std::string> rewritten;
  rolls_as_gathers(g, &rewritten);
  return listed("rolls as one gather", rewritten);
}

// Inference batchnorm after a conv/matmul with constant weights folds into them: no batchnorm
// math in the epilogue.
std::string run_fold_batchnorm(Graph& g) {
  const int folded = fold_batchnorm(g);
  if (folded == 0) return "";
  return fmt::format("{} batchnorm{} folded into the conv/matmul weights", folded,
                     folded == 1 ? "" : "s");
}

std::string run_channel_shuffles(Graph& g) {
  std::vector<std::string> rewritten;
  channel_shuffles_as_gathers(g, &rewritten);
  return listed("channel shuffles as one channels-last gather", rewritten);
}

std::string run_conv1d_channels_last(Graph& g) {
  std::vector<std::string> rewritten;
  conv1d_channels_last(g, &rewritten);
  return listed("1-D convs channels-last (tensor-core convs)", rewritten);
}

std::string run_channels_last_filters(Graph& g) {
  const int n = channels_last_filters(g);
  return n == 0 ? std::string()
                : fmt::format("{} conv filter{} laid out NHWC as their inputs (KRSC)", n,
                              n == 1 ? "" : "s");
}

std::string run_spatial_means_as_pools(Graph& g) {
  std::vector<std::string> rewritten;
  spatial_means_as_pools(g, &rewritten);
  return listed("spatial means as global average pools", rewritten);
}

std::string run_pad_conv_channels(Graph& g) {
  std::vector<std::string> padded;
  pad_conv_channels(g, &padded);
  return listed("input channels zero-padded to 4 or a multiple of 8 (8- or 16-byte vector loads)",
                padded);
}

std::string run_absorb_matmul_transposes(Graph& g) {
  std::vector<std::string> absorbed;
  absorb_matmul_transposes(g, &absorbed);
  return listed("transposes read as transposed matmul operands", absorbed);
}

std::string run_lift_matmul_reshapes(Graph& g) {
  std::vector<std::string> lifted;
  lift_matmul_reshapes(g, &lifted);
  return listed("matmuls computing their reshaped output", lifted);
}

std::string run_lift_matmul_row_permutes(Graph& g) {
  std::vector<std::string> lifted;
  lift_matmul_row_permutes(g, &lifted);
  return listed("matmuls reading their rows unpermuted", lifted);
}

std::string run_channels_last_tokens(Graph& g) {
  std::vector<std::string> rewritten;
  channels_last_tokens(g, &rewritten);
  return listed("channels-last tokens read in place", rewritten);
}

std::string run_compose_movement_chains(Graph& g) {
  std::vector<std::string> rewritten;
  compose_movement_chains(g, &rewritten);
  return listed("reshape / transpose chains as one transpose", rewritten);
}

std::string run_elementwise_before_relabels(Graph& g) {
  std::vector<std::string> moved;
  elementwise_before_relabels(g, &moved);
  return listed("elementwise ops moved above a channels-last relabel into an epilogue", moved);
}

std::string run_split_attention_batches(Graph& g) {
  std::vector<std::string> rewritten;
  split_attention_batches(g, &rewritten);
  return listed("attention in the batch shape of its mask", rewritten);
}

std::string run_fold_movement_views(Graph& g) {
  std::vector<std::string> views;
  fold_movement_views(g, &views);
  return listed("views (no copy kernel)", views);
}

std::string run_fold_concat_views(Graph& g) {
  std::vector<std::string> eliminated, kept;
  fold_concat_views(g, &eliminated, &kept);
  return joined(listed("concats eliminated (producers write into the concat buffer)", eliminated),
                listed("concats kept as copy kernels", kept));
}

std::string run_fold_slice_views(Graph& g) {
  std::vector<std::string> views, kept;
  fold_slice_views(g, &views, &kept);
  return joined(listed("strided views (no copy kernel)", views),
                listed("slices, expands and gathers kept as copy kernels", kept));
}

// Each pass sees the graph the ones above it left: channel shuffles keep the maps after them
// channels-last before the filters of the convs there are relaid; the filters are relaid after
// batchnorm folding made new ones and before the padding copies them, the padding copies the folded
// weights, and a transpose a matmul absorbs is gone before the views are made; a concat's inputs
// become views before the slices (a slice of a concat input then composes with its place). Rolls
// become gathers, and concats of strided slices transposes, before the concat and slice passes
// see their parts; attention is split to its
// mask's batch shape while k's transpose is still there to absorb; reshape / transpose chains are
// composed after the matmul and token passes took theirs, and the elementwise ops after a relabel
// move into the epilogue once the chains' relabels exist.
constexpr EnginePass kEnginePasses[] = {
    {has_split, run_lower_splits, true},
    {has_identity_movement, run_drop_identity_movements},
    {has_roll, run_rolls_as_gathers},
    {has_permuted_gather, run_gathers_through_permutes},
    {has_strided_concat, run_strided_concats},
    {has_batchnorm_next_to_contraction, run_fold_batchnorm},
    {has_pool_before_narrowing_conv, run_pools_after_convs},
    {has_scaled_matmul, run_fold_matmul_scales},
    {has_batch_scaled_matmul, run_scales_before_matmuls},
    {has_l2_normalization, run_l2_normalizations},
    {has_sibling_matmuls, run_merge_sibling_matmuls},
    {has_reshape_of_channels_last, run_channel_shuffles},
    {has_row_major_conv1d, run_conv1d_channels_last},
    {has_channels_last_conv_with_nchw_filter, run_channels_last_filters},
    {has_spatial_mean, run_spatial_means_as_pools},
    {has_paddable_conv, run_pad_conv_channels},
    {has_reshape_and_softmax, run_split_attention_batches},
    {has_movement, run_absorb_matmul_transposes},
    {has_matmul, run_lift_matmul_reshapes},
    {has_matmul, run_lift_matmul_row_permutes},
    {has_reshape, run_channels_last_tokens},
    {has_transpose, run_compose_movement_chains},
    {has_transpose, run_elementwise_before_relabels},
    {has_movement, run_fold_movement_views},
    {has_concat, run_fold_concat_views},
    {has_slice_or_expand, run_fold_slice_views},
};

}  // namespace

std::shared_ptr<const Graph> apply_engine_passes(std::shared_ptr<const Graph> g, bool fusion,
                                                 std::string* note) {
  bool any = false;
  for (const EnginePass& p : kEnginePasses) any = any || ((fusion || p.always) && p.applies(*g));
  if (!any) return g;
  auto copy = std::make_shared<Graph>(*g);
  std::vector<std::string> notes;
  for (const EnginePass& p : kEnginePasses) {
    if (!(fusion || p.always) || !p.applies(*copy)) continue;
    std::string what = p.run(*copy);
    if (!what.empty()) notes.push_back(std::move(what));
  }
  if (notes.empty()) return g;
  if (note) *note = fmt::format("{} before planning", fmt::join(notes, "; "));
  return copy;
}

}  // namespace kiln
