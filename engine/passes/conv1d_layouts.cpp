// 1-D convolutions channels-last (engine/passes/passes.hpp: conv1d_channels_last).
//
// Importers lower a Conv1d to reshape [N, C, W] -> [N, C, 1, W], conv2d, reshape back. On
// row-major maps the conv runs as a SIMT kernel (the tensor-core convs read channels-last), and
// Whisper's stem is two such convs over 3000 frames. Here each such conv reads and writes
// channels-last, and so do the 3-D maps around it: an [N, C, W] map channels-last is [N, W, C] in
// memory, the same bytes as [N, C, 1, W] channels-last, so the reshapes are views, and it is the
// token layout that an encoder transposes the stem's output to next (that transpose becomes a
// view too). A row-major map entering the first conv is transposed once by a copy kernel.
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

bool is_one(const Dim& d) {
  return d.is_static() && d.value() == 1;
}

// The reshape node producing `t` from a 3-D [N, C, W] when `t` is that map as [N, C, 1, W], or -1.
int unsqueeze_h(const Graph& g, int t) {
  const int p = g.tensor(t).producer;
  if (p < 0 || g.nodes()[p].op != OpKind::Reshape) return -1;
  const Shape& in = g.tensor(g.nodes()[p].inputs[0]).desc.shape;
  const Shape& out = g.tensor(t).desc.shape;
  if (in.size() != 3 || out.size() != 4 || !is_one(out[2])) return -1;
  return in[0] == out[0] && in[1] == out[1] && in[2] == out[3] ? p : -1;
}

// The reshape reading conv output `t` ([N, K, 1, W]) back as [N, K, W], its only reader, or -1.
int squeeze_h(const Graph& g, int t) {
  const std::vector<int> cs = consumers_of(g, t);
  if (cs.size() != 1 || is_graph_output(g, t) || g.nodes()[cs[0]].op != OpKind::Reshape) return -1;
  const Shape& in = g.tensor(t).desc.shape;
  const Shape& out = g.tensor(g.nodes()[cs[0]].outputs[0]).desc.shape;
  if (out.size() != 3 || !is_one(in[2])) return -1;
  return in[0] == out[0] && in[1] == out[1] && in[3] == out[2] ? cs[0] : -1;
}

// A 16-bit conv2d over a row-major 1-D map (H = 1) between an unsqueeze and a squeeze, with a
// constant filter of at least 8 input channels per group (a tensor-core conv once channels-last).
bool is_row_major_conv1d(const Graph& g, const Node& n) {
  if (n.op != OpKind::Conv2d) return false;
  const TensorDesc& x = g.tensor(n.inputs[0]).desc;
  const TensorInfo& w = g.tensor(n.inputs[1]);
  if (x.layout != Layout::NCHW || (x.dtype != DType::F16 && x.dtype != DType::BF16)) return false;
  if (w.role != TensorRole::Constant || w.desc.shape[1].value() < 8 || !is_one(w.desc.shape[2]))
    return false;
  return unsqueeze_h(g, n.inputs[0]) >= 0 && squeeze_h(g, n.outputs[0]) >= 0 &&
         g.tensor(n.inputs[0]).role == TensorRole::Intermediate;
}

void set_channels_last(Graph& g, int t) {
  TensorInfo& ti = g.mutable_tensors()[t];
  ti.desc.layout = Layout::NHWC;
  ti.desc.strides.clear();
}

// Unary elementwise ops after squeeze node `sq` (a gelu) move before it, onto the conv's 4-D
// output, so that they join the conv's epilogue (the planner fuses ops of its output's shape):
// e(squeeze(y)) = squeeze(e(y)).
void lift_unary_ops(Graph& g, int sq) {
  for (int depth = 0; depth < 8; ++depth) {
    const int s3 = g.nodes()[sq].outputs[0], y = g.nodes()[sq].inputs[0];
    const std::vector<int> cs = consumers_of(g, s3);
    if (cs.size() != 1 || is_graph_output(g, s3)) break;
    const Node e = g.nodes()[cs[0]];
    if (!is_elementwise(e) || e.inputs.size() != 1 || is_graph_output(g, e.outputs[0])) break;
    const int at = cs[0];
    const std::string en = fresh_name(g, e.name + ".conv");
    Tensor e4 = g.add_node(op_name(e.op), {Tensor{y}}, e.attrs, en, {en})[0];
    move_last_node_to(g, at);
    Tensor r = g.reshape(e4, g.tensor(e.outputs[0]).desc.shape);
    set_channels_last(g, r.id);
    move_last_node_to(g, at + 1);
    replace_uses(g, e.outputs[0], r.id);
    sq = at + 1;
  }
}

}  // namespace

bool has_row_major_conv1d(const Graph& g) {
  for (const Node& n : g.nodes())
    if (is_row_major_conv1d(g, n)) return true;
  return false;
}

int conv1d_channels_last(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!is_row_major_conv1d(g, g.nodes()[i])) continue;
    // On a copy: inferring the layouts after the conv again may refuse (a graph output's layout
    // would change).
    Graph h = g;
    const Node& c = h.nodes()[i];
    const std::string name = c.name;
    const int sq = squeeze_h(h, c.outputs[0]);
    set_channels_last(h, c.inputs[0]);
    set_channels_last(h, h.nodes()[sq].outputs[0]);
    if (!reinfer_layouts(h, i)) continue;
    lift_unary_ops(h, sq);
    h.prune();
    g = std::move(h);
    rewritten->push_back(name);
    ++count;
  }
  return count;
}

}  // namespace kiln
