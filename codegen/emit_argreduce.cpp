// Reduction groups anchored by argmax / argmin: the i64 position of the extreme along one axis,
// with an elementwise prologue on the input (its intermediates needed elsewhere written on the
// way: every input element is visited once). Pairs (value, index) combine in the order of
// codegen/device/kiln_argreduce.cuh, which keeps onnxruntime's tie and NaN rules in any
// reduction tree. Values compare in their own type (f32, or int / long long: exact).
//
// Schedule (heuristics/schedule.cpp, as for the other reductions): when the axis is the
// innermost memory dim, a warp (short lines) or a CTA (long ones) per output walks the line in
// memory order; otherwise one thread per output loops over the line while adjacent threads read
// adjacent addresses.
#include <algorithm>
#include <limits>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/index_ops.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {
namespace {

class ArgReduceKernel {
 public:
  ArgReduceKernel(const EmitContext& cx, const FusionGroup& grp)
      : g_(cx.graph),
        grp_(grp),
        A_(g_.nodes()[grp.anchor]),
        in_t_(A_.inputs[0]),
        out_t_(A_.outputs[0]),
        xd_(g_.tensor(in_t_).desc),
        r_(static_cast<int>(xd_.shape.size())),
        axis_(static_cast<int>(arg_reduce_axis(A_, r_))),
        gp_(g_, grp),
        dp_(gp_.dims) {
    for (int d = 0; d < r_; ++d)
      if (d != axis_) kept_shape_.push_back(xd_.shape[d]);
    len_ = xd_.shape[axis_];
    nout_ = shape_numel(kept_shape_);
    const Dim stride = tensor_strides(xd_)[axis_];
    const bool inner = stride.is_static() && stride.value() == 1;
    // No column-tile form here (value-index pairs): outer lines take a thread each, which the
    // schedule gives for "many outputs".
    sch_ = choose_reduction(len_.is_static() ? len_.value() : -1,
                            std::numeric_limits<int64_t>::max(), inner, cx.opts.sm);
    for (int n : grp.nodes)
      if (n != grp.anchor) {
        KILN_ASSERT(n < grp.anchor, "group {}: {} has no epilogue (an i64 result)", grp.id,
                    A_.name);
        prologue_.push_back(n);
      }
    T_ = value_ctype(xd_.dtype);
    tmpl_ = fmt::format("<{}, {}>", A_.op == OpKind::ArgMax ? "true" : "false",
                        A_.attr_int("select_last_index") != 0 ? "true" : "false");
  }

