// Graph edits shared by the passes (engine/passes/graph_edit.hpp).
#include "engine/passes/graph_edit.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

std::string fresh_name(const Graph& g, const std::string& stem) {
  std::string n = stem;
  for (int i = 2; g.find(n) >= 0; ++i) n = fmt::format("{}_{}", stem, i);
  return n;
}

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

void replace_uses(Graph& g, int from, int to) {
  for (Node& n : g.mutable_nodes())
    for (int& t : n.inputs)
      if (t == from) t = to;
}

bool rows_dense(const Graph& g, int t) {
  for (bool via_reshape = false;; via_reshape = true) {
    const int p = g.tensor(t).producer;
    if (p < 0) return true;
    const Node& n = g.nodes()[p];
    if (n.op == OpKind::Reshape) {
      t = n.inputs[0];
      continue;
    }
    // A transpose that only a reshape reads is a copy or a view of dense row-major memory: the
    // views that are not (a strided matmul operand, a channels-last map) have other readers.
    if (n.op == OpKind::Transpose && via_reshape && consumers_of(g, n.outputs[0]).size() == 1)
      return true;
    if (n.op == OpKind::Transpose) {
      const int in = n.inputs[0], q = g.tensor(in).producer;
      return q >= 0 && g.nodes()[q].op == OpKind::Matmul && consumers_of(g, in).size() == 1;
    }
    return op_info(n.op).category != OpCategory::Movement;
  }
}

int transposed_from_row_major(const Graph& g, int t, const std::vector<int64_t>& perm) {
  const int p = g.tensor(t).producer;
  if (p < 0) return -1;
  const Node& n = g.nodes()[p];
  if (n.op != OpKind::Transpose || n.attr_ints("perm") != perm) return -1;
  return g.tensor(n.inputs[0]).desc.layout == Layout::NCHW ? n.inputs[0] : -1;
}

bool reinfer_layouts(Graph& g, size_t first) {
  for (size_t i = first; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const OpInfo& info = op_info(n.op);
    std::vector<const TensorInfo*> in;
    for (int t : n.inputs) in.push_back(&g.tensor(t));
    std::vector<TensorDesc> outs = info.infer(InferArgs{n.name, in, n});
    KILN_ASSERT(outs.size() == n.outputs.size(), "node '{}': {} outputs inferred for {}", n.name,
                outs.size(), n.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      TensorInfo& t = g.mutable_tensors()[n.outputs[k]];
      if (!(outs[k].shape == t.desc.shape) || outs[k].dtype != t.desc.dtype) return false;
      if (info.category == OpCategory::Movement && t.desc.layout == Layout::NHWC) continue;
      if (outs[k].layout != t.desc.layout && is_graph_output(g, n.outputs[k])) return false;
      t.desc = outs[k];
    }
  }
  return true;
}

Tensor index_constant(Graph& g, const std::string& stem, const std::vector<int64_t>& idx) {
  TensorDesc d;
  d.dtype = DType::I64;
  d.shape = {Dim(static_cast<int64_t>(idx.size()))};
  return g.constant(fresh_name(g, stem), d,
                    HostTensor::from_i64(DType::I64, {static_cast<int64_t>(idx.size())}, idx));
}

}  // namespace kiln
