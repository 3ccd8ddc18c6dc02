// The channel-norm group's facts and the pieces every form shares (channelnorm_group.hpp).
#include "codegen/channelnorm/channelnorm_group.hpp"

#include <algorithm>
#include <numeric>

#include "engine/ir/op_table.hpp"

namespace kiln {

ChannelNormGroup::ChannelNormGroup(const Graph& graph, const FusionGroup& group)
    : g(graph),
      grp(group),
      A(graph.nodes()[group.anchor]),
      in_t(A.inputs[0]),
      out_t(A.outputs[0]),
      xd(graph.tensor(in_t).desc),
      X(xd.shape),
      r(static_cast<int>(X.size())) {
  C = X[1].value();
  G = A.op == OpKind::Groupnorm ? A.attr_int("groups") : C;
  Cg = C / G;
  spatial.assign(X.begin() + 2, X.end());
  S = shape_numel(spatial);
  strides = tensor_strides(xd);
  channels_last = strides[1].is_static() && strides[1].value() == 1 && r > 2;
  for (int n : grp.nodes)
    if (n != grp.anchor) (n < grp.anchor ? prologue : epilogue).push_back(n);
  ident.resize(r);
  std::iota(ident.begin(), ident.end(), 0);
  dense = r >= 3;
  for (int d = 1; d < r && dense; ++d) dense = X[d].is_static();
  if (!dense) return;
  dense_strides.assign(r, Dim(1));
  int64_t want = C;
  for (int d = r - 1; d >= 2; --d) {
    dense_strides[d] = Dim(want);
    want *= X[d].value();
  }
  dense_strides[0] = Dim(C * S.value());
  dense = strides == dense_strides;
  for (int t : grp.outputs) dense = dense && g.tensor(t).desc.shape == X;
}

bool ChannelNormGroup::is_out(int t) const {
  return std::find(grp.outputs.begin(), grp.outputs.end(), t) != grp.outputs.end();
}

bool ChannelNormGroup::from_prologue(int t) const {
  for (int n : prologue)
    if (g.nodes()[n].outputs[0] == t) return true;
  return false;
}

std::string ChannelNormGroup::identity_key(int t) const {
  std::string k = fmt::format("{}", t);
  for (int i = 0; i < r; ++i) k += fmt::format(",{}", i);
  return k;
}

std::vector<int> ChannelNormGroup::register_inputs() const {
  std::vector<int> vin;
  if (!dense) return vin;
  const int V = vec_elems(xd.dtype);
  for (int t : grp.inputs) {
    bool used = t == in_t;
    for (int nd : prologue)
      for (int i : g.nodes()[nd].inputs) used = used || i == t;
    const TensorDesc& d = g.tensor(t).desc;
    if (used && d.shape == X && tensor_strides(d) == dense_strides && vec_elems(d.dtype) == V)
      vin.push_back(t);
  }
  return vin;
}

ChannelNormProblem ChannelNormGroup::problem() const {
  ChannelNormProblem p;
  p.batch = X[0].is_static() ? X[0].value() : -1;
  p.channels = C;
  p.groups = G;
  p.spatial = S.is_static() ? S.value() : -1;
  p.elem_bytes = static_cast<int>(dtype_size(xd.dtype));
  p.vec = vec_elems(xd.dtype);
  p.dense = dense;
  p.prologue = !prologue.empty();
  p.vector_inputs = static_cast<int>(register_inputs().size());
  return p;
}

GroupKernel ChannelNormGroup::kernel(const std::string& detail, const std::string& extra,
                                     bool helpers) const {
  GroupKernel k;
  k.name = group_kernel_name(g, grp, detail);
  k.heading = fmt::format("// group {}: {} ({} groups of {} channels) over {}\n", grp.id,
                          op_name(A.op), G, Cg, xd.str()) +
              extra;
  if (helpers) k.device = device_file("kiln_channelnorm.cuh");
  return k;
}

std::string ChannelNormGroup::channel_param(size_t slot, const std::vector<std::string>& c,
                                            DimParams& dp) const {
  const int t = A.inputs[slot];
  std::vector<int> map(c.size(), -1);
  map[1] = 0;
  return load_f32(tensor_param(t) + " + " + operand_offset(g.tensor(t).desc, map, c, dp));
}

std::string ChannelNormGroup::element(Writer& w, ElementLoader& ld,
                                      std::map<int, std::string>* vals, bool store) const {
  PointwiseEmitter pe{g, ld.fn(), {}, ""};
  pe.emit(w, prologue);
  *vals = pe.values;
  std::string v;
  if (vals->count(in_t)) {
    v = vals->at(in_t);
  } else {
    auto it = ld.cache.find(identity_key(in_t));
    v = it != ld.cache.end() ? it->second
                             : load_f32(tensor_param(in_t) + " + " + ld.offset(in_t, ident));
  }
  if (store)
    for (int n : prologue) {
      int t = g.nodes()[n].outputs[0];
      if (is_out(t))
        w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), vals->at(t)));
    }
  return v;
}

void ChannelNormGroup::outputs(Writer& w, ElementLoader& ld, const std::map<int, std::string>& seed,
                               const std::vector<int>& vector_outs, bool skip_prologue) const {
  PointwiseEmitter pe{g, ld.fn(), seed, ""};
  pe.emit(w, epilogue);
  for (int t : grp.outputs) {
    if (skip_prologue && from_prologue(t)) continue;
    if (std::find(vector_outs.begin(), vector_outs.end(), t) != vector_outs.end())
      w.line("o{}[l] = {};", t, pe.values.at(t));
    else
      w.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
  }
}

}  // namespace kiln
