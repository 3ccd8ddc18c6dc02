// Copy groups: a movement op (transpose, reshape, pad) that could not be folded, materialized in
// the output's memory order (writes coalesced); the input is gathered through its own strides.
// The group's other nodes are the op's prologue: private elementwise producers of its input,
// computed where an element is read. When the output's innermost memory dim is a static multiple
// of the 16-byte vector width (or of half of it), each thread writes one 16-byte (8-byte) vector
// (its lanes differ only in that coordinate: a padded NHWC pixel of 8 f16 channels is one store;
// lanes known to be padding are constants); otherwise each thread writes one element. Values pass
// through f32, which every storage type converts to and back exactly; the scalar path without a
// prologue or padding copies the storage element itself.
#include <optional>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

std::optional<int64_t> literal(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

// Where an output element (coordinates `oc`) reads the movement op's input: the input
// coordinates and, for pad, the condition under which it reads at all ("" = always, "false" =
// never: the element is fill). Writes the statements it needs (reshape's linear index).
struct Source {
  std::vector<std::string> coords;
  std::string inside;
};

Source source_of(Writer& w, const Node& node, const TensorDesc& id, const TensorDesc& od,
                 const std::vector<std::string>& oc, const char* idx, const std::string& suffix,
                 DimParams& dp) {
  Source s;
  const size_t r = id.shape.size();
  if (node.op == OpKind::Transpose) {
    const auto& perm = node.attr_ints("perm");
    s.coords.assign(r, "0");
    for (size_t d = 0; d < perm.size(); ++d) s.coords[perm[d]] = oc[d];
  } else if (node.op == OpKind::Reshape) {
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
    w.line("const {} lin{} = {};", idx, suffix, lin);
    s.coords = decompose("lin" + suffix, id.shape, row_major_strides(id.shape), dp);
  } else {
    KILN_ASSERT(node.op == OpKind::Pad, "copy of op {}", op_name(node.op));
    const auto& pads = node.attr_ints("pads");
    std::vector<std::string> conds;
    for (size_t d = 0; d < r; ++d) {
      const int64_t b = pads[d], e = pads[r + d];
      const Dim& size = id.shape[d];
      std::optional<int64_t> v = literal(oc[d]);
      if (v) {  // a lane's coordinate known here: decided now
        bool in = *v >= b && (!size.is_static() || *v < b + size.value());
        KILN_ASSERT(in || size.is_static(), "pad lane coordinate {} unknown", *v);
        if (!in) conds = {"false"};
        s.coords.push_back(in ? std::to_string(*v - b) : "0");
        continue;
      }
      s.coords.push_back(b == 0 ? oc[d] : fmt::format("({} - {})", oc[d], b));
      if (b > 0) conds.push_back(fmt::format("{} >= {}", oc[d], b));
      if (e > 0)
        conds.push_back(size.is_static() ? fmt::format("{} < {}", oc[d], b + size.value())
                                         : fmt::format("{} < {} + {}", oc[d], dp.ref(size), b));
    }
    if (!conds.empty() && conds[0] == "false") {
      s.inside = "false";
    } else {
      for (const std::string& c : conds) s.inside += (s.inside.empty() ? "" : " && ") + c;
    }
  }
  return s;
}

}  // namespace

