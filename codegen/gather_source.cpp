// Source coordinates of gather and gather_elements (codegen/gather_source.hpp).
#include "codegen/gather_source.hpp"

#include "engine/base/check.hpp"
#include "engine/ir/gather_ops.hpp"

namespace kiln {

CopySource index_gather_source(Writer& w, const Graph& g, const Node& node,
                               const std::vector<std::string>& oc, const char* idx,
                               const std::string& suffix, DimParams& dp, const std::string& err) {
  KILN_ASSERT(is_index_gather(node.op), "index gather source of op {}", op_name(node.op));
  const TensorDesc& data = g.tensor(node.inputs[0]).desc;
  const int indices = node.inputs[1];
  const TensorDesc& id = g.tensor(indices).desc;
  const int r = data.rank();
  const int64_t axis = gather_axis(node, r);
  const int q = id.rank();
  // gather: the indices' coordinates are the output's [axis, axis + q); gather_elements: all of
  // the output's (the indices have the output's shape).
  const bool elements = node.op == OpKind::GatherElements;
  const size_t first = elements ? 0 : static_cast<size_t>(axis);
  std::vector<std::string> ic(oc.begin() + first, oc.begin() + first + q);
  std::vector<int> map(q);
  for (int d = 0; d < q; ++d) map[d] = d;
  const std::string dim = data.shape[axis].is_static()
                              ? fmt::format("{}LL", data.shape[axis].value())
                              : dp.ref(data.shape[axis]);
  const std::string raw = "gi" + suffix, at = "gc" + suffix;
  w.line("long long {} = {};", raw,
         load_f32(fmt::format("{} + {}", tensor_param(indices), operand_offset(id, map, ic, dp))));
  w.line("if ({} < 0) {} += {};", raw, raw, dim);
  // Out of range: reported, and the read clamped into the axis (never out of bounds). Constant
  // indices checked here are in range.
  if (!gather_indices_in_range(g, node)) {
    w.open("if ({0} < 0 || {0} >= {1}) {{", raw, dim);
    w.line("atomicOr({}, {}u);", err, kGatherIndexOutOfRange);
    w.line("{0} = {0} < 0 ? 0 : {1} - 1;", raw, dim);
    w.close();
  }
  // The data may be larger than the output (an embedding table): its offsets stay in int only
  // when all of it is addressable in int.
  const Dim numel = shape_numel(data.shape);
  const bool small = numel.is_static() && numel.value() < (int64_t{1} << 31);
  const char* type = small ? idx : "long long";
  w.line("const {} {} = static_cast<{}>({});", type, at, type, raw);
  CopySource s;
  if (elements) {
    s.coords = oc;
    s.coords[axis] = at;
  } else {
    s.coords.assign(oc.begin(), oc.begin() + axis);
    s.coords.push_back(at);
    s.coords.insert(s.coords.end(), oc.begin() + axis + q, oc.end());
  }
  return s;
}

}  // namespace kiln
