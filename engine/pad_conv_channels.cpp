// Channel padding of 16-bit NHWC convs with few input channels (engine/passes_contraction.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/check.hpp"
#include "engine/passes_contraction.hpp"

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
  // to 4: half the MMA work of 8 (7x7 stem: 196 reduction terms, not 392). Wider C keep the
  // 16-byte loads measured on the H200 (padded 20 -> 24 and 60 -> 64 gained 1.1-2x).
  if (c % kChannelAlign == 0 || c == kHalfAlign || c >= kMaxPaddedConvChannels) return 0;
  if (!is_const(g, n.inputs[1])) return 0;
  const TensorDesc& wd = g.tensor(n.inputs[1]).desc;
  // A 1x1 conv is a memory-bound matmul: the pad's extra pass over x costs more than it saves.
  if (wd.shape[2].value() * wd.shape[3].value() == 1) return 0;
  return c < kHalfAlign ? kHalfAlign : round_up(c, kChannelAlign);
}

std::string fresh_name(const Graph& g, const std::string& stem) {
  std::string n = stem;
  for (int i = 2; g.find(n) >= 0; ++i) n = fmt::format("{}_{}", stem, i);
  return n;
}

// Moves the graph's last node to index `at`, keeping producers consistent (the nodes stay in
// topological order when the moved node's inputs are produced before `at`).
void move_last_node_to(Graph& g, int at) {
  std::vector<Node>& nodes = g.mutable_nodes();
  const int last = static_cast<int>(nodes.size()) - 1;
  std::rotate(nodes.begin() + at, nodes.begin() + last, nodes.end());
  for (TensorInfo& t : g.mutable_tensors()) {
    if (t.producer == last)
      t.producer = at;
    else if (t.producer >= at)
      ++t.producer;
  }
}

}  // namespace

int pad_conv_channels(Graph& g, std::vector<std::string>* padded) {
  std::map<int, int> padded_x, padded_w;  // original tensor -> padded tensor
  int rewritten = 0;
  for (int ci = 0; ci < static_cast<int>(g.nodes().size()); ++ci) {
    const int64_t cp = padded_channels(g, g.nodes()[ci]);
    if (cp == 0) continue;
    const std::string conv = g.nodes()[ci].name;
    const int xt = g.nodes()[ci].inputs[0], wt = g.nodes()[ci].inputs[1];
    const int64_t c = g.tensor(xt).desc.shape[1].value();

    // The filter [K, C, R, S] with zero channels C..Cp-1: the same sums, term for term.
    if (!padded_w.count(wt)) {
      const TensorInfo& w = g.tensor(wt);
      TensorDesc wd = w.desc;
      wd.shape[1] = Dim(cp);
      const std::vector<int64_t>& s = w.data->shape;
      std::vector<double> src = w.data->to_f64();
      std::vector<double> dst(static_cast<size_t>(s[0] * cp * s[2] * s[3]), 0.0);
      const int64_t rs = s[2] * s[3];
      for (int64_t k = 0; k < s[0]; ++k)
        for (int64_t ch = 0; ch < c; ++ch)
          std::copy_n(src.begin() + (k * c + ch) * rs, rs, dst.begin() + (k * cp + ch) * rs);
      Tensor nw = g.constant(fresh_name(g, fmt::format("{}_c{}", w.name, cp)), wd,
                             HostTensor::from_f64(wd.dtype, {s[0], cp, s[2], s[3]}, dst));
      padded_w[wt] = nw.id;
    }
    // x with zero channels appended: one pad node per tensor, placed right before its first
    // use so that the nodes stay in topological order.
    if (!padded_x.count(xt)) {
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
    n.inputs[0] = padded_x[xt];
    n.inputs[1] = padded_w[wt];
    ++rewritten;
    if (padded) padded->push_back(fmt::format("{} ({} -> {})", conv, c, cp));
  }
  if (rewritten > 0) g.prune();  // the unpadded filters
  return rewritten;
}

bool has_paddable_conv(const Graph& g) {
  for (const Node& n : g.nodes())
    if (padded_channels(g, n) != 0) return true;
  return false;
}

}  // namespace kiln