KernelSpec emit_copy(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(!grp.nodes.empty(), "empty copy group {}", grp.id);
  // The movement op is the last node (topological order); the others are its prologue.
  const Node& node = g.nodes()[grp.nodes.back()];
  KILN_ASSERT(op_info(node.op).category == OpCategory::Movement, "copy group {} ends in {}", grp.id,
              op_name(node.op));
  const std::vector<int> prologue(grp.nodes.begin(), grp.nodes.end() - 1);
  const int in = node.inputs[0], out = node.outputs[0];
  const TensorDesc& id = g.tensor(in).desc;
  const TensorDesc& od = g.tensor(out).desc;
  const size_t r = od.shape.size();
  const bool is_pad = node.op == OpKind::Pad;
  const std::string fill = is_pad ? cuda_float(node.attr_float("value")) : "";
  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  // 16-byte vectors along the output's innermost memory dim, or 8-byte ones where that dim is
  // a multiple of half a vector only (the RGB stem's input padded to 4 channels: one 8-byte pixel
  // per thread, 3.4x fewer stores than one element per thread).
  const size_t d_in = od.layout == Layout::NHWC && r >= 3 ? 1 : r - 1;
  const bool inner_static = r >= 1 && od.layout != Layout::Strided && od.shape[d_in].is_static();
  const int V16 = vec_elems(od.dtype);
  const int V =
      inner_static && od.shape[d_in].value() % V16 != 0 && od.shape[d_in].value() % (V16 / 2) == 0
          ? V16 / 2
          : V16;
  const bool vec = inner_static && od.shape[d_in].value() % V == 0;
  const int64_t per_thread = vec ? V : 1;
  const int T = 256;
  Dim numel = shape_numel(od.shape);
  bool small = numel.is_static() && numel.value() + T * per_thread < (int64_t{1} << 31);
  const char* idx = small ? "int" : "long long";
  std::string name = group_kernel_name(g, grp, "");
  std::vector<int> ident_in(id.shape.size()), ident_out(r);
  for (size_t d = 0; d < ident_in.size(); ++d) ident_in[d] = static_cast<int>(d);
  for (size_t d = 0; d < r; ++d) ident_out[d] = static_cast<int>(d);

  // The f32 value of the element whose input coordinates are `src` (a prologue, or the input
  // loaded and converted); for pad, `fill` outside. Returns the variable.
  auto value = [&](Writer& w, const Source& src, const std::string& suffix) {
    std::string var = "val" + suffix;
    if (src.inside == "false") {
      w.line("const float {} = {};", var, fill);
      return var;
    }
    if (!src.inside.empty()) {
      w.line("float {} = {};", var, fill);
      w.open("if ({}) {{", src.inside);
    }
    std::string v;
    if (prologue.empty()) {
      v = load_f32(
          fmt::format("{} + {}", tensor_param(in), operand_offset(id, ident_in, src.coords, dp)));
    } else {
      ElementLoader ld{g, id.shape, tensor_strides(id), "", src.coords, &dp, suffix, {}};
      PointwiseEmitter pe{g, ld.fn(), {}, suffix};
      pe.emit(w, prologue);
      v = pe.values.at(in);
    }
    if (src.inside.empty()) {
      w.line("const float {} = {};", var, v);
    } else {
      w.line("{} = {};", var, v);
      w.close();
    }
    return var;
  };

  Writer w;
  w.line("// group {}: {} {} -> {}{}", grp.id, op_name(node.op), id.str(), od.str(),
         prologue.empty() ? "" : fmt::format(" ({} prologue nodes)", prologue.size()));
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  w.line("const {0} i = (static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x) * {2};", idx, T,
         per_thread);
  w.line("if (i >= {}) return;", dp.ref(numel));
  // Output coordinates of element i (of the vector's first lane), in the output's memory order.
  std::vector<std::string> oc = decompose("i", od.shape, tensor_strides(od), dp);
  for (size_t d = 0; d < r; ++d) {
    if (literal(oc[d])) continue;
    if (vec && d == d_in && od.shape[d].value() == V) {
      oc[d] = "0";  // one vector spans the dim
      continue;
    }
    w.line("const {} o{} = {};", idx, d, oc[d]);
    oc[d] = fmt::format("o{}", d);
  }
  if (vec) {
    std::vector<std::string> lanes;
    for (int j = 0; j < V; ++j) {
      std::vector<std::string> lc = oc;
      std::optional<int64_t> base = literal(lc[d_in]);
      if (base)
        lc[d_in] = std::to_string(*base + j);
      else if (j > 0)
        lc[d_in] = fmt::format("({} + {})", lc[d_in], j);
      std::string suffix = fmt::format("_{}", j);
      w.line("// lane {}", j);
      lanes.push_back(value(w, source_of(w, node, id, od, lc, idx, suffix, dp), suffix));
    }
    std::string vals;
    for (const std::string& l : lanes) vals += (vals.empty() ? "" : ", ") + l;
    w.line("const float o[{}] = {{{}}};", V, vals);
    w.line("{}({} + i, o);", V == V16 ? "kiln_stv" : "kiln_stv_half", tensor_param(out));
  } else {
    Source src = source_of(w, node, id, od, oc, idx, "", dp);
    std::string dst = operand_offset(od, ident_out, oc, dp);
    if (prologue.empty() && src.inside.empty()) {
      // Bit-exact copy of the storage element (no f32 round trip).
      w.line("{}[{}] = {}[{}];", tensor_param(out), dst, tensor_param(in),
             operand_offset(id, ident_in, src.coords, dp));
    } else {
      std::string v = value(w, src, "");
      w.line("{};", store_f32(fmt::format("{} + {}", tensor_param(out), dst), v));
    }
  }
  w.close();

  const Dim chunk(T * per_thread);
  KernelSpec k = group_kernel_spec(name, w, gp, T, (numel + chunk - Dim(1)) / chunk);
  // The prologue's math (one op per node and element read); the copy itself does none.
  k.flops = Dim(0);
  for (int n : prologue)
    k.flops = k.flops + shape_numel(g.tensor(g.nodes()[n].outputs[0]).desc.shape);
  return k;
}

}  // namespace kiln
