// The register-resident row norm: a static row held in registers, each thread K 16-byte vectors
// (a power-of-two group of a warp's lanes per short row, a CTA per long one), so the input is read
// from DRAM exactly once. Statistics take one shuffle/block reduction: layernorm merges per-thread
// (count, mean, centered M2) Welford triples (each two-pass over its registers: no cancellation);
// softmax and log_softmax merge per-thread (max, sum of exp) pairs.
#include <algorithm>

#include "codegen/rownorm/rownorm_kernel.hpp"
#include "engine/base/check.hpp"

namespace kiln {

std::string RowNormKernel::vec_ptr(int t) const {
  if (std::find(strided_rows_.begin(), strided_rows_.end(), t) != strided_rows_.end())
    return fmt::format("{} + rb{} + q * {}", tensor_param(t), t, V_);
  return fmt::format("{} + row * {} + q * {}", tensor_param(t), Lr_, V_);
}

std::map<std::string, std::string> RowNormKernel::load_vectors(const std::vector<int>& ts) {
  std::map<std::string, std::string> pre;
  if (!(contiguous_ && V_ > 1)) return pre;
  for (int t : ts) {
    w_.line("float a{}[{}];", t, V_);
    if (vec_elems(g_.tensor(t).desc.dtype) == V_)
      w_.line("kiln_ldv_plain({}, a{});", vec_ptr(t), t);
    else
      for (int l = 0; l < V_; ++l) w_.line("a{0}[{1}] = kiln_ld({2} + {1});", t, l, vec_ptr(t));
    pre[identity_key(t)] = fmt::format("a{}[l]", t);
  }
  return pre;
}

void RowNormKernel::registers() {
  load_row();
  w_.open("{{");
  if (A_.op == OpKind::Layernorm)
    layernorm_statistics();
  else if (A_.op == OpKind::Rmsnorm)
    rmsnorm_statistics();
  else
    softmax_statistics();
  w_.close();
  normalize_and_store();
}

// 1. The row (prologue applied) into registers; slots past the row hold neutral values.
void RowNormKernel::load_row() {
  const int K = sch_.vecs_per_thread;
  const int64_t nvec = L_.value() / V_;
  w_.line("float x[{}][{}];", K, V_);
  w_.line("#pragma unroll");
  w_.open("for (int k = 0; k < {}; ++k) {{", K);
  w_.line("const int q = k * {} + tid;", TT_);
  // Threads x vectors covering the row exactly (every slot valid): no bounds checks, so the
  // loads are unpredicated and the per-thread counts are constants.
  if (sch_.exact)
    w_.open("if (true) {{  // the row is covered exactly");
  else
    w_.open("if (q < {}) {{", nvec);
  {
    std::vector<int> need = inputs_of(prologue_);
    if (std::find(grp_.inputs.begin(), grp_.inputs.end(), in_t_) != grp_.inputs.end() &&
        std::find(need.begin(), need.end(), in_t_) == need.end())
      need.push_back(in_t_);
    auto pre = load_vectors(need);
    w_.line("#pragma unroll");
    w_.open("for (int l = 0; l < {}; ++l) {{", V_);
    w_.line("const int j = q * {} + l;", V_);
    ElementLoader ld = make_loader("j", pre);
    std::string v = emit_prologue(ld, true);
    w_.line("x[k][l] = {};", v);
    w_.close();
  }
  w_.reopen("} else {");
  w_.line("#pragma unroll");
  w_.line("for (int l = 0; l < {}; ++l) x[k][l] = {};", V_, softmax_family_ ? "-KILN_INF" : "0.0f");
  w_.close();
  w_.close();
}

void RowNormKernel::regs_loop(const std::string& body) {
  w_.line("#pragma unroll");
  w_.open("for (int k = 0; k < {}; ++k) {{", sch_.vecs_per_thread);
  if (sch_.exact)
    w_.line("const bool valid = true;");
  else
    w_.line("const bool valid = k * {} + tid < {};", TT_, L_.value() / V_);
  w_.line("(void)valid;");
  w_.line("#pragma unroll");
  w_.line("for (int l = 0; l < {}; ++l) {}", V_, body);
  w_.close();
}

// 2. One reduction: each thread's (count, mean, centered M2) over its registers (two-pass
// locally: no cancellation), merged across the row by Chan's formula.
void RowNormKernel::layernorm_statistics() {
  w_.line("float acc = 0.0f, cnt = 0.0f;");
  regs_loop("if (valid) { acc += x[k][l]; cnt += 1.0f; }");
  w_.line("kiln_welford st;");
  w_.line("st.n = cnt;");
  w_.line("st.mean = cnt > 0.0f ? acc / cnt : 0.0f;");
  w_.line("acc = 0.0f;");
  regs_loop("{ const float d = x[k][l] - st.mean; if (valid) acc += d * d; }");
  w_.line("st.m2 = acc;");
  if (sch_.equal_counts) {
    // Every thread holds K*V elements: equal-count merges, no division or branch.
    KILN_ASSERT(sch_.warp_per_row || red_used_ == 0, "rownorm: welford scratch");
    if (!sch_.warp_per_row) red_used_ += 64;
    w_.line("kiln_block_welford_equal<{}>(st.mean, st.m2, {}.0f, {});", TT_,
            sch_.vecs_per_thread * V_, sch_.warp_per_row ? "nullptr" : "kiln_red");
  } else {
    w_.line("st = {};", reduce("welford", "st", 3));
  }
  w_.line("mean = st.mean;");
  w_.line("rstd = rsqrtf(st.m2 / {}.0f + {});", L_.value(), eps_);
}

void RowNormKernel::rmsnorm_statistics() {
  w_.line("float acc = 0.0f;");
  regs_loop("acc += x[k][l] * x[k][l];");
  w_.line("rstd = rsqrtf({} / {}.0f + {});", reduce("sum", "acc"), L_.value(), eps_);
}

// One reduction of (max, sum) pairs: each thread exponentiates against its own max, the merge
// rescales the sums, and the thread's factor exp(m_t - max) / sum goes in inv_sum. log_softmax
// keeps x in the registers and takes log_sum = log(sum) instead.
void RowNormKernel::softmax_statistics() {
  w_.line("float acc = -KILN_INF;");
  regs_loop("acc = fmaxf(acc, x[k][l]);");
  w_.line("const float m_t = acc == -KILN_INF ? 0.0f : acc;");
  w_.line("float ssum = 0.0f;");
  if (log_softmax_)
    regs_loop(fmt::format("if (valid) ssum += {}(x[k][l] - m_t);", expf_name_));
  else
    regs_loop(
        fmt::format("if (valid) {{ x[k][l] = {}(x[k][l] - m_t); ssum += x[k][l]; }}", expf_name_));
  w_.line("kiln_maxsum ms;");
  w_.line("ms.m = acc;");
  w_.line("ms.s = ssum;");
  w_.line("ms = {};", reduce("maxsum", "ms", 2));
  w_.line("row_max = ms.m;");
  if (log_softmax_)
    w_.line("log_sum = logf(ms.s);");
  else
    w_.line("inv_sum = {}(acc - ms.m) / ms.s;", expf_name_);
}

// 3. Normalize, epilogue, store.
void RowNormKernel::normalize_and_store() {
  const bool vec = contiguous_ && V_ > 1;
  w_.line("#pragma unroll");
  w_.open("for (int k = 0; k < {}; ++k) {{", sch_.vecs_per_thread);
  w_.line("const int q = k * {} + tid;", TT_);
  if (!sch_.exact) w_.line("if (q >= {}) break;", L_.value() / V_);
  // Prologue tensors the epilogue reads (a residual): the anchor's input is in registers (not
  // for softmax: they hold exp(x - max)); anything else is recomputed.
  bool recompute = false;
  for (int n : epilogue_)
    for (int in : g_.nodes()[n].inputs)
      if (from_prologue(in) && (in != in_t_ || A_.op == OpKind::Softmax)) recompute = true;
  std::vector<int> need = inputs_of(epilogue_);
  if (recompute)
    for (int t : inputs_of(prologue_))
      if (std::find(need.begin(), need.end(), t) == need.end()) need.push_back(t);
  auto pre = load_vectors(need);
  // Scale/bias over the row, contiguous: one 16-byte load per vector instead of V scalar loads
  // (they are L1/L2 hits, but the LSU instructions and address math are not free).
  if (vec && A_.op != OpKind::Softmax)
    for (size_t slot = 1; slot < A_.inputs.size(); ++slot) {
      const TensorDesc& pd = g_.tensor(A_.inputs[slot]).desc;
      if (pd.shape != inner_shape_ || tensor_strides(pd) != row_major_strides(inner_shape_) ||
          vec_elems(pd.dtype) != V_)
        continue;
      w_.line("float pr{}[{}];", slot, V_);
      w_.line("kiln_ldv({} + q * {}, pr{});", tensor_param(A_.inputs[slot]), V_, slot);
      param_pre_[slot] = fmt::format("pr{}[l]", slot);
    }
  std::vector<int> vouts;
  if (vec)
    for (int t : grp_.outputs)
      if (!from_prologue(t) && vec_elems(g_.tensor(t).desc.dtype) == V_) {
        vouts.push_back(t);
        w_.line("float o{}[{}];", t, V_);
      }
  w_.line("#pragma unroll");
  w_.open("for (int l = 0; l < {}; ++l) {{", V_);
  w_.line("const int j = q * {} + l;", V_);
  ElementLoader ld = make_loader("j", pre);
  std::map<int, std::string> seed;
  if (recompute) {
    emit_prologue(ld, false);
    seed = pro_vals_;
  } else if (A_.op != OpKind::Softmax) {
    seed[in_t_] = "x[k][l]";
  }
  emit_epilogue(ld, anchor_value(ld, "x[k][l]"), vouts, seed);
  w_.close();
  for (int t : vouts) w_.line("kiln_stv({}, o{});", vec_ptr(t), t);
  param_pre_.clear();
  w_.close();
}

}  // namespace kiln
