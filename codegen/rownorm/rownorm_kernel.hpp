// The row-norm kernel of one group (codegen/emit_rownorm.cpp): layernorm / rmsnorm / softmax /
// log_softmax
// over the group's rows, with its elementwise prologue (applied on load) and epilogue (applied
// on store). The layout (registers or looped passes, a warp or a CTA per row, vectors) is
// heuristics' RowSchedule; rownorm_kernel.cpp has what both forms share, registers.cpp the
// register-resident form and looped.cpp the looped one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

class RowNormKernel {
 public:
  RowNormKernel(const EmitContext& cx, const FusionGroup& grp);
  KernelSpec emit();

 private:
  // ---- shared by both forms (rownorm_kernel.cpp)
  // Coordinates of element j of the current row.
  std::vector<std::string> coords_of(const std::string& j);
  // The ElementLoader key of tensor t read at the iteration's own coordinates.
  std::string identity_key(int t) const;
  ElementLoader make_loader(const std::string& j, const std::map<std::string, std::string>& pre);
  std::string out_offset(ElementLoader& ld, int t);
  bool is_out(int t) const;
  bool from_prologue(int t) const;
  // Full-shape group inputs read by `nodes`.
  std::vector<int> inputs_of(const std::vector<int>& nodes) const;
  // The prologue for one element; returns the f32 value of the anchor's input. Extra outputs
  // among prologue tensors are stored when `store`. The values land in pro_vals_.
  std::string emit_prologue(ElementLoader& ld, bool store);
  // The anchor's output for one element from its input value x (softmax: x = exp(x - max);
  // log_softmax: x itself).
  std::string anchor_value(ElementLoader& ld, const std::string& x);
  // The epilogue and the stores of the anchor/epilogue outputs; outputs in `vector_outs` go to
  // the per-thread arrays o<t>[l] instead.
  void emit_epilogue(ElementLoader& ld, const std::string& y, const std::vector<int>& vector_outs,
                     std::map<int, std::string> seed);
  // A warp or block reduction of `v`; each block reduction gets its own scratch slice (32 floats
  // per reduced value, `width` values: Welford 3, max+sum pairs 2), so one barrier each.
  std::string reduce(const char* op, const std::string& v, int width = 1);
  // The row index and thread id, the statistics' variables.
  void preamble();

  // ---- the register-resident form (registers.cpp)
  void registers();
  std::string vec_ptr(int t) const;
  // 16-byte loads of `ts` into a<t>[V]; the loader keys that read them.
  std::map<std::string, std::string> load_vectors(const std::vector<int>& ts);
  void load_row();
  // A loop over the thread's register slots (k, l) with `valid` defined, running `body`.
  void regs_loop(const std::string& body);
  void layernorm_statistics();
  void rmsnorm_statistics();
  void softmax_statistics();
  void normalize_and_store();

  // ---- the looped form (looped.cpp)
  void looped();

  const Graph& g_;
  const FusionGroup& grp_;
  const Node& A_;
  const TensorDesc& xd_;
  const Shape X_;
  const int r_;
  const int in_t_, out_t_;
  // softmax or log_softmax: statistics over one axis, a (max, sum of exp) pair.
  const bool softmax_family_, log_softmax_;
  std::vector<int> inner_, outer_;  // normalized and outer dims
  Shape inner_shape_, outer_shape_;
  Dim L_, rows_;
  std::vector<int> prologue_, epilogue_;
  // Fused gathers (embedding lookups read by the prologue) and their error word parameters.
  std::vector<int> gathers_;
  std::vector<std::string> gather_errors_;
  Shape rm_;  // row-major strides of X
  // Inner dims trailing and every full-shape tensor's rows contiguous: row-major, or a strided
  // view whose rows are dense and 16-byte aligned (strided_rows_: Swin V2's q and k read in
  // place from the QKV projection, an unpadding slice read by the layernorm after it).
  bool contiguous_ = true;
  std::vector<int> strided_rows_;
  // Whether tensor desc `d` (of X's shape) has dense rows at 16-byte aligned row starts.
  bool rows_dense(const TensorDesc& d) const;
  // Declares rb<t>, the row's first element in each tensor of strided_rows_.
  void row_bases();
  RowSchedule sch_;
  int V_ = 1, T_ = 256, TT_ = 256;  // vector, threads per CTA, threads per row
  GroupParams gp_;
  DimParams& dp_;
  std::string Lr_;  // the row length as the kernel sees it
  std::string eps_;
  const char* expf_name_;
  Writer w_;
  std::map<int, std::string> pro_vals_;      // the last emitted prologue's values
  std::map<size_t, std::string> param_pre_;  // anchor parameters already loaded (vector path)
  int red_used_ = 0;                         // block reduction scratch handed out
};

}  // namespace kiln
