// Channels-last tokens (engine/passes/passes.hpp: channels_last_tokens): a vision transformer's
// patch embedding flattens the conv output into tokens as reshape([N, C, H, W] -> [N, C, H*W])
// then transpose(0, 2, 1) -> [N, H*W, C]. Over channels-last memory the tokens are that memory
// as it is, but the reshape of an NHWC tensor is no view (its memory is not in logical order),
// so both ops were copy kernels. Written as transpose(x, {0, 2, 3, 1}) (a permute of dense
// memory into row-major: a view) then reshape to [N, H*W, C] (a view), they cost nothing.
#include <fmt/format.h>

#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// Whether reshape node `ri` flattens the spatial dims of an NHWC tensor ([N, C, H, W] ->
// [N, C, H*W]) for a transpose(0, 2, 1) alone, returning that transpose's node index or -1.
int token_transpose(const Graph& g, int ri) {
  const Node& r = g.nodes()[ri];
  const TensorDesc& xd = g.tensor(r.inputs[0]).desc;
  const int flat = r.outputs[0];
  const TensorDesc& fd = g.tensor(flat).desc;
  if (xd.layout != Layout::NHWC || xd.rank() != 4 || fd.rank() != 3 || is_graph_output(g, flat))
    return -1;
  if (!(fd.shape[0] == xd.shape[0]) || !(fd.shape[1] == xd.shape[1]) ||
      !(fd.shape[2] == xd.shape[2] * xd.shape[3]))
    return -1;
  const std::vector<int> cs = consumers_of(g, flat);
  if (cs.size() != 1) return -1;
  const Node& t = g.nodes()[cs[0]];
  if (t.op != OpKind::Transpose || t.attr_ints("perm") != std::vector<int64_t>{0, 2, 1} ||
      is_graph_output(g, t.outputs[0]))
    return -1;
  return cs[0];
}

}  // namespace

bool has_reshape(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpKind::Reshape) return true;
  return false;
}

int channels_last_tokens(Graph& g, std::vector<std::string>* rewritten) {
  int count = 0;
  for (size_t ri = 0; ri < g.nodes().size(); ++ri) {
    if (g.nodes()[ri].op != OpKind::Reshape) continue;
    const int ti = token_transpose(g, static_cast<int>(ri));
    if (ti < 0) continue;
    const int x = g.nodes()[ri].inputs[0];
    const int tokens = g.nodes()[ti].outputs[0];
    const Shape tshape = g.tensor(tokens).desc.shape;
    if (rewritten)
      rewritten->push_back(fmt::format("{} + {}", g.nodes()[ri].name, g.nodes()[ti].name));
    const std::string pn = fresh_name(g, g.nodes()[ri].name + ".nhwc");
    const Tensor p = g.add_node("transpose", {Tensor{x}},
                                {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}, pn, {pn})[0];
    const std::string fn = fresh_name(g, g.nodes()[ti].name + ".tokens");
    const Tensor f = g.add_node("reshape", {p}, {{"shape", tshape}}, fn, {fn})[0];
    // Both go where the reshape was (x is produced before it): the reshape to index ri, then the
    // permute before it.
    move_last_node_to(g, static_cast<int>(ri));
    move_last_node_to(g, static_cast<int>(ri));
    replace_uses(g, tokens, f.id);
    ri += 2;
    ++count;
  }
  if (count) g.prune();
  return count;
}

}  // namespace kiln
