// Linear resize (bilinear / trilinear over 1 to 3 spatial dims): one memory-bound kernel, a thread
// per output element, reading the 2^k neighbours with f32 weights computed as the CPU reference
// computes them (engine/ir/resize_op.hpp). In NHWC with a channel count that is a multiple of the
// 16-byte vector width, a thread computes one vector of channels of one pixel: the weights are
// shared by its lanes and each neighbour is one 16-byte load. The group's other nodes are the
// op's prologue (private elementwise producers of its input), computed where a neighbour is read.
#include "codegen/emit_resize.hpp"
#include "codegen/copy_source.hpp"
#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/resize_op.hpp"

namespace kiln {
namespace {

class ResizeLinearKernel {
 public:
  ResizeLinearKernel(const Graph& g, const FusionGroup& grp)
      : g_(g),
        grp_(grp),
        node_(g.nodes()[grp.nodes.back()]),
        prologue_(grp.nodes.begin(), grp.nodes.end() - 1),
        in_(node_.inputs[0]),
        out_(node_.outputs[0]),
        id_(g.tensor(in_).desc),
        od_(g.tensor(out_).desc),
        gp_(g, grp),
        dp_(gp_.dims) {
    const int r = od_.rank();
    const int v = vec_elems(od_.dtype);
    // A vector of channels: both tensors NHWC, the channel count a static multiple of it.
    vec_ = r == 4 && od_.layout == Layout::NHWC && id_.layout == Layout::NHWC &&
           od_.shape[1].is_static() && od_.shape[1].value() % v == 0;
    V_ = vec_ ? v : 1;
    numel_ = shape_numel(od_.shape);
    const bool small = numel_.is_static() && numel_.value() + T * V_ < (int64_t{1} << 31) &&
                       shape_numel(id_.shape).is_static() &&
                       shape_numel(id_.shape).value() < (int64_t{1} << 31);
    idx_ = small ? "int" : "long long";
    ident_.resize(r);
    for (int d = 0; d < r; ++d) ident_[d] = d;
  }

  KernelSpec emit() {
    w_.line("const {0} i = (static_cast<{0}>(blockIdx.x) * {1} + threadIdx.x) * {2};", idx_, T, V_);
    w_.line("if (i >= {}) return;", dp_.ref(numel_));
    std::vector<std::string> oc = decompose("i", od_.shape, tensor_strides(od_), dp_);
    for (size_t d = 0; d < oc.size(); ++d) {
      if (oc[d] == "0") continue;
      w_.line("const {} o{} = {};", idx_, d, oc[d]);
      oc[d] = fmt::format("o{}", d);
    }
    const std::vector<std::string> weights = taps(oc);
    accumulate(oc, weights);
    GroupKernel k;
    k.name = group_kernel_name(g_, grp_, fmt::format("linear{}d", oc.size() - kResizeFirstSpatial));
    k.heading =
        fmt::format("// group {}: resize (linear) {} -> {}{}{}\n", grp_.id, id_.str(), od_.str(),
                    vec_ ? fmt::format(", {} channels a thread", V_) : "",
                    prologue_.empty() ? "" : fmt::format(" ({} prologue nodes)", prologue_.size()));
    k.threads = T;
    const Dim chunk(T * V_);
    k.grid = (numel_ + chunk - Dim(1)) / chunk;
    KernelSpec spec = group_kernel_spec(k, gp_, w_.str());
    // Per output element: 2^k multiply-adds and the prologue at each neighbour.
    const int64_t corners = int64_t{1} << (oc.size() - kResizeFirstSpatial);
    spec.flops = numel_ * Dim(2 * corners * (1 + static_cast<int64_t>(prologue_.size())));
    return spec;
  }

 private:
  static constexpr int T = 256;

