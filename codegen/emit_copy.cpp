// Copy groups: a movement op (transpose, reshape, pad, and the byte-moving ops of
// codegen/copy_source.hpp: concat, slice, expand, tile, depth/space, trilu) that could not be
// folded, materialized in the output's memory order (writes coalesced); the input (for concat,
// the input whose range along the axis holds the element) is gathered through its own strides.
// The group's other nodes are the op's prologue: private elementwise producers of its input,
// computed where an element is read. When the output's innermost memory dim is a static multiple
// of the 16-byte vector width (or of half of it), each thread writes one 16-byte (8-byte) vector
// (its lanes differ only in that coordinate: a padded NHWC pixel of 8 f16 channels is one store;
// lanes known to be padding are constants); otherwise each thread writes one element. Values pass
// through f32, which every storage type converts to and back exactly; the scalar path without a
// prologue or padding copies the storage element itself.
#include <optional>

#include "codegen/copy_source.hpp"
#include "codegen/emit.hpp"
#include "codegen/emit_resize.hpp"
#include "codegen/gather_source.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/gather_ops.hpp"
#include "engine/ir/op_table.hpp"
#include "kiln/host_tensor.hpp"

namespace kiln {
namespace {

std::optional<int64_t> literal(const std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(s);
}

// Where an output element (coordinates `oc`) reads the movement op's input: the input
// coordinates and, for pad, the condition under which it reads at all ("" = always, "false" =
// never: the element is fill). Writes the statements it needs (reshape's linear index).
using Source = CopySource;

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

std::vector<Source> sources_of(Writer& w, const Graph& g, const Node& node, const TensorDesc& id,
                               const TensorDesc& od, const std::vector<std::string>& oc,
                               const char* idx, const std::string& suffix, DimParams& dp) {
  if (is_index_gather(node.op)) return {index_gather_source(w, g, node, oc, idx, suffix, dp)};
  if (is_gather_copy(node)) return movement_sources(g, node, oc, dp);
  return {source_of(w, node, id, od, oc, idx, suffix, dp)};
}

// The copy kernel of one group: the movement op `node` (input `in`, output `out`) after its
// prologue, one thread per output element or vector.
class CopyKernel {
 public:
  CopyKernel(const Graph& g, const FusionGroup& grp)
      : g_(g),
        grp_(grp),
        node_(g.nodes()[grp.nodes.back()]),
        prologue_(grp.nodes.begin(), grp.nodes.end() - 1),
        ins_(node_.inputs),
        in_(node_.inputs[0]),
        out_(node_.outputs[0]),
        id_(g.tensor(in_).desc),
        od_(g.tensor(out_).desc),
        gp_(g, grp),
        dp_(gp_.dims) {
    const size_t r = od_.shape.size();
    if (node_.op == OpKind::Pad)
      fill_ = is_float(od_.dtype) ? cuda_float(node_.attr_float("value"))
                                  : fmt::format("static_cast<{}>({}LL)", value_ctype(od_.dtype),
                                                float_to_int(od_.dtype, node_.attr_float("value")));
    KILN_ASSERT(ins_.size() == 1 || prologue_.empty(), "copy group {}: a prologue of {} inputs",
                grp.id, ins_.size());
    // 16-byte vectors along the output's innermost memory dim, or 8-byte ones where that dim is
    // a multiple of half a vector only (the RGB stem's input padded to 4 channels: one 8-byte
    // pixel per thread instead of one element).
    d_in_ = od_.layout == Layout::NHWC && r >= 3 ? 1 : r - 1;
    const bool inner_static =
        r >= 1 && od_.layout != Layout::Strided && od_.shape[d_in_].is_static();
    // Integer and bool tensors copy element by element (the vector stores pack f32 values).
    const bool floating = is_float(od_.dtype);
    V16_ = floating ? vec_elems(od_.dtype) : 1;
    V_ = floating && inner_static && od_.shape[d_in_].value() % V16_ != 0 &&
                 od_.shape[d_in_].value() % (V16_ / 2) == 0
             ? V16_ / 2
             : V16_;
    vec_ = floating && inner_static && od_.shape[d_in_].value() % V_ == 0;
    per_thread_ = vec_ ? V_ : 1;
    numel_ = shape_numel(od_.shape);
    const bool small = numel_.is_static() && numel_.value() + T * per_thread_ < (int64_t{1} << 31);
    idx_ = small ? "int" : "long long";
    ident_in_.resize(id_.shape.size());
    ident_out_.resize(r);
    for (size_t d = 0; d < ident_in_.size(); ++d) ident_in_[d] = static_cast<int>(d);
    for (size_t d = 0; d < r; ++d) ident_out_[d] = static_cast<int>(d);
    if (is_index_gather(node_.op) && !gather_indices_in_range(g, node_)) {
      // The error word an out-of-range index is reported in (codegen/gather_source.hpp).
      KernelArg err;
      err.kind = KernelArg::Kind::ErrorWord;
      err.tensor = out_;
      gp_.add_trailing(fmt::format("unsigned int* __restrict__ {}", kErrorWordParam), err);
    }
  }

