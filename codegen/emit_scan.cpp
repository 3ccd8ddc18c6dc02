// Scan groups: cumsum along one axis (exclusive, reverse), with an elementwise prologue on the
// input (applied on load) and an epilogue on the output (applied on store).
//
// A line is the elements along the axis at fixed other coordinates. When the axis is the input's
// innermost memory dim, or the lines are long, one CTA scans each line: in chunks of THREADS
// elements, from the front or (reverse) the back, each chunk scanned block-wide in f32
// (kiln_block_scan in codegen/device/kiln_prelude.cuh) on top of the running carry of the earlier
// chunks; an epilogue that reads prologue values again recomputes them after the scan. Otherwise
// (a short line across memory: cumsum over C of NCHW) each thread runs one line serially, so that
// adjacent threads read adjacent addresses. Each input element is visited exactly once, so
// prologue intermediates needed elsewhere are written on the way.
#include <algorithm>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {
namespace {

class ScanKernel {
 public:
  ScanKernel(const EmitContext& cx, const FusionGroup& grp)
      : g_(cx.graph),
        grp_(grp),
        A_(g_.nodes()[grp.anchor]),
        in_t_(A_.inputs[0]),
        out_t_(A_.outputs[0]),
        X_(g_.tensor(in_t_).desc.shape),
        r_(static_cast<int>(X_.size())),
        gp_(g_, grp),
        dp_(gp_.dims) {
    int64_t ax = A_.attr_int("axis");
    axis_ = static_cast<int>(ax < 0 ? ax + r_ : ax);
    exclusive_ = A_.attr_int("exclusive") != 0;
    reverse_ = A_.attr_int("reverse") != 0;
    for (int d = 0; d < r_; ++d)
      if (d != axis_) {
        line_dims_.push_back(d);
        line_shape_.push_back(X_[d]);
      }
    L_ = X_[axis_];
    lines_ = shape_numel(line_shape_);
    const Dim stride = tensor_strides(g_.tensor(in_t_).desc)[axis_];
    const bool innermost = stride.is_static() && stride.value() == 1;
    serial_ = !innermost && L_.is_static() && L_.value() <= kSerialMaxLine;
    // A chunk covers a short line at once; longer lines take several chunks of 256.
    const int64_t Ls = L_.is_static() ? L_.value() : 256;
    T_ = static_cast<int>(std::min<int64_t>(256, (Ls + 31) / 32 * 32));
    for (int n : grp.nodes)
      if (n != grp.anchor) (n < grp.anchor ? prologue_ : epilogue_).push_back(n);
  }

