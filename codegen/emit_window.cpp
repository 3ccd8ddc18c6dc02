// Window groups: maxpool2d / avgpool2d with an elementwise prologue (applied to every window tap)
// and epilogue (on the pooled value); global_avgpool is a mean over the spatial dims and goes
// through the reduction emitter.
//
// One thread per output element, in the output's memory order: for NHWC the channel is innermost
// so a warp reads 32 adjacent channels of each tap (coalesced); for NCHW adjacent threads read
// adjacent (strided) columns. Taps outside the input (padding) are skipped; avgpool divides by
// the number of valid taps unless count_include_pad.
#include <algorithm>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

class WindowKernel {
 public:
  WindowKernel(const EmitContext& cx, const FusionGroup& grp)
      : g_(cx.graph),
        grp_(grp),
        A_(g_.nodes()[grp.anchor]),
        in_t_(A_.inputs[0]),
        out_t_(A_.outputs[0]),
        xd_(g_.tensor(in_t_).desc),
        od_(g_.tensor(out_t_).desc),
        is_max_(A_.op == OpKind::Maxpool2d),
        gp_(g_, grp),
        dp_(gp_.dims) {
    k_ = A_.attr_ints("kernel");
    s_ = A_.attr_ints("stride");
    p_ = A_.attr_ints("padding");
    if (s_.empty()) s_ = k_;
    if (p_.size() == 2) p_ = {p_[0], p_[1], p_[0], p_[1]};
    include_pad_ = !is_max_ && A_.attr_int("count_include_pad") != 0;
    for (int n : grp.nodes)
      if (n != grp.anchor) (n < grp.anchor ? prologue_ : epilogue_).push_back(n);
    numel_ = shape_numel(od_.shape);
    dense16_ = dense16(cx.opts.schedule);
  }