  KernelSpec emit() {
    w_.line("const {0} i = (static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x) * {2};", idx_, T,
            per_thread_);
    w_.line("if (i >= {}) return;", dp_.ref(numel_));
    std::vector<std::string> oc = output_coords();
    if (vec_)
      vector_store(oc);
    else
      scalar_store(oc);
    GroupKernel k;
    k.name = group_kernel_name(g_, grp_, "");
    k.heading = fmt::format(
        "// group {}: {} {} -> {}{}\n", grp_.id, op_name(node_.op), id_.str(), od_.str(),
        prologue_.empty() ? "" : fmt::format(" ({} prologue nodes)", prologue_.size()));
    k.threads = T;
    const Dim chunk(T * per_thread_);
    k.grid = (numel_ + chunk - Dim(1)) / chunk;
    KernelSpec spec = group_kernel_spec(k, gp_, w_.str());
    // The prologue's math (one op per node and element read); the copy itself does none.
    spec.flops = Dim(0);
    for (int n : prologue_)
      spec.flops = spec.flops + shape_numel(g_.tensor(g_.nodes()[n].outputs[0]).desc.shape);
    return spec;
  }

 private:
  static constexpr int T = 256;

  // Output coordinates of element i (of the vector's first lane), in the output's memory order.
  std::vector<std::string> output_coords() {
    std::vector<std::string> oc = decompose("i", od_.shape, tensor_strides(od_), dp_);
    for (size_t d = 0; d < oc.size(); ++d) {
      if (literal(oc[d])) continue;
      if (vec_ && d == d_in_ && od_.shape[d].value() == V_) {
        oc[d] = "0";  // one vector spans the dim
        continue;
      }
      w_.line("const {} o{} = {};", idx_, d, oc[d]);
      oc[d] = fmt::format("o{}", d);
    }
    return oc;
  }

  // The value of the element from several sources (concat: the first whose range holds it).
  std::string value(const std::vector<Source>& srcs, const std::string& suffix) {
    if (srcs.size() == 1) return value(srcs[0], suffix);
    // Several inputs (concat, no prologue): the first source whose range holds the element.
    std::string var = "val" + suffix;
    w_.line("{} {};", value_ctype(od_.dtype), var);
    for (size_t k = 0; k < srcs.size(); ++k) {
      const int t = ins_[srcs[k].input];
      const std::string load =
          load_f32(fmt::format("{} + {}", tensor_param(t),
                               operand_offset(g_.tensor(t).desc, ident_in_, srcs[k].coords, dp_)));
      if (k == 0)
        w_.open("if ({}) {{", srcs[k].inside);
      else if (k + 1 < srcs.size())
        w_.reopen(fmt::format("}} else if ({}) {{", srcs[k].inside));
      else
        w_.reopen("} else {");
      w_.line("{} = {};", var, load);
    }
    w_.close();
    return var;
  }

  // The value of the element whose input coordinates are `src` (a prologue, or the input
  // loaded and converted; f32 for the floating types, else its own type); for pad, the fill
  // outside. Returns the variable.
  std::string value(const Source& src, const std::string& suffix) {
    std::string var = "val" + suffix;
    const char* type = value_ctype(od_.dtype);
    if (src.inside == "false") {
      w_.line("const {} {} = {};", type, var, fill_);
      return var;
    }
    if (!src.inside.empty()) {
      w_.line("{} {} = {};", type, var, fill_);
      w_.open("if ({}) {{", src.inside);
    }
    std::string v;
    if (prologue_.empty()) {
      v = load_f32(fmt::format("{} + {}", tensor_param(in_),
                               operand_offset(id_, ident_in_, src.coords, dp_)));
    } else {
      ElementLoader ld{g_, id_.shape, tensor_strides(id_), "", src.coords, &dp_, suffix, {}};
      PointwiseEmitter pe{g_, ld.fn(), {}, suffix};
      pe.emit(w_, prologue_);
      v = pe.values.at(in_);
    }
    if (src.inside.empty()) {
      w_.line("const {} {} = {};", type, var, v);
    } else {
      w_.line("{} = {};", var, v);
      w_.close();
    }
    return var;
  }

