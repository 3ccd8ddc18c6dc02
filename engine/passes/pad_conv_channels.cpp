// Channel padding of 16-bit NHWC convs with few input channels (engine/passes_contraction.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/base/check.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

constexpr int64_t kChannelAlign = 8;  // one 16-byte chunk of f16 / bf16 channels
constexpr int64_t kHalfAlign = 4;     // one 8-byte half chunk

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

bool is_const(const Graph& g, int t) {
  const TensorInfo& ti = g.tensor(t);
  return ti.role == TensorRole::Constant && ti.data.has_value();
}

// Input channels the conv should be padded to, or 0 when the pass does not apply.
int64_t padded_channels(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv2d || n.attr_int("groups") != 1) return 0;
  const TensorDesc& xd = g.tensor(n.inputs[0]).desc;
  if (xd.dtype != DType::F16 && xd.dtype != DType::BF16) return 0;
  if (xd.layout != Layout::NHWC || xd.rank() != 4 || !xd.shape[1].is_static()) return 0;
  const int64_t c = xd.shape[1].value();
  // C = 4 convs load 8-byte halves of a chunk (the "_c4" kernels), so C = 1..3 (the RGB stem) pad
  // to 4: half the MMA work of 8 (7x7 stem: 196 reduction terms, not 392). Wider C pad to the
  // next multiple of 8 for 16-byte loads (docs/PERFORMANCE.md has the gains).
  if (c % kChannelAlign == 0 || c == kHalfAlign || c >= kMaxPaddedConvChannels) return 0;
  if (!is_const(g, n.inputs[1])) return 0;
  const TensorDesc& wd = g.tensor(n.inputs[1]).desc;
  // A 1x1 conv is a memory-bound matmul: the pad's extra pass over x costs more than it saves.
  if (wd.shape[2].value() * wd.shape[3].value() == 1) return 0;
  return c < kHalfAlign ? kHalfAlign : round_up(c, kChannelAlign);
}

// Zero filter columns for the row-folded TMA conv (codegen tma_rowfold_supported: a filter row of
// S x C = 16, 32 or 64 values, whole 16-byte chunks of left padding): a 16-bit NHWC conv with 4
// input channels (after padding) at column stride 2 and unit column dilation, an even static
// input width, constant filter, S > 1, gets `left` zero columns in front (an odd left padding
// becomes even) and more behind, up to `cols` = 4, 8 or 16 (the 7x7 stem: one behind, 7x8). The
// padding grows by the same columns on each side, so every output reads the same input pixels with
// the same weights, plus zero terms. Its other kernels (mma.sync, CPU) run the wider filter too
// (the stem: 224 terms for 196).
struct Widening {
  int64_t left = 0, cols = 0;  // cols == 0: none
};

Widening row_fold_widening(const Graph& g, const Node& n, int64_t c_after) {
  Widening w;
  if (n.op != OpKind::Conv2d || n.attr_int("groups") != 1 || c_after != 4) return w;
  const TensorDesc& xd = g.tensor(n.inputs[0]).desc;
  if (xd.dtype != DType::F16 && xd.dtype != DType::BF16) return w;
  if (xd.layout != Layout::NHWC || xd.rank() != 4 || !is_const(g, n.inputs[1])) return w;
  // Input rows of whole 16-byte chunks (W even), static spatial dims (the TMA maps).
  if (!xd.shape[2].is_static() || !xd.shape[3].is_static() || xd.shape[3].value() % 2 != 0)
    return w;
  if (n.attr_ints("stride")[1] != 2 || n.attr_ints("dilation")[1] != 1) return w;
  const int64_t s = g.tensor(n.inputs[1]).desc.shape[3].value();
  const std::vector<int64_t>& pad = n.attr_ints("padding");
  const int64_t left = pad[1] % 2;
  for (int64_t cols : {4, 8, 16}) {
    if (cols < s + left) continue;
    if (s > 1 && cols != s) w = {left, cols};
    break;
  }
  return w;
}

}  // namespace