  KernelSpec emit() {
    GroupKernel k;
    k.name = group_kernel_name(
        g_, grp_, fmt::format("k{}x{}s{}{}", k_[0], k_[1], s_[0], dense16_ ? "_v8" : ""));
    k.heading = fmt::format("// group {}: {} {} -> {}{}\n", grp_.id, op_name(A_.op), xd_.str(),
                            od_.str(), dense16_ ? ", 8 channels per thread" : "");
    k.threads = T;
    if (dense16_)
      vector_pool();
    else
      scalar_pool();
    const Dim threads = dense16_ ? numel_ / Dim(8) : numel_;
    k.grid = (threads + Dim(T - 1)) / Dim(T);
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  static constexpr int T = 256;

  // 8 channels per thread (the rule; KILN_SCHEDULE window.vec=2 switches it off): a dense NHWC
  // 16-bit pool with C % 8 == 0 and nothing fused reads each tap as one 16-byte vector and stores
  // one, where the scalar schedule moves 2 bytes per access (docs/PERFORMANCE.md).
  bool dense16(const ScheduleOverrides& ov) const {
    if (ov.window_vec == 2 || !prologue_.empty() || !epilogue_.empty()) return false;
    if (grp_.outputs.size() != 1 || grp_.outputs[0] != out_t_) return false;
    for (const TensorDesc* d : {&xd_, &od_}) {
      if (d->layout != Layout::NHWC || d->shape.size() != 4) return false;
      if (d->dtype != DType::F16 && d->dtype != DType::BF16) return false;
    }
    return xd_.dtype == od_.dtype && xd_.shape[1].is_static() && xd_.shape[1].value() % 8 == 0;
  }

  // The window loops over the taps (kh, kw) of output (oh, ow), skipping those in the padding.
  void open_taps() {
    w_.line("int count = 0;");
    w_.open("for (int kh = 0; kh < {}; ++kh) {{", k_[0]);
    w_.line("const long long ih = oh * {} - {} + kh;", s_[0], p_[0]);
    w_.line("if (ih < 0 || ih >= {}) continue;", dp_.ref(xd_.shape[2]));
    w_.open("for (int kw = 0; kw < {}; ++kw) {{", k_[1]);
    w_.line("const long long iw = ow * {} - {} + kw;", s_[1], p_[1]);
    w_.line("if (iw < 0 || iw >= {}) continue;", dp_.ref(xd_.shape[3]));
  }

  // A thread per 8 channels of an output pixel: 16-byte loads of every tap, one 16-byte store.
  void vector_pool() {
    const int64_t c8 = xd_.shape[1].value() / 8;
    const Shape xs = tensor_strides(xd_), os = tensor_strides(od_);
    w_.line("const long long i = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;", T);
    w_.line("if (i >= {} / 8) return;", dp_.ref(numel_));
    w_.line("long long q = i / {};", c8);
    w_.line("const long long cv = (i - q * {}) * 8;", c8);
    w_.line("const long long ow = q % {}; q /= {};", dp_.ref(od_.shape[3]), dp_.ref(od_.shape[3]));
    w_.line("const long long oh = q % {}; q /= {};", dp_.ref(od_.shape[2]), dp_.ref(od_.shape[2]));
    w_.line("const long long on = q;");
    w_.line("float acc[8];");
    w_.line("#pragma unroll");
    w_.line("for (int e = 0; e < 8; ++e) acc[e] = {};", is_max_ ? "-KILN_INF" : "0.0f");
    open_taps();
    w_.line("float v[8];");
    w_.line("kiln_ldv({} + on * {} + ih * {} + iw * {} + cv, v);", tensor_param(in_t_),
            dp_.ref(xs[0]), dp_.ref(xs[2]), dp_.ref(xs[3]));
    w_.line("#pragma unroll");
    w_.line("for (int e = 0; e < 8; ++e) acc[e] = {};",
            is_max_ ? "fmaxf(acc[e], v[e])" : "acc[e] + v[e]");
    w_.line("++count;");
    w_.close();
    w_.close();
    if (!is_max_) {
      w_.line("const float scale = {};", include_pad_ ? fmt::format("1.0f / {}.0f", k_[0] * k_[1])
                                                      : "1.0f / static_cast<float>(count)");
      w_.line("#pragma unroll");
      w_.line("for (int e = 0; e < 8; ++e) acc[e] *= scale;");
    }
    w_.line("(void)count;");
    w_.line("kiln_stv({} + on * {} + oh * {} + ow * {} + cv, acc);", tensor_param(out_t_),
            dp_.ref(os[0]), dp_.ref(os[2]), dp_.ref(os[3]));
  }

  // A thread per output element, the prologue applied to every tap, the epilogue to the result.
  void scalar_pool() {
    w_.line("const long long i = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;", T);
    w_.line("if (i >= {}) return;", dp_.ref(numel_));
    std::vector<std::string> oc = decompose("i", od_.shape, iteration_strides(od_), dp_);
    w_.line("const long long on = {}, oc = {}, oh = {}, ow = {};", oc[0], oc[1], oc[2], oc[3]);
    w_.line("float acc = {};", is_max_ ? "-KILN_INF" : "0.0f");
    open_taps();
    const std::vector<int> ident{0, 1, 2, 3};
    {
      ElementLoader ld{g_, xd_.shape, Shape{}, "", {"on", "oc", "ih", "iw"}, &dp_, "", {}};
      PointwiseEmitter pe{g_, ld.fn(), {}, ""};
      pe.emit(w_, prologue_);
      std::string v = pe.values.count(in_t_)
                          ? pe.values.at(in_t_)
                          : load_f32(tensor_param(in_t_) + " + " + ld.offset(in_t_, ident));
      if (is_max_)
        w_.line("acc = fmaxf(acc, {});", v);
      else
        w_.line("acc += {};", v);
      w_.line("++count;");
    }
    w_.close();
    w_.close();
    if (is_max_)
      w_.line("const float pooled = acc;");
    else if (include_pad_)
      w_.line("const float pooled = acc / {}.0f;", k_[0] * k_[1]);
    else
      w_.line("const float pooled = acc / static_cast<float>(count);");
    w_.line("(void)count;");
    ElementLoader ld{g_, od_.shape, Shape{}, "", {"on", "oc", "oh", "ow"}, &dp_, "", {}};
    PointwiseEmitter pe{g_, ld.fn(), {{out_t_, "pooled"}}, ""};
    pe.emit(w_, epilogue_);
    for (int t : grp_.outputs) {
      KILN_ASSERT(pe.values.count(t), "window group {}: output {} is not computed per output",
                  grp_.id, g_.tensor(t).name);
      w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
  }

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& A_;
  const int in_t_, out_t_;
  const TensorDesc& xd_;
  const TensorDesc& od_;
  const bool is_max_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  std::vector<int64_t> k_, s_, p_;
  bool include_pad_ = false, dense16_ = false;
  std::vector<int> prologue_, epilogue_;
  Dim numel_;
};

}  // namespace

KernelSpec emit_window(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "window group {} without anchor", grp.id);
  const Node& A = cx.graph.nodes()[grp.anchor];
  if (A.op == OpKind::GlobalAvgpool) return emit_reduction(cx, grp);
  KILN_ASSERT(A.op == OpKind::Maxpool2d || A.op == OpKind::Avgpool2d, "window op {}",
              op_name(A.op));
  return WindowKernel(cx, grp).emit();
}

}  // namespace kiln