  KernelSpec emit() {
    GroupKernel k;
    k.name = group_kernel_name(
        g_, grp_, fmt::format("r{}", len_.is_static() ? std::to_string(len_.value()) : "dyn"));
    len_c_ = dp_.ref(len_);
    kept_c_ = decompose("o", kept_shape_, row_major_strides(kept_shape_), dp_);
    k.threads = sch_.threads;
    k.device = device_file("kiln_argreduce.cuh");
    k.heading = fmt::format("// group {}: {} of {} along axis {}\n", grp_.id, op_name(A_.op),
                            xd_.str(), axis_);
    if (!sch_.inner)
      k.grid = thread_per_output();
    else if (sch_.warp_per_output)
      k.grid = warp_per_output();
    else
      k.grid = cta_per_output();
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  // The input coordinates of output o's element `j` of the line.
  std::vector<std::string> coords(const std::string& j) const {
    std::vector<std::string> c;
    size_t k = 0;
    for (int d = 0; d < r_; ++d) c.push_back(d == axis_ ? j : kept_c_[k++]);
    return c;
  }

  // Element j of output o's line: the prologue, its extra outputs, the pair's update.
  void visit() {
    ElementLoader ld{g_, xd_.shape, Shape{}, "", coords("j"), &dp_, "", {}};
    PointwiseEmitter pe{g_, ld.fn(), {}, ""};
    pe.emit(w_, prologue_);
    std::vector<int> ident(r_);
    std::iota(ident.begin(), ident.end(), 0);
    // A prologue's value is rounded to its tensor's 16-bit type before the comparison: the
    // index is exact, so a near-tie must compare as the unfused graph's stored value does.
    std::string v = pe.values.count(in_t_)
                        ? pe.values.at(in_t_)
                        : load_f32(tensor_param(in_t_) + " + " + ld.offset(in_t_, ident));
    if (pe.values.count(in_t_) && xd_.dtype == DType::F16) v = fmt::format("kiln_round_f16({})", v);
    if (pe.values.count(in_t_) && xd_.dtype == DType::BF16)
      v = fmt::format("kiln_round_bf16({})", v);
    for (int n : prologue_) {
      const int t = g_.nodes()[n].outputs[0];
      if (std::find(grp_.outputs.begin(), grp_.outputs.end(), t) != grp_.outputs.end())
        w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
    w_.line("kiln_arg_take{}(best, at, static_cast<{}>({}), j);", tmpl_, T_, v);
  }

  // Stores output o's index.
  void finish() {
    const TensorDesc& od = g_.tensor(out_t_).desc;
    std::vector<std::string> oc;
    const bool keep = A_.attr_int("keepdims") != 0;
    for (int d = 0, k = 0; d < r_; ++d) {
      if (d != axis_)
        oc.push_back(kept_c_[k++]);
      else if (keep)
        oc.push_back("0");
    }
    ElementLoader ld{g_, od.shape, Shape{}, "", oc, &dp_, "", {}};
    std::vector<int> ident(od.shape.size());
    std::iota(ident.begin(), ident.end(), 0);
    w_.line("{};", store_f32(tensor_param(out_t_) + " + " + ld.offset(out_t_, ident), "at"));
  }

  void start_pair() {
    w_.line("{} best = static_cast<{}>(0);", T_, T_);
    w_.line("long long at = -1;");
  }

  Dim thread_per_output() {
    const int T = sch_.threads;
    w_.line("const long long o = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;", T);
    w_.line("if (o >= {}) return;", dp_.ref(nout_));
    start_pair();
    w_.open("for (long long j = 0; j < {}; ++j) {{", len_c_);
    visit();
    w_.close();
    finish();
    return (nout_ + Dim(T - 1)) / Dim(T);
  }

  Dim warp_per_output() {
    w_.line("const long long o = static_cast<long long>(blockIdx.x) * {} + (threadIdx.x >> 5);",
            sch_.outputs_per_cta);
    w_.line("if (o >= {}) return;", dp_.ref(nout_));
    w_.line("const int lane = threadIdx.x & 31;");
    start_pair();
    w_.open("for (long long j = lane; j < {}; j += 32) {{", len_c_);
    visit();
    w_.close();
    w_.line("kiln_warp_arg{}(best, at);", tmpl_);
    w_.open("if (lane == 0) {{");
    finish();
    w_.close();
    return (nout_ + Dim(sch_.outputs_per_cta - 1)) / Dim(sch_.outputs_per_cta);
  }

  Dim cta_per_output() {
    const int T = sch_.threads;
    w_.line("__shared__ {} kiln_sv[32];", T_);
    w_.line("__shared__ long long kiln_si[32];");
    w_.line("const long long o = blockIdx.x;");
    start_pair();
    w_.open("for (long long j = threadIdx.x; j < {}; j += {}) {{", len_c_, T);
    visit();
    w_.close();
    const std::string tmpl = tmpl_.substr(0, tmpl_.size() - 1) + fmt::format(", {}>", T);
    w_.line("kiln_block_arg{}(best, at, kiln_sv, kiln_si);", tmpl);
    w_.open("if (threadIdx.x == 0) {{");
    finish();
    w_.close();
    return nout_;
  }

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& A_;
  const int in_t_, out_t_;
  const TensorDesc& xd_;
  const int r_, axis_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  std::vector<int> prologue_;
  Shape kept_shape_;
  Dim len_, nout_;
  ReduceSchedule sch_;
  std::string len_c_, T_, tmpl_;
  std::vector<std::string> kept_c_;
};

}  // namespace

KernelSpec emit_arg_reduction(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "reduction group {} without anchor", grp.id);
  return ArgReduceKernel(cx, grp).emit();
}

}  // namespace kiln
