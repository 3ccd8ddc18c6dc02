// Copy groups: a movement op (transpose, or a reshape of a tensor that is not row-major) that
// could not be folded, materialized element by element. One thread per output element in the
// output's memory order (writes coalesced); the input is gathered through its own strides.
#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/check.hpp"

namespace kiln {

KernelSpec emit_copy(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.nodes.size() == 1, "copy group {} with {} nodes", grp.id, grp.nodes.size());
  const Node& node = g.nodes()[grp.nodes[0]];
  const int in = node.inputs[0], out = node.outputs[0];
  const TensorDesc& id = g.tensor(in).desc;
  const TensorDesc& od = g.tensor(out).desc;
  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  const int T = 256;
  Dim numel = shape_numel(od.shape);
  bool small = numel.is_static() && numel.value() + T < (int64_t{1} << 31);
  const char* idx = small ? "int" : "long long";
  std::string name = group_kernel_name(g, grp, "");

  Writer w;
  w.line("// group {}: {} {} -> {}", grp.id, op_name(node.op), id.str(), od.str());
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("const {0} i = static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x;", idx, T);
  w.line("if (i >= {}) return;", dp.ref(numel));
  // Output coordinates from i in the output's memory order.
  std::vector<std::string> oc = decompose("i", od.shape, tensor_strides(od), dp);
  std::vector<std::string> ic;
  if (node.op == OpKind::Transpose) {
    const auto& perm = node.attr_ints("perm");
    ic.assign(id.shape.size(), "0");
    for (size_t d = 0; d < perm.size(); ++d) ic[perm[d]] = oc[d];
  } else {
    KILN_ASSERT(node.op == OpKind::Reshape, "copy group {} of op {}", grp.id, op_name(node.op));
    // Same logical row-major position in both shapes.
    Shape ors = row_major_strides(od.shape);
    std::string lin;
    for (size_t d = 0; d < oc.size(); ++d) {
      if (oc[d] == "0") continue;
      std::string term = ors[d].is_static() && ors[d].value() == 1
                             ? oc[d]
                             : fmt::format("{} * {}", oc[d], dp.ref(ors[d]));
      lin += (lin.empty() ? "" : " + ") + term;
    }
    if (lin.empty()) lin = "0";
    w.line("const {} lin = {};", idx, lin);
    ic = decompose("lin", id.shape, row_major_strides(id.shape), dp);
  }
  std::vector<int> ident_in(id.shape.size()), ident_out(od.shape.size());
  for (size_t d = 0; d < ident_in.size(); ++d) ident_in[d] = static_cast<int>(d);
  for (size_t d = 0; d < ident_out.size(); ++d) ident_out[d] = static_cast<int>(d);
  std::string src = operand_offset(id, ident_in, ic, dp);
  std::string dst = operand_offset(od, ident_out, oc, dp);
  // Bit-exact copy of the storage element (no f32 round trip).
  w.line("{}[{}] = {}[{}];", tensor_param(out), dst, tensor_param(in), src);
  w.close();

  KernelSpec k = group_kernel_spec(name, w, gp, T, (numel + Dim(T - 1)) / Dim(T));
  k.flops = Dim(0);  // a copy does no arithmetic
  return k;
}

}  // namespace kiln