  KernelSpec emit() {
    GroupKernel k;
    k.name = group_kernel_name(
        g_, grp_, fmt::format("r{}", L_.is_static() ? std::to_string(L_.value()) : "dyn"));
    k.heading = fmt::format("// group {}: {} of {} along dim {}{}{}\n", grp_.id, op_name(A_.op),
                            g_.tensor(in_t_).desc.str(), axis_, exclusive_ ? ", exclusive" : "",
                            reverse_ ? ", reverse" : "");
    if (serial_) {
      k.threads = kSerialThreads;
      serial_body();
      k.grid = (lines_ + Dim(kSerialThreads - 1)) / Dim(kSerialThreads);
    } else {
      k.threads = T_;
      body();
      k.grid = lines_;
    }
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  bool from_prologue(int t) const {
    for (int n : prologue_)
      if (g_.nodes()[n].outputs[0] == t) return true;
    return false;
  }
  bool is_out(int t) const {
    return std::find(grp_.outputs.begin(), grp_.outputs.end(), t) != grp_.outputs.end();
  }

  // The element's coordinates: the line's, and `j` along the axis.
  std::vector<std::string> coords() {
    std::vector<std::string> c(r_, "0");
    auto lc = decompose("line", line_shape_, row_major_strides(line_shape_), dp_);
    for (size_t k = 0; k < line_dims_.size(); ++k) c[line_dims_[k]] = lc[k];
    c[axis_] = "j";
    return c;
  }

  // The prologue for the element; returns the anchor input's f32 value, stores extra outputs
  // when `store`. `values` gets the prologue's values.
  std::string prologue(ElementLoader& ld, bool store, std::map<int, std::string>* values) {
    PointwiseEmitter pe{g_, ld.fn(), {}, ""};
    pe.emit(w_, prologue_);
    std::vector<int> ident(r_);
    std::iota(ident.begin(), ident.end(), 0);
    std::string v = pe.values.count(in_t_)
                        ? pe.values.at(in_t_)
                        : load_f32(tensor_param(in_t_) + " + " + ld.offset(in_t_, ident));
    if (store)
      for (int n : prologue_) {
        int t = g_.nodes()[n].outputs[0];
        if (is_out(t))
          w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
      }
    *values = pe.values;
    return v;
  }

  // One thread per line, the line walked in order; the prologue's values stay in scope for the
  // epilogue.
  void serial_body() {
    std::vector<int> ident(r_);
    std::iota(ident.begin(), ident.end(), 0);
    w_.line("const long long line = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;",
            kSerialThreads);
    w_.line("if (line >= {}) return;", dp_.ref(lines_));
    w_.line("float acc = 0.0f;");
    w_.open("for (long long k = 0; k < {}; ++k) {{", L_.value());
    w_.line("const long long j = {};", reverse_ ? fmt::format("{} - k", L_.value() - 1) : "k");
    w_.line("(void)j;");
    ElementLoader ld{g_, X_, Shape{}, "", coords(), &dp_, "", {}};
    std::map<int, std::string> seed;
    w_.line("const float x = {};", prologue(ld, true, &seed));
    if (exclusive_) {
      w_.line("const float y = acc;");
      w_.line("acc += x;");
    } else {
      w_.line("acc += x;");
      w_.line("const float y = acc;");
    }
    seed[out_t_] = "y";
    PointwiseEmitter pe{g_, ld.fn(), seed, ""};
    pe.emit(w_, epilogue_);
    for (int t : grp_.outputs)
      if (!from_prologue(t))
        w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    w_.close();
  }

  void body() {
    const std::string L = dp_.ref(L_);
    bool recompute = false;  // the epilogue reads a prologue value
    for (int n : epilogue_)
      for (int in : g_.nodes()[n].inputs) recompute |= from_prologue(in);
    std::vector<int> ident(r_);
    std::iota(ident.begin(), ident.end(), 0);

    w_.line("__shared__ float kiln_red[32];");
    w_.line("const long long line = blockIdx.x;");
    w_.line("(void)line;");
    w_.line("float carry = 0.0f;");
    w_.open("for (long long c = 0; c < {}; c += {}) {{", L, T_);
    w_.line("const long long k = c + threadIdx.x;");
    w_.line("const bool valid = k < {};", L);
    w_.line("const long long j = {};", reverse_ ? fmt::format("{} - 1 - k", L) : "k");
    w_.line("(void)j;");
    w_.line("float x = 0.0f;");
    w_.open("if (valid) {{");
    {
      ElementLoader ld{g_, X_, Shape{}, "", coords(), &dp_, "", {}};
      std::map<int, std::string> values;
      w_.line("x = {};", prologue(ld, true, &values));
    }
    w_.close();
    w_.line("float excl, total;");
    w_.line("const float incl = kiln_block_scan<{}>(x, excl, total, kiln_red);", T_);
    w_.line("(void)incl; (void)excl;");
    w_.open("if (valid) {{");
    {
      ElementLoader ld{g_, X_, Shape{}, "", coords(), &dp_, "", {}};
      std::map<int, std::string> seed;
      if (recompute) prologue(ld, false, &seed);
      w_.line("const float y = carry + {};", exclusive_ ? "excl" : "incl");
      seed[out_t_] = "y";
      PointwiseEmitter pe{g_, ld.fn(), seed, ""};
      pe.emit(w_, epilogue_);
      for (int t : grp_.outputs)
        if (!from_prologue(t))
          w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
    w_.close();
    w_.line("carry += total;");
    w_.close();
  }

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& A_;
  const int in_t_, out_t_;
  const Shape X_;
  const int r_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  int axis_ = 0;
  bool exclusive_ = false, reverse_ = false;
  std::vector<int> line_dims_, prologue_, epilogue_;
  Shape line_shape_;
  Dim L_, lines_;
  int T_ = 256;
  bool serial_ = false;
  static constexpr int64_t kSerialMaxLine = 1024;  // longer lines take a CTA each
  static constexpr int kSerialThreads = 256;
};

}  // namespace

KernelSpec emit_scan(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "scan group {} without anchor", grp.id);
  return ScanKernel(cx, grp).emit();
}

}  // namespace kiln