  // Per resized spatial dim d: x<d> (the clamped source coordinate), the neighbours i<d>_0 and
  // i<d>_1 and the upper one's weight w<d>. Returns the weight of the upper neighbour per spatial
  // dim ("" for a dim that maps onto itself).
  std::vector<std::string> taps(const std::vector<std::string>& oc) {
    std::vector<std::string> w;
    for (size_t d = kResizeFirstSpatial; d < oc.size(); ++d) {
      if (resize_identity_dim(node_, id_, od_, d)) {
        w.push_back("");
        continue;
      }
      const std::string last = dim_minus_one(id_.shape[d], dp_);
      w_.line("const float x{} = fminf(fmaxf({}, 0.0f), (float)({}));", d,
              resize_source_expr(node_, id_, od_, d, oc[d], dp_), last);
      w_.line("const {0} i{1}_0 = static_cast<{0}>(x{1});", idx_, d);
      w_.line("const {0} i{1}_1 = i{1}_0 < {2} ? i{1}_0 + 1 : i{1}_0;", idx_, d, last);
      w_.line("const float w{0} = x{0} - (float)i{0}_0;", d);
      w.push_back(fmt::format("w{}", d));
    }
    return w;
  }

  // The value of input element `coords` for lane suffix `suffix`: the prologue at it, or the
  // input loaded (f32).
  std::string load(const std::vector<std::string>& coords, const std::string& suffix) {
    if (prologue_.empty())
      return load_f32(
          fmt::format("{} + {}", tensor_param(in_), operand_offset(id_, ident_, coords, dp_)));
    ElementLoader ld{g_, id_.shape, tensor_strides(id_), "", coords, &dp_, suffix, {}};
    PointwiseEmitter pe{g_, ld.fn(), {}, suffix};
    pe.emit(w_, prologue_);
    return pe.values.at(in_);
  }

  // acc[lane] = sum over the 2^k corners of (product of the weights) * neighbour, then stored.
  void accumulate(const std::vector<std::string>& oc, const std::vector<std::string>& weights) {
    w_.line("float acc[{}] = {{}};", V_);
    const int k = static_cast<int>(weights.size());
    for (int corner = 0; corner < (1 << k); ++corner) {
      std::vector<std::string> c = oc;
      std::string wt;
      bool skip = false;
      for (int s = 0; s < k; ++s) {
        const size_t d = kResizeFirstSpatial + s;
        const bool up = (corner >> s) & 1;
        if (weights[s].empty()) {
          skip |= up;  // a dim onto itself has one neighbour
          continue;
        }
        c[d] = fmt::format("i{}_{}", d, up ? 1 : 0);
        const std::string f = up ? weights[s] : fmt::format("(1.0f - {})", weights[s]);
        wt = wt.empty() ? f : fmt::format("{} * {}", wt, f);
      }
      if (skip) continue;
      if (wt.empty()) wt = "1.0f";
      w_.open("{{  // corner {}", corner);
      w_.line("const float wc = {};", wt);
      if (vec_ && prologue_.empty()) {
        w_.line("float v[{}];", V_);
        w_.line("kiln_ldv({} + {}, v);", tensor_param(in_), operand_offset(id_, ident_, c, dp_));
        w_.line("for (int j = 0; j < {}; ++j) acc[j] += wc * v[j];", V_);
      } else {
        for (int j = 0; j < V_; ++j) {
          std::vector<std::string> lc = c;
          if (j > 0) lc[1] = fmt::format("({} + {})", c[1], j);
          const std::string v = load(lc, fmt::format("_c{}_{}", corner, j));
          w_.line("acc[{}] += wc * {};", j, v);
        }
      }
      w_.close();
    }
    if (vec_)
      w_.line("kiln_stv({} + i, acc);", tensor_param(out_));
    else
      w_.line("{};", store_f32(fmt::format("{} + i", tensor_param(out_)), "acc[0]"));
  }

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& node_;
  const std::vector<int> prologue_;
  const int in_, out_;
  const TensorDesc& id_;
  const TensorDesc& od_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  bool vec_ = false;
  int V_ = 1;
  Dim numel_;
  const char* idx_ = "int";
  std::vector<int> ident_;
};

}  // namespace

bool is_linear_resize(const Node& node) {
  return node.op == OpKind::Resize && resize_spec(node).linear;
}

KernelSpec emit_resize_linear(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(!grp.nodes.empty() && is_linear_resize(cx.graph.nodes()[grp.nodes.back()]),
              "resize group {} does not end in a linear resize", grp.id);
  return ResizeLinearKernel(cx.graph, grp).emit();
}

}  // namespace kiln
