// What both row-norm forms share: the group's rows, loaders, prologue, anchor math, epilogue and
// reductions (see rownorm_kernel.hpp).
#include "codegen/rownorm/rownorm_kernel.hpp"

#include <algorithm>

#include "codegen/gather_source.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/gather_ops.hpp"
#include "engine/ir/op_table.hpp"

namespace kiln {

RowNormKernel::RowNormKernel(const EmitContext& cx, const FusionGroup& grp)
    : g_(cx.graph),
      grp_(grp),
      A_(g_.nodes()[grp.anchor]),
      xd_(g_.tensor(A_.inputs[0]).desc),
      X_(xd_.shape),
      r_(static_cast<int>(X_.size())),
      in_t_(A_.inputs[0]),
      out_t_(A_.outputs[0]),
      softmax_family_(A_.op == OpKind::Softmax || A_.op == OpKind::LogSoftmax),
      log_softmax_(A_.op == OpKind::LogSoftmax),
      gp_(g_, grp),
      dp_(gp_.dims) {
  int64_t ax = A_.attr_int("axis");
  if (ax < 0) ax += r_;
  for (int d = 0; d < r_; ++d) {
    const bool in = softmax_family_ ? d == ax : d >= ax;
    (in ? inner_ : outer_).push_back(d);
  }
  for (int d : inner_) inner_shape_.push_back(X_[d]);
  for (int d : outer_) outer_shape_.push_back(X_[d]);
  L_ = shape_numel(inner_shape_);
  rows_ = shape_numel(outer_shape_);
  for (int n : grp.nodes) {
    if (n == grp.anchor) continue;
    if (is_index_gather(g_.nodes()[n].op)) {
      // Read through by the prologue's loads; each reports into its own error word (none where
      // its constant indices are all in range).
      gathers_.push_back(n);
      gather_errors_.push_back(fmt::format("{}{}", kErrorWordParam, gathers_.size() - 1));
      if (gather_indices_in_range(g_, g_.nodes()[n])) continue;
      KernelArg err;
      err.kind = KernelArg::Kind::ErrorWord;
      err.tensor = g_.nodes()[n].outputs[0];
      gp_.add_trailing(fmt::format("unsigned int* __restrict__ {}", gather_errors_.back()), err);
      continue;
    }
    (n < grp.anchor ? prologue_ : epilogue_).push_back(n);
  }
  rm_ = row_major_strides(X_);
  contiguous_ = inner_.empty() || inner_.front() == r_ - static_cast<int>(inner_.size());
  int max_bytes = 1;
  for (const auto* list : {&grp.inputs, &grp.outputs})
    for (int t : *list) {
      const TensorDesc& d = g_.tensor(t).desc;
      if (d.shape != X_) continue;
      max_bytes = std::max<int>(max_bytes, dtype_size(d.dtype));
      if (tensor_strides(d) == rm_) continue;
      if (contiguous_ && rows_dense(d))
        strided_rows_.push_back(t);
      else
        contiguous_ = false;
    }
  const int64_t Ls = L_.is_static() ? L_.value() : -1;
  sch_ = choose_rownorm(Ls, max_bytes, contiguous_, cx.opts.sm, cx.opts.schedule);
  V_ = sch_.vec;
  T_ = sch_.threads;
  TT_ = sch_.row_threads;
  eps_ = softmax_family_ ? "" : cuda_float(A_.attr_float("eps"));
  // A 16-bit softmax result: ex2.approx (relative error ~1e-6) instead of the IEEE-exact expf.
  expf_name_ = g_.tensor(out_t_).desc.dtype == DType::F32 ? "expf" : "kiln_exp_fast";
}

KernelSpec RowNormKernel::emit() {
  Lr_ = dp_.ref(L_);
  GroupKernel k;
  k.name = group_kernel_name(
      g_, grp_, fmt::format("r{}", L_.is_static() ? std::to_string(L_.value()) : "dyn"));
  k.heading = fmt::format("// group {}: {} over {} (rows of {})\n", grp_.id, op_name(A_.op),
                          xd_.str(), L_.str());
  k.threads = T_;
  preamble();
  if (sch_.registers)
    registers();
  else
    looped();
  k.grid =
      sch_.warp_per_row ? (rows_ + Dim(sch_.rows_per_cta - 1)) / Dim(sch_.rows_per_cta) : rows_;
  return group_kernel_spec(k, gp_, w_.str());
}

void RowNormKernel::preamble() {
  if (!sch_.warp_per_row) w_.line("__shared__ float kiln_red[96];");
  if (sch_.warp_per_row) {
    // TT_ lanes per row (a power of two up to 32). A row's lanes leave together, so the
    // reductions' shuffles (within TT_ lanes) never read a lane that has returned.
    int shift = 0;
    while ((1 << shift) < TT_) ++shift;
    w_.line("const long long row = static_cast<long long>(blockIdx.x) * {} + (threadIdx.x >> {});",
            sch_.rows_per_cta, shift);
    w_.line("if (row >= {}) return;", dp_.ref(rows_));
    w_.line("const int tid = threadIdx.x & {};", TT_ - 1);
  } else {
    w_.line("const long long row = blockIdx.x;");
    w_.line("const int tid = threadIdx.x;");
  }
  row_bases();
  w_.line("float mean = 0.0f, rstd = 1.0f, inv_sum = 1.0f, row_max = 0.0f;");
  w_.line("(void)mean; (void)rstd; (void)inv_sum; (void)row_max;");
  if (log_softmax_) w_.line("float log_sum = 0.0f;");
}

bool RowNormKernel::rows_dense(const TensorDesc& d) const {
  if (d.layout != Layout::Strided || inner_.empty()) return false;
  const Shape st = tensor_strides(d);
  const Shape inner_rm = row_major_strides(inner_shape_);
  for (size_t k = 0; k < inner_.size(); ++k)
    if (!(st[inner_[k]] == inner_rm[k])) return false;
  for (int o : outer_)
    if (!st[o].is_static() || st[o].value() * dtype_size(d.dtype) % 16 != 0) return false;
  return true;
}

void RowNormKernel::row_bases() {
  if (!contiguous_ || strided_rows_.empty()) return;
  const std::vector<std::string> oc =
      decompose("row", outer_shape_, row_major_strides(outer_shape_), dp_);
  for (int t : strided_rows_) {
    const Shape st = tensor_strides(g_.tensor(t).desc);
    std::string base;
    for (size_t k = 0; k < outer_.size(); ++k) {
      const int64_t s = st[outer_[k]].value();
      if (s == 0 || (outer_shape_[k].is_static() && outer_shape_[k].value() == 1)) continue;
      base += fmt::format("{}static_cast<long long>({}) * {}", base.empty() ? "" : " + ", oc[k], s);
    }
    w_.line("const long long rb{} = {};", t, base.empty() ? "0" : base);
    w_.line("(void)rb{};", t);
  }
}

std::vector<std::string> RowNormKernel::coords_of(const std::string& j) {
  std::vector<std::string> c(r_, "0");
  auto oc = decompose("row", outer_shape_, row_major_strides(outer_shape_), dp_);
  auto ic = decompose(j, inner_shape_, row_major_strides(inner_shape_), dp_);
  for (size_t k = 0; k < outer_.size(); ++k) c[outer_[k]] = oc[k];
  for (size_t k = 0; k < inner_.size(); ++k) c[inner_[k]] = ic[k];
  return c;
}

std::string RowNormKernel::identity_key(int t) const {
  std::string k = fmt::format("{}", t);
  for (int i = 0; i < r_; ++i) k += fmt::format(",{}", i);
  return k;
}

ElementLoader RowNormKernel::make_loader(const std::string& j,
                                         const std::map<std::string, std::string>& pre) {
  ElementLoader ld{
      g_, X_, contiguous_ ? rm_ : Shape{}, fmt::format("(row * {} + {})", Lr_, j), {}, &dp_,
      "", pre};
  ld.coords = coords_of(j);
  ld.gathers = gathers_;
  ld.gather_errors = gather_errors_;
  return ld;
}

std::string RowNormKernel::out_offset(ElementLoader& ld, int t) {
  std::vector<int> map(r_);
  for (int i = 0; i < r_; ++i) map[i] = i;
  return ld.offset(t, map);
}

bool RowNormKernel::is_out(int t) const {
  return std::find(grp_.outputs.begin(), grp_.outputs.end(), t) != grp_.outputs.end();
}

bool RowNormKernel::from_prologue(int t) const {
  for (int n : prologue_)
    if (g_.nodes()[n].outputs[0] == t) return true;
  return false;
}

std::vector<int> RowNormKernel::inputs_of(const std::vector<int>& nodes) const {
  std::vector<int> out;
  for (int t : grp_.inputs) {
    bool used = false;
    for (int n : nodes)
      for (int in : g_.nodes()[n].inputs) used |= in == t;
    if (used && g_.tensor(t).desc.shape == X_) out.push_back(t);
  }
  return out;
}

std::string RowNormKernel::emit_prologue(ElementLoader& ld, bool store) {
  PointwiseEmitter pe{g_, ld.fn(), {}, ""};
  pe.emit(w_, prologue_);
  pro_vals_ = pe.values;
  std::string v;
  if (pe.values.count(in_t_)) {
    v = pe.values.at(in_t_);
  } else {
    auto it = ld.cache.find(identity_key(in_t_));
    v = it != ld.cache.end() ? it->second
                             : load_f32(tensor_param(in_t_) + " + " + out_offset(ld, in_t_));
  }
  if (store)
    for (int n : prologue_) {
      int t = g_.nodes()[n].outputs[0];
      if (is_out(t))
        w_.line("{};", store_f32(tensor_param(t) + " + " + out_offset(ld, t), pe.values.at(t)));
    }
  return v;
}

std::string RowNormKernel::anchor_value(ElementLoader& ld, const std::string& x) {
  auto param = [&](size_t slot) {
    if (param_pre_.count(slot)) return param_pre_.at(slot);
    int t = A_.inputs[slot];
    std::vector<int> map(r_, -1);
    for (size_t k = 0; k < inner_.size(); ++k) map[inner_[k]] = static_cast<int>(k);
    return load_f32(tensor_param(t) + " + " +
                    operand_offset(g_.tensor(t).desc, map, ld.coords, dp_));
  };
  std::string y;
  if (A_.op == OpKind::Layernorm) {
    y = fmt::format("({} - mean) * rstd", x);
    if (A_.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
    if (A_.inputs.size() > 2) y = fmt::format("{} + {}", y, param(2));
  } else if (A_.op == OpKind::Rmsnorm) {
    y = fmt::format("{} * rstd", x);
    if (A_.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
  } else if (log_softmax_) {
    y = fmt::format("({} - row_max) - log_sum", x);
  } else {
    y = fmt::format("{} * inv_sum", x);
  }
  return y;
}

void RowNormKernel::emit_epilogue(ElementLoader& ld, const std::string& y,
                                  const std::vector<int>& vector_outs,
                                  std::map<int, std::string> seed) {
  w_.line("const float y = {};", y);
  seed[out_t_] = "y";
  PointwiseEmitter pe{g_, ld.fn(), seed, ""};
  pe.emit(w_, epilogue_);
  for (int t : grp_.outputs) {
    if (from_prologue(t)) continue;
    if (std::find(vector_outs.begin(), vector_outs.end(), t) != vector_outs.end())
      w_.line("o{}[l] = {};", t, pe.values.at(t));
    else
      w_.line("{};", store_f32(tensor_param(t) + " + " + out_offset(ld, t), pe.values.at(t)));
  }
}

std::string RowNormKernel::reduce(const char* op, const std::string& v, int width) {
  if (sch_.warp_per_row)
    return TT_ == 32 ? fmt::format("kiln_warp_{}({})", op, v)
                     : fmt::format("kiln_warp_{}<{}>({})", op, TT_, v);
  KILN_ASSERT(red_used_ + 32 * width <= 96, "rownorm: block reduction scratch exhausted");
  std::string e = fmt::format("kiln_block_{}_once<{}>({}, kiln_red + {})", op, T_, v, red_used_);
  red_used_ += 32 * width;
  return e;
}

}  // namespace kiln