  // One vector of V lanes along the innermost output dim, one 16- (8-) byte store.
  void vector_store(const std::vector<std::string>& oc) {
    std::vector<std::string> lanes;
    for (int j = 0; j < V_; ++j) {
      std::vector<std::string> lc = oc;
      std::optional<int64_t> base = literal(lc[d_in_]);
      if (base)
        lc[d_in_] = std::to_string(*base + j);
      else if (j > 0)
        lc[d_in_] = fmt::format("({} + {})", lc[d_in_], j);
      std::string suffix = fmt::format("_{}", j);
      w_.line("// lane {}", j);
      lanes.push_back(value(sources_of(w_, g_, node_, id_, od_, lc, idx_, suffix, dp_), suffix));
    }
    std::string vals;
    for (const std::string& l : lanes) vals += (vals.empty() ? "" : ", ") + l;
    w_.line("const float o[{}] = {{{}}};", V_, vals);
    w_.line("{}({} + i, o);", V_ == V16_ ? "kiln_stv" : "kiln_stv_half", tensor_param(out_));
  }

  void scalar_store(const std::vector<std::string>& oc) {
    std::vector<Source> srcs = sources_of(w_, g_, node_, id_, od_, oc, idx_, "", dp_);
    std::string dst = operand_offset(od_, ident_out_, oc, dp_);
    if (is_gather_copy(node_) && prologue_.empty() &&
        (srcs.size() > 1 || srcs[0].inside != "false")) {
      // Bit-exact copies of the storage elements: the source whose condition holds, else the
      // fill value.
      for (size_t k = 0; k < srcs.size(); ++k) {
        const int t = ins_[srcs[k].input];
        const std::string copy =
            fmt::format("{}[{}] = {}[{}];", tensor_param(out_), dst, tensor_param(t),
                        operand_offset(g_.tensor(t).desc, ident_in_, srcs[k].coords, dp_));
        const bool last = k + 1 == srcs.size();
        if (srcs[k].inside.empty()) {
          w_.line("{}{}", k == 0 ? "" : "else ", copy);
        } else {
          w_.line("{}if ({}) {}", k == 0 ? "" : "else ", srcs[k].inside, copy);
          if (last)
            w_.line("else {};", store_f32(fmt::format("{} + {}", tensor_param(out_), dst), fill_));
        }
      }
      return;
    }
    const Source& src = srcs[0];
    if (prologue_.empty() && src.inside.empty()) {
      // Bit-exact copy of the storage element (no f32 round trip).
      w_.line("{}[{}] = {}[{}];", tensor_param(out_), dst, tensor_param(in_),
              operand_offset(id_, ident_in_, src.coords, dp_));
    } else {
      std::string v = value(src, "");
      w_.line("{};", store_f32(fmt::format("{} + {}", tensor_param(out_), dst), v));
    }
  }

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& node_;
  const std::vector<int> prologue_;
  const std::vector<int> ins_;
  const int in_, out_;
  const TensorDesc& id_;
  const TensorDesc& od_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  std::string fill_ = "0.0f";  // outside every source (pad, trilu)
  size_t d_in_ = 0;
  int V16_ = 8, V_ = 8;
  bool vec_ = false;
  int64_t per_thread_ = 1;
  Dim numel_;
  const char* idx_ = "int";
  std::vector<int> ident_in_, ident_out_;
};

}  // namespace

KernelSpec emit_copy(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(!grp.nodes.empty(), "empty copy group {}", grp.id);
  // The movement op is the last node (topological order); the others are its prologue.
  const Node& node = g.nodes()[grp.nodes.back()];
  KILN_ASSERT(op_info(node.op).category == OpCategory::Movement, "copy group {} ends in {}", grp.id,
              op_name(node.op));
  // Linear resize weighs several neighbours: a kernel of its own.
  if (is_linear_resize(node)) return emit_resize_linear(cx, grp);
  return CopyKernel(g, grp).emit();
}

}  // namespace kiln
