// Reduction groups: reduce_sum/mean/max/min/l2/prod over any axes (keepdims or not), and
// global_avgpool (a mean over the spatial dims), with an elementwise prologue on the input and an
// epilogue on the reduced output.
//
// Schedule: when the innermost memory dim of the input is reduced, a warp (short reductions) or
// a CTA (long ones) per output element walks the reduced elements in memory order (coalesced);
// otherwise adjacent threads hold adjacent outputs (adjacent addresses): one thread per output
// looping over the reduced dims where outputs are many, else tiles of 32 outputs by 8 rows of the
// reduced range, split over several CTAs that combine through a workspace (a global pool of a
// large NHWC map: few outputs, long ranges; heuristics/schedule.cpp). Each input element is
// visited exactly once, so prologue intermediates needed elsewhere are written on the way.
#include <algorithm>
#include <numeric>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {
namespace {

enum class ReduceKind { Sum, Mean, Max, Min, L2, Prod };

class ReductionKernel {
 public:
  ReductionKernel(const EmitContext& cx, const FusionGroup& grp)
      : g_(cx.graph),
        grp_(grp),
        A_(g_.nodes()[grp.anchor]),
        in_t_(A_.inputs[0]),
        out_t_(A_.outputs[0]),
        xd_(g_.tensor(in_t_).desc),
        od_(g_.tensor(out_t_).desc),
        r_(static_cast<int>(xd_.shape.size())),
        gp_(g_, grp),
        dp_(gp_.dims) {
    std::vector<bool> reduced = reduced_dims();
    // Dims in the input's memory order (outermost first).
    Shape xs = tensor_strides(xd_);
    std::vector<int> order(r_);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (xs[a].is_static() && xs[b].is_static()) return xs[a].value() > xs[b].value();
      return false;
    });
    bool static_strides = true;
    for (const Dim& d : xs) static_strides &= d.is_static();
    if (!static_strides) std::iota(order.begin(), order.end(), 0);  // logical order
    for (int d : order) (reduced[d] ? red_dims_ : kept_dims_).push_back(d);
    for (int d : red_dims_) red_shape_.push_back(xd_.shape[d]);
    for (int d : kept_dims_) kept_shape_.push_back(xd_.shape[d]);
    R_ = shape_numel(red_shape_);
    nout_ = shape_numel(kept_shape_);
    const bool inner = !red_dims_.empty() && red_dims_.back() == order.back();
    sch_ = choose_reduction(R_.is_static() ? R_.value() : -1,
                            nout_.is_static() ? nout_.value() : -1, inner, cx.opts.sm);
    for (int n : grp.nodes)
      if (n != grp.anchor) (n < grp.anchor ? prologue_ : epilogue_).push_back(n);
  }

  KernelSpec emit() {
    GroupKernel k;
    std::string detail = fmt::format("r{}", R_.is_static() ? std::to_string(R_.value()) : "dyn");
    if (!sch_.inner && sch_.columns)
      detail += fmt::format("_cols32x{}_s{}", sch_.threads / 32, sch_.splits);
    k.name = group_kernel_name(g_, grp_, detail);
    Rr_ = dp_.ref(R_);
    kept_c_ = decompose("o", kept_shape_, row_major_strides(kept_shape_), dp_);
    k.threads = sch_.threads;
    k.heading = fmt::format("// group {}: {} of {} over {} elements per output\n", grp_.id,
                            op_name(A_.op), xd_.str(), R_.str());
    if (!sch_.inner && sch_.columns) {
      k.grid = column_tiles();
      if (sch_.splits > 1) k.device = device_file("kiln_split_reduce.cuh");
    } else if (!sch_.inner)
      k.grid = thread_per_output();
    else if (sch_.warp_per_output)
      k.grid = warp_per_output();
    else
      k.grid = cta_per_output();
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  std::vector<bool> reduced_dims() {
    std::vector<bool> reduced(r_, false);
    if (A_.op == OpKind::GlobalAvgpool) {
      for (int d = 2; d < r_; ++d) reduced[d] = true;
      kind_ = ReduceKind::Mean;
      return reduced;
    }
    const auto& axes = A_.attr_ints("axes");
    for (int64_t a : axes) reduced[a < 0 ? a + r_ : a] = true;
    if (axes.empty()) reduced.assign(r_, true);
    keep_ = A_.attr_int("keepdims") != 0;
    kind_ = A_.op == OpKind::ReduceSum    ? ReduceKind::Sum
            : A_.op == OpKind::ReduceMean ? ReduceKind::Mean
            : A_.op == OpKind::ReduceMax  ? ReduceKind::Max
            : A_.op == OpKind::ReduceL2   ? ReduceKind::L2
            : A_.op == OpKind::ReduceProd ? ReduceKind::Prod
                                          : ReduceKind::Min;
    return reduced;
  }

  const char* init() const {
    return kind_ == ReduceKind::Max    ? "-KILN_INF"
           : kind_ == ReduceKind::Min  ? "KILN_INF"
           : kind_ == ReduceKind::Prod ? "1.0f"
                                       : "0.0f";
  }
  const char* opn() const {
    return kind_ == ReduceKind::Max    ? "max"
           : kind_ == ReduceKind::Min  ? "min"
           : kind_ == ReduceKind::Prod ? "prod"
                                       : "sum";
  }
  // Folds partial result `p` (of the same kind as acc) into acc.
  std::string merge(const std::string& p) const {
    switch (kind_) {
      case ReduceKind::Max:
        return fmt::format("acc = fmaxf(acc, {});", p);
      case ReduceKind::Min:
        return fmt::format("acc = fminf(acc, {});", p);
      case ReduceKind::Prod:
        return fmt::format("acc *= {};", p);
      default:  // sums, and L2's sums of squares
        return fmt::format("acc += {};", p);
    }
  }
  std::string combine(const std::string& v) const {
    switch (kind_) {
      case ReduceKind::Max:
        return fmt::format("acc = fmaxf(acc, {});", v);
      case ReduceKind::Min:
        return fmt::format("acc = fminf(acc, {});", v);
      case ReduceKind::Prod:
        return fmt::format("acc *= {};", v);
      case ReduceKind::L2:  // a sum of squares, its root taken in finish()
        return fmt::format("{{ const float sq = {}; acc = fmaf(sq, sq, acc); }}", v);
      default:
        return fmt::format("acc += {};", v);
    }
  }

  // Visits input element j of output o: prologue, extra outputs, accumulate.
  void visit() {
    std::vector<std::string> c(r_, "0");
    auto rc = decompose("j", red_shape_, row_major_strides(red_shape_), dp_);
    for (size_t k = 0; k < kept_dims_.size(); ++k) c[kept_dims_[k]] = kept_c_[k];
    for (size_t k = 0; k < red_dims_.size(); ++k) c[red_dims_[k]] = rc[k];
    ElementLoader ld{g_, xd_.shape, Shape{}, "", c, &dp_, "", {}};
    PointwiseEmitter pe{g_, ld.fn(), {}, ""};
    pe.emit(w_, prologue_);
    std::vector<int> ident(r_);
    std::iota(ident.begin(), ident.end(), 0);
    std::string v = pe.values.count(in_t_)
                        ? pe.values.at(in_t_)
                        : load_f32(tensor_param(in_t_) + " + " + ld.offset(in_t_, ident));
    for (int n : prologue_) {
      int t = g_.nodes()[n].outputs[0];
      if (std::find(grp_.outputs.begin(), grp_.outputs.end(), t) != grp_.outputs.end())
        w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
    w_.line("{}", combine(v));
  }

  // Finishes output o from the reduced `acc`: epilogue and stores.
  void finish() {
    w_.line("const float red = {};", kind_ == ReduceKind::Mean
                                         ? fmt::format("acc / static_cast<float>({})", Rr_)
                                     : kind_ == ReduceKind::L2 ? std::string("sqrtf(acc)")
                                                               : std::string("acc"));
    std::vector<std::string> oc;
    if (keep_) {
      oc.assign(r_, "0");
      for (size_t k = 0; k < kept_dims_.size(); ++k) oc[kept_dims_[k]] = kept_c_[k];
    } else {
      // Output dims are the kept dims in logical order.
      std::vector<int> logical = kept_dims_;
      std::sort(logical.begin(), logical.end());
      for (int d : logical)
        for (size_t k = 0; k < kept_dims_.size(); ++k)
          if (kept_dims_[k] == d) oc.push_back(kept_c_[k]);
    }
    ElementLoader ld{g_, od_.shape, Shape{}, "", oc, &dp_, "", {}};
    PointwiseEmitter pe{g_, ld.fn(), {{out_t_, "red"}}, ""};
    pe.emit(w_, epilogue_);
    std::vector<int> ident(od_.shape.size());
    std::iota(ident.begin(), ident.end(), 0);
    for (int t : grp_.outputs) {
      bool pro = false;
      for (int n : prologue_) pro |= g_.nodes()[n].outputs[0] == t;
      if (pro) continue;
      w_.line("{};", store_f32(tensor_param(t) + " + " + ld.offset(t, ident), pe.values.at(t)));
    }
  }

  // One thread per output, looping over the reduced dims (adjacent threads, adjacent addresses).
  Dim thread_per_output() {
    const int T = sch_.threads;
    w_.line("const long long o = static_cast<long long>(blockIdx.x) * {} + threadIdx.x;", T);
    w_.line("if (o >= {}) return;", dp_.ref(nout_));
    w_.line("(void)o;");
    w_.line("float acc = {};", init());
    w_.open("for (long long j = 0; j < {}; ++j) {{", Rr_);
    visit();
    w_.close();
    finish();
    return (nout_ + Dim(T - 1)) / Dim(T);
  }

  // Tiles of 32 adjacent outputs (lane tx) by T / 32 rows (ty) of the reduced range, in
  // sch_.splits CTAs per tile (schedule.hpp): rows combine in shared memory, splits through the
  // workspace in split order (deterministic), the last CTA of a tile finishing.
  Dim column_tiles() {
    const int T = sch_.threads, TY = T / 32, S = sch_.splits;
    const Dim tiles = (nout_ + Dim(31)) / Dim(32);
    const std::string nt = dp_.ref(tiles);
    std::string ws, cnt;
    if (S > 1) {
      KernelArg a;
      a.kind = KernelArg::Kind::Scratch;
      a.value = tiles * Dim(int64_t{S} * 32 * 4);
      gp_.add_trailing("float* __restrict__ kc_ws", a);
      a.kind = KernelArg::Kind::Counters;
      a.value = tiles;
      gp_.add_trailing("unsigned* __restrict__ kc_cnt", a);
    }
    w_.line("__shared__ float kiln_part[{}][33];", TY);
    w_.line("const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;");
    w_.line("const long long tile = static_cast<long long>(blockIdx.x) % {};", nt);
    w_.line("const long long split = static_cast<long long>(blockIdx.x) / {};", nt);
    w_.line("const long long o = tile * 32 + tx;");
    w_.line("const bool live = o < {};", dp_.ref(nout_));
    w_.line("(void)split;");
    w_.line("float acc = {};", init());
    const std::string chunk = S > 1 ? std::to_string((R_.value() + S - 1) / S) : std::string(Rr_);
    w_.open("if (live) {{");
    if (S > 1) {
      w_.line("const long long j1 = (split + 1) * {0} < {1} ? (split + 1) * {0} : {1};", chunk,
              Rr_);
      w_.open("for (long long j = split * {} + ty; j < j1; j += {}) {{", chunk, TY);
    } else {
      w_.open("for (long long j = ty; j < {}; j += {}) {{", Rr_, TY);
    }
    visit();
    w_.close();
    w_.close();
    w_.line("kiln_part[ty][tx] = acc;");
    w_.line("__syncthreads();");
    w_.line("if (ty != 0) return;");
    w_.line("for (int y = 1; y < {}; ++y) {}", TY, merge("kiln_part[y][tx]"));
    if (S > 1) {
      w_.line("if (!kiln_split_arrive(kc_ws, kc_cnt, tile, split, {}, {}u, acc, live)) return;", nt,
              S);
      w_.line("acc = {};", init());
      w_.line("if (live) for (int z = 0; z < {}; ++z) {}", S,
              merge(fmt::format("kiln_split_partial(kc_ws, tile, z, {})", nt)));
    }
    w_.open("if (live) {{");
    finish();
    w_.close();
    return tiles * Dim(S);
  }

  Dim warp_per_output() {
    w_.line("const long long o = static_cast<long long>(blockIdx.x) * {} + (threadIdx.x >> 5);",
            sch_.outputs_per_cta);
    w_.line("if (o >= {}) return;", dp_.ref(nout_));
    w_.line("(void)o;");
    w_.line("const int lane = threadIdx.x & 31;");
    w_.line("float acc = {};", init());
    w_.open("for (long long j = lane; j < {}; j += 32) {{", Rr_);
    visit();
    w_.close();
    w_.line("acc = kiln_warp_{}(acc);", opn());
    w_.open("if (lane == 0) {{");
    finish();
    w_.close();
    return (nout_ + Dim(sch_.outputs_per_cta - 1)) / Dim(sch_.outputs_per_cta);
  }

  Dim cta_per_output() {
    const int T = sch_.threads;
    w_.line("__shared__ float kiln_red[33];");
    w_.line("const long long o = blockIdx.x;");
    w_.line("(void)o;");
    w_.line("float acc = {};", init());
    w_.open("for (long long j = threadIdx.x; j < {}; j += {}) {{", Rr_, T);
    visit();
    w_.close();
    w_.line("acc = kiln_block_{}<{}>(acc, kiln_red);", opn(), T);
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
  const TensorDesc& od_;
  const int r_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  ReduceKind kind_ = ReduceKind::Sum;
  bool keep_ = true;
  std::vector<int> red_dims_, kept_dims_, prologue_, epilogue_;
  Shape red_shape_, kept_shape_;
  Dim R_, nout_;
  ReduceSchedule sch_;
  std::string Rr_;
  std::vector<std::string> kept_c_;
};

}  // namespace

KernelSpec emit_reduction(const EmitContext& cx, const FusionGroup& grp) {
  KILN_ASSERT(grp.anchor >= 0, "reduction group {} without anchor", grp.id);
  const OpKind op = cx.graph.nodes()[grp.anchor].op;
  if (op == OpKind::ArgMax || op == OpKind::ArgMin) return emit_arg_reduction(cx, grp);
  return ReductionKernel(cx, grp).emit();
}

}  // namespace kiln