int pad_conv_channels(Graph& g, std::vector<std::string>* padded) {
  std::map<int, int> padded_x;                                // original tensor -> padded tensor
  std::map<std::tuple<int, int64_t, int64_t>, int> padded_w;  // (filter, left, cols) -> new
  int rewritten = 0;
  for (int ci = 0; ci < static_cast<int>(g.nodes().size()); ++ci) {
    // Only a conv's inputs are read: other nodes may have fewer than two (a range has none).
    if (g.nodes()[ci].op != OpKind::Conv2d) continue;
    const int64_t cp = padded_channels(g, g.nodes()[ci]);
    const int xt = g.nodes()[ci].inputs[0], wt = g.nodes()[ci].inputs[1];
    const int64_t c = g.tensor(xt).desc.rank() == 4 && g.tensor(xt).desc.shape[1].is_static()
                          ? g.tensor(xt).desc.shape[1].value()
                          : 0;
    const Widening wide = row_fold_widening(g, g.nodes()[ci], cp != 0 ? cp : c);
    if (cp == 0 && wide.cols == 0) continue;
    const int64_t ce = cp != 0 ? cp : c;  // channels after padding
    const std::string conv = g.nodes()[ci].name;

    // The filter [K, Ce, R, Se] with zero channels C..Ce-1 and zero columns outside
    // left .. left + S - 1: the same sums, term for term, plus zero terms.
    const auto wkey = std::make_tuple(wt, wide.left, wide.cols);
    if (!padded_w.count(wkey)) {
      const TensorInfo& w = g.tensor(wt);
      TensorDesc wd = w.desc;
      const std::vector<int64_t>& s = w.data->shape;
      const int64_t se = wide.cols != 0 ? wide.cols : s[3];
      wd.shape[1] = Dim(ce);
      wd.shape[3] = Dim(se);
      std::vector<double> src = w.data->to_f64();
      std::vector<double> dst(static_cast<size_t>(s[0] * ce * s[2] * se), 0.0);
      for (int64_t k = 0; k < s[0]; ++k)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t r = 0; r < s[2]; ++r)
            std::copy_n(src.begin() + ((k * c + ch) * s[2] + r) * s[3], s[3],
                        dst.begin() + ((k * ce + ch) * s[2] + r) * se + wide.left);
      std::string nm = cp != 0 ? fmt::format("{}_c{}", w.name, cp) : w.name;
      if (wide.cols != 0) nm += fmt::format("_{}x{}", s[2], se);
      Tensor nw = g.constant(fresh_name(g, nm), wd,
                             HostTensor::from_f64(wd.dtype, {s[0], ce, s[2], se}, dst));
      padded_w[wkey] = nw.id;
    }
    // x with zero channels appended: one pad node per tensor, placed right before its first
    // use so that the nodes stay in topological order.
    if (cp != 0 && !padded_x.count(xt)) {
      std::vector<int64_t> pads(8, 0);
      pads[5] = cp - c;  // after dim 1 (C)
      Tensor px = g.add_node("pad", {Tensor{xt}}, {{"pads", pads}, {"value", 0.0}},
                             fresh_name(g, fmt::format("{}_pad_c{}", conv, cp)),
                             {fresh_name(g, fmt::format("{}_c{}", g.tensor(xt).name, cp))})[0];
      move_last_node_to(g, ci);
      ++ci;  // the conv moved one place down
      padded_x[xt] = px.id;
    }
    Node& n = g.mutable_nodes()[ci];
    if (cp != 0) n.inputs[0] = padded_x[xt];
    n.inputs[1] = padded_w[wkey];
    std::string what;
    if (cp != 0) what = fmt::format("{} -> {}", c, cp);
    if (wide.cols != 0) {
      const int64_t s = g.tensor(wt).desc.shape[3].value(), r = g.tensor(wt).desc.shape[2].value();
      std::vector<int64_t> pad = n.attr_ints("padding");
      if (pad.size() == 2) pad = {pad[0], pad[1], pad[0], pad[1]};
      pad[1] += wide.left;
      pad[3] += wide.cols - s - wide.left;
      n.attrs["padding"] = pad;
      what += fmt::format("{}filter {}x{} -> {}x{}", what.empty() ? "" : ", ", r, s, r, wide.cols);
    }
    ++rewritten;
    if (padded) padded->push_back(fmt::format("{} ({})", conv, what));
  }
  if (rewritten > 0) g.prune();  // the unpadded filters
  return rewritten;
}

bool has_paddable_conv(const Graph& g) {
  for (const Node& n : g.nodes()) {
    const int64_t cp = padded_channels(g, n);
    if (cp != 0) return true;
    if (n.op != OpKind::Conv2d) continue;
    const TensorDesc& xd = g.tensor(n.inputs[0]).desc;
    if (xd.rank() == 4 && xd.shape[1].is_static() &&
        row_fold_widening(g, n, xd.shape[1].value()).cols != 0)
      return true;
  }
  return false;
}

}  // namespace kiln
