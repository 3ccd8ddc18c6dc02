// RowNorm groups: layernorm / rmsnorm (statistics over the trailing dims from `axis`) and softmax
// (over one axis), with a fused elementwise prologue (applied on load) and epilogue (applied on
// store), and extra outputs for intermediates needed elsewhere.
//
// Schedule (heuristics/schedule.cpp): with a static row length the whole row is held in
// registers (each thread a few 16-byte vectors), one warp per row for rows of <= 1024 elements
// and one CTA per row for longer rows, so the input is read from DRAM exactly once (streaming
// loads/stores: no L1 allocation, evict-first stores). Statistics take one warp/block reduction:
// layernorm merges per-thread (count, mean, centered M2) Welford triples (each two-pass over its
// registers: no cancellation); softmax merges per-thread (max, sum of exp) pairs.
// Symbolic or very long rows use a looped schedule: one CTA per row, several passes over the row
// (the later passes are served from L1/L2).
//
// Rows are contiguous when the normalized dims are the trailing dims and every full-size tensor
// is row-major: then dense tensors use vector loads/stores. Otherwise (softmax over a middle
// axis, NHWC tensors) every element is addressed through its coordinates.
#include <algorithm>
#include <functional>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {

KernelSpec emit_rownorm(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(grp.anchor >= 0, "rownorm group {} without anchor", grp.id);
  const Node& A = g.nodes()[grp.anchor];
  const TensorDesc& xd = g.tensor(A.inputs[0]).desc;
  const Shape X = xd.shape;
  const int r = static_cast<int>(X.size());
  const int in_t = A.inputs[0], out_t = A.outputs[0];

  // Normalized (inner) and outer dims.
  std::vector<int> inner, outer;
  if (A.op == OpKind::Softmax) {
    int64_t ax = A.attr_int("axis");
    if (ax < 0) ax += r;
    for (int d = 0; d < r; ++d) (d == ax ? inner : outer).push_back(d);
  } else {
    int64_t ax = A.attr_int("axis");
    if (ax < 0) ax += r;
    for (int d = 0; d < r; ++d) (d >= ax ? inner : outer).push_back(d);
  }
  Shape inner_shape, outer_shape;
  for (int d : inner) inner_shape.push_back(X[d]);
  for (int d : outer) outer_shape.push_back(X[d]);
  Dim L = shape_numel(inner_shape), rows = shape_numel(outer_shape);

  std::vector<int> prologue, epilogue;
  for (int n : grp.nodes) {
    if (n == grp.anchor) continue;
    (n < grp.anchor ? prologue : epilogue).push_back(n);
  }

  // Contiguous rows: inner dims trailing and every full-shape tensor row-major.
  Shape rm = row_major_strides(X);
  bool contiguous = inner.empty() || inner.front() == r - static_cast<int>(inner.size());
  std::vector<int> full;  // full-shape tensors read or written by linear index
  int max_bytes = 1;
  for (const auto* list : {&grp.inputs, &grp.outputs})
    for (int t : *list) {
      const TensorDesc& d = g.tensor(t).desc;
      if (d.shape != X) continue;
      full.push_back(t);
      max_bytes = std::max<int>(max_bytes, dtype_size(d.dtype));
      if (tensor_strides(d) != rm) contiguous = false;
    }
  int64_t Ls = L.is_static() ? L.value() : -1;
  RowSchedule sch = choose_rownorm(Ls, max_bytes, contiguous, cx.opts.sm, cx.opts.schedule);
  const int V = sch.vec, T = sch.threads;
  const int TT = sch.warp_per_row ? 32 : T;  // threads per row
  const char* ld_fn = sch.stream_hints ? "kiln_ldv_stream" : "kiln_ldv_plain";
  const char* st_fn = sch.stream_hints ? "kiln_stv_stream" : "kiln_stv";

  GroupParams gp(g, grp);
  DimParams& dp = gp.dims;
  const std::string Lr = dp.ref(L);
  std::string detail = fmt::format("r{}", L.is_static() ? std::to_string(L.value()) : "dyn");
  std::string name = group_kernel_name(g, grp, detail);

  Writer w;
  // Coordinates of element j of the current row.
  auto coords_of = [&](const std::string& j) {
    std::vector<std::string> c(r, "0");
    auto oc = decompose("row", outer_shape, row_major_strides(outer_shape), dp);
    auto ic = decompose(j, inner_shape, row_major_strides(inner_shape), dp);
    for (size_t k = 0; k < outer.size(); ++k) c[outer[k]] = oc[k];
    for (size_t k = 0; k < inner.size(); ++k) c[inner[k]] = ic[k];
    return c;
  };
  auto identity_key = [&](int t) {
    std::string k = fmt::format("{}", t);
    for (int i = 0; i < r; ++i) k += fmt::format(",{}", i);
    return k;
  };
  auto make_loader = [&](const std::string& j, const std::map<std::string, std::string>& pre) {
    ElementLoader ld{
        g, X, contiguous ? rm : Shape{}, fmt::format("(row * {} + {})", Lr, j), {}, &dp, "", pre};
    ld.coords = coords_of(j);
    return ld;
  };
  auto out_offset = [&](ElementLoader& ld, int t) {
    std::vector<int> map(r);
    for (int i = 0; i < r; ++i) map[i] = i;
    return ld.offset(t, map);
  };
  auto is_out = [&](int t) {
    return std::find(grp.outputs.begin(), grp.outputs.end(), t) != grp.outputs.end();
  };
  // Emits the prologue for one element; returns the f32 value of the anchor's input. Extra
  // outputs among prologue tensors are stored when `store`.
  std::map<int, std::string> pro_vals;  // the last emitted prologue's values
  auto emit_prologue = [&](ElementLoader& ld, bool store) {
    PointwiseEmitter pe{g, ld.fn(), {}, ""};
    pe.emit(w, prologue);
    pro_vals = pe.values;
    std::string v;
    if (pe.values.count(in_t)) {
      v = pe.values.at(in_t);
    } else {
      auto it = ld.cache.find(identity_key(in_t));
      v = it != ld.cache.end() ? it->second
                               : load_f32(tensor_param(in_t) + " + " + out_offset(ld, in_t));
    }
    if (store)
      for (int n : prologue) {
        int t = g.nodes()[n].outputs[0];
        if (is_out(t))
          w.line("{};", store_f32(tensor_param(t) + " + " + out_offset(ld, t), pe.values.at(t)));
      }
    return v;
  };
  // The anchor's output for one element from its input value x (softmax: x = exp(x - max)).
  std::map<size_t, std::string> param_pre;  // anchor parameters already loaded (vector path)
  auto anchor_value = [&](ElementLoader& ld, const std::string& x) {
    auto param = [&](size_t slot) {
      if (param_pre.count(slot)) return param_pre.at(slot);
      int t = A.inputs[slot];
      std::vector<int> map(r, -1);
      for (size_t k = 0; k < inner.size(); ++k) map[inner[k]] = static_cast<int>(k);
      return load_f32(tensor_param(t) + " + " +
                      operand_offset(g.tensor(t).desc, map, ld.coords, dp));
    };
    std::string y;
    if (A.op == OpKind::Layernorm) {
      y = fmt::format("({} - mean) * rstd", x);
      if (A.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
      if (A.inputs.size() > 2) y = fmt::format("{} + {}", y, param(2));
    } else if (A.op == OpKind::Rmsnorm) {
      y = fmt::format("{} * rstd", x);
      if (A.inputs.size() > 1) y = fmt::format("{} * {}", y, param(1));
    } else {
      y = fmt::format("{} * inv_sum", x);
    }
    return y;
  };
  auto from_prologue = [&](int t) {
    for (int n : prologue)
      if (g.nodes()[n].outputs[0] == t) return true;
    return false;
  };
  // Epilogue and the stores of the anchor/epilogue outputs. Outputs in `vector_outs` go to the
  // per-thread arrays o<t>[l] instead.
  auto emit_epilogue = [&](ElementLoader& ld, const std::string& y,
                           const std::vector<int>& vector_outs, std::map<int, std::string> seed) {
    w.line("const float y = {};", y);
    seed[out_t] = "y";
    PointwiseEmitter pe{g, ld.fn(), seed, ""};
    pe.emit(w, epilogue);
    for (int t : grp.outputs) {
      if (from_prologue(t)) continue;
      if (std::find(vector_outs.begin(), vector_outs.end(), t) != vector_outs.end())
        w.line("o{}[l] = {};", t, pe.values.at(t));
      else
        w.line("{};", store_f32(tensor_param(t) + " + " + out_offset(ld, t), pe.values.at(t)));
    }
  };
  // Each block reduction gets its own scratch slice (32 floats per reduced value): one barrier
  // per reduction. `width`: floats per thread reduced (welford 3, max+sum pairs 2).
  int red_used = 0;
  auto reduce = [&](const char* op, const std::string& v, int width = 1) {
    if (sch.warp_per_row) return fmt::format("kiln_warp_{}({})", op, v);
    KILN_ASSERT(red_used + 32 * width <= 96, "rownorm: block reduction scratch exhausted");
    std::string e = fmt::format("kiln_block_{}_once<{}>({}, kiln_red + {})", op, T, v, red_used);
    red_used += 32 * width;
    return e;
  };
  // Inputs read by a set of nodes.
  auto inputs_of = [&](const std::vector<int>& nodes) {
    std::vector<int> r2;
    for (int t : grp.inputs) {
      bool used = false;
      for (int n : nodes)
        for (int in : g.nodes()[n].inputs) used |= in == t;
      if (used && g.tensor(t).desc.shape == X) r2.push_back(t);
    }
    return r2;
  };
  const std::string eps = A.op == OpKind::Softmax ? "" : cuda_float(A.attr_float("eps"));
  // A 16-bit softmax result: ex2.approx (relative error ~1e-6) instead of the IEEE-exact expf.
  const char* expf_name = g.tensor(out_t).desc.dtype == DType::F32 ? "expf" : "kiln_exp_fast";

  w.line("// group {}: {} over {} (rows of {})", grp.id, op_name(A.op), xd.str(), L.str());
  w.open("extern \"C\" __global__ void __launch_bounds__({}) {}(KILN_PARAMS) {{", T, name);
  if (!sch.warp_per_row) w.line("__shared__ float kiln_red[96];");
  if (sch.warp_per_row) {
    w.line("const long long row = static_cast<long long>(blockIdx.x) * {} + (threadIdx.x >> 5);",
           sch.rows_per_cta);
    w.line("if (row >= {}) return;", dp.ref(rows));
    w.line("const int tid = threadIdx.x & 31;");
  } else {
    w.line("const long long row = blockIdx.x;");
    w.line("const int tid = threadIdx.x;");
  }
  w.line("float mean = 0.0f, rstd = 1.0f, inv_sum = 1.0f, row_max = 0.0f;");
  w.line("(void)mean; (void)rstd; (void)inv_sum; (void)row_max;");

  if (sch.registers) {
    const int K = sch.vecs_per_thread;
    const int64_t nvec = L.value() / V;
    const bool vec = contiguous && V > 1;
    const bool full = int64_t{K} * TT == nvec;
    auto vec_ptr = [&](int t) {
      return fmt::format("{} + row * {} + q * {}", tensor_param(t), Lr, V);
    };
    auto load_vectors = [&](const std::vector<int>& ts) {
      std::map<std::string, std::string> pre;
      if (!vec) return pre;
      for (int t : ts) {
        w.line("float a{}[{}];", t, V);
        if (vec_elems(g.tensor(t).desc.dtype) == V)
          w.line("{}({}, a{});", ld_fn, vec_ptr(t), t);
        else
          for (int l = 0; l < V; ++l) w.line("a{0}[{1}] = kiln_ld({2} + {1});", t, l, vec_ptr(t));
        pre[identity_key(t)] = fmt::format("a{}[l]", t);
      }
      return pre;
    };
    // 1. Load the row (prologue applied) into registers.
    w.line("float x[{}][{}];", K, V);
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < {}; ++k) {{", K);
    w.line("const int q = k * {} + tid;", TT);
    // Threads x vectors covering the row exactly (every slot valid): no bounds checks, so the
    // loads are unpredicated and the per-thread counts are constants.
    if (full)
      w.open("if (true) {{  // the row is covered exactly");
    else
      w.open("if (q < {}) {{", nvec);
    {
      std::vector<int> need = inputs_of(prologue);
      if (std::find(grp.inputs.begin(), grp.inputs.end(), in_t) != grp.inputs.end() &&
          std::find(need.begin(), need.end(), in_t) == need.end())
        need.push_back(in_t);
      auto pre = load_vectors(need);
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < {}; ++l) {{", V);
      w.line("const int j = q * {} + l;", V);
      ElementLoader ld = make_loader("j", pre);
      std::string v = emit_prologue(ld, true);
      w.line("x[k][l] = {};", v);
      w.close();
    }
    w.reopen("} else {");
    w.line("#pragma unroll");
    w.line("for (int l = 0; l < {}; ++l) x[k][l] = {};", V,
           A.op == OpKind::Softmax ? "-KILN_INF" : "0.0f");
    w.close();
    w.close();
    // 2. Statistics from the registers (masked slots hold neutral values).
    auto regs_loop = [&](const std::string& body) {
      w.line("#pragma unroll");
      w.open("for (int k = 0; k < {}; ++k) {{", K);
      if (full)
        w.line("const bool valid = true;");
      else
        w.line("const bool valid = k * {} + tid < {};", TT, nvec);
      w.line("(void)valid;");
      w.line("#pragma unroll");
      w.line("for (int l = 0; l < {}; ++l) {}", V, body);
      w.close();
    };
    w.open("{{");
    if (A.op == OpKind::Layernorm) {
      // One reduction: each thread's (count, mean, centered M2) over its registers (two-pass
      // locally: no cancellation), merged across the row by Chan's formula.
      w.line("float acc = 0.0f, cnt = 0.0f;");
      regs_loop("if (valid) { acc += x[k][l]; cnt += 1.0f; }");
      w.line("kiln_welford st;");
      w.line("st.n = cnt;");
      w.line("st.mean = cnt > 0.0f ? acc / cnt : 0.0f;");
      w.line("acc = 0.0f;");
      regs_loop("{ const float d = x[k][l] - st.mean; if (valid) acc += d * d; }");
      w.line("st.m2 = acc;");
      if (full && (sch.warp_per_row || (T & (T - 1)) == 0)) {
        // Every thread holds K*V elements: equal-count merges, no division or branch.
        KILN_ASSERT(sch.warp_per_row || red_used == 0, "rownorm: welford scratch");
        if (!sch.warp_per_row) red_used += 64;
        w.line("kiln_block_welford_equal<{}>(st.mean, st.m2, {}.0f, {});", TT, K * V,
               sch.warp_per_row ? "nullptr" : "kiln_red");
      } else {
        w.line("st = {};", reduce("welford", "st", 3));
      }
      w.line("mean = st.mean;");
      w.line("rstd = rsqrtf(st.m2 / {}.0f + {});", L.value(), eps);
    } else if (A.op == OpKind::Rmsnorm) {
      w.line("float acc = 0.0f;");
      regs_loop("acc += x[k][l] * x[k][l];");
      w.line("rstd = rsqrtf({} / {}.0f + {});", reduce("sum", "acc"), L.value(), eps);
    } else {
      // One reduction of (max, sum) pairs: each thread exponentiates against its own max, the
      // merge rescales the sums, and the thread's factor exp(m_t - max) / sum goes in inv_sum.
      w.line("float acc = -KILN_INF;");
      regs_loop("acc = fmaxf(acc, x[k][l]);");
      w.line("const float m_t = acc == -KILN_INF ? 0.0f : acc;");
      w.line("float ssum = 0.0f;");
      regs_loop(
          fmt::format("if (valid) {{ x[k][l] = {}(x[k][l] - m_t); ssum += x[k][l]; }}", expf_name));
      w.line("kiln_maxsum ms;");
      w.line("ms.m = acc;");
      w.line("ms.s = ssum;");
      w.line("ms = {};", reduce("maxsum", "ms", 2));
      w.line("row_max = ms.m;");
      w.line("inv_sum = {}(acc - ms.m) / ms.s;", expf_name);
    }
    w.close();
    // 3. Normalize, epilogue, store.
    w.line("#pragma unroll");
    w.open("for (int k = 0; k < {}; ++k) {{", K);
    w.line("const int q = k * {} + tid;", TT);
    if (!full) w.line("if (q >= {}) break;", nvec);
    {
      // Prologue tensors the epilogue reads (a residual): the anchor's input is in registers
      // (not for softmax: they hold exp(x - max)); anything else is recomputed.
      bool recompute = false;
      for (int n : epilogue)
        for (int in : g.nodes()[n].inputs)
          if (from_prologue(in) && (in != in_t || A.op == OpKind::Softmax)) recompute = true;
      std::vector<int> need = inputs_of(epilogue);
      if (recompute)
        for (int t : inputs_of(prologue))
          if (std::find(need.begin(), need.end(), t) == need.end()) need.push_back(t);
      auto pre = load_vectors(need);
      // Scale/bias over the row, contiguous: one 16-byte load per vector instead of V scalar
      // loads (they are L1/L2 hits, but the LSU instructions and address math are not free).
      if (vec)
        for (size_t slot = 1; slot < A.inputs.size(); ++slot) {
          if (A.op == OpKind::Softmax) break;
          const TensorDesc& pd = g.tensor(A.inputs[slot]).desc;
          if (pd.shape != inner_shape || tensor_strides(pd) != row_major_strides(inner_shape) ||
              vec_elems(pd.dtype) != V)
            continue;
          w.line("float pr{}[{}];", slot, V);
          w.line("kiln_ldv({} + q * {}, pr{});", tensor_param(A.inputs[slot]), V, slot);
          param_pre[slot] = fmt::format("pr{}[l]", slot);
        }
      std::vector<int> vouts;
      if (vec)
        for (int t : grp.outputs)
          if (!from_prologue(t) && vec_elems(g.tensor(t).desc.dtype) == V) {
            vouts.push_back(t);
            w.line("float o{}[{}];", t, V);
          }
      w.line("#pragma unroll");
      w.open("for (int l = 0; l < {}; ++l) {{", V);
      w.line("const int j = q * {} + l;", V);
      ElementLoader ld = make_loader("j", pre);
      std::map<int, std::string> seed;
      if (recompute) {
        emit_prologue(ld, false);
        seed = pro_vals;
      } else if (A.op != OpKind::Softmax) {
        seed[in_t] = "x[k][l]";
      }
      emit_epilogue(ld, anchor_value(ld, "x[k][l]"), vouts, seed);
      w.close();
      for (int t : vouts) w.line("{}({}, o{});", st_fn, vec_ptr(t), t);
      param_pre.clear();
    }
    w.close();
  } else {
    // Looped: one CTA per row, passes over the row (prologue recomputed in each pass).
    auto pass = [&](const std::function<void(ElementLoader&, const std::string&)>& body,
                    bool store) {
      w.open("for (long long j = tid; j < {}; j += {}) {{", Lr, T);
      ElementLoader ld = make_loader("j", {});
      std::string v = emit_prologue(ld, store);
      body(ld, v);
      w.close();
    };
    w.open("{{");
    w.line("float acc = {};", A.op == OpKind::Softmax ? "-KILN_INF" : "0.0f");
    if (A.op == OpKind::Layernorm) {
      pass([&](ElementLoader&, const std::string& v) { w.line("acc += {};", v); }, false);
      w.line("mean = {} / static_cast<float>({});", reduce("sum", "acc"), Lr);
      w.line("acc = 0.0f;");
      pass(
          [&](ElementLoader&, const std::string& v) {
            w.line("const float d = {} - mean;", v);
            w.line("acc += d * d;");
          },
          false);
      w.line("rstd = rsqrtf({} / static_cast<float>({}) + {});", reduce("sum", "acc"), Lr, eps);
    } else if (A.op == OpKind::Rmsnorm) {
      pass([&](ElementLoader&, const std::string& v) { w.line("acc += {0} * {0};", v); }, false);
      w.line("rstd = rsqrtf({} / static_cast<float>({}) + {});", reduce("sum", "acc"), Lr, eps);
    } else {
      pass([&](ElementLoader&, const std::string& v) { w.line("acc = fmaxf(acc, {});", v); },
           false);
      w.line("row_max = {};", reduce("max", "acc"));
      w.line("acc = 0.0f;");
      pass([&](ElementLoader&, const std::string& v) { w.line("acc += expf({} - row_max);", v); },
           false);
      w.line("inv_sum = 1.0f / {};", reduce("sum", "acc"));
    }
    w.close();
    pass(
        [&](ElementLoader& ld, const std::string& v) {
          std::string x = v;
          if (A.op == OpKind::Softmax) {
            w.line("const float e = expf({} - row_max);", v);
            x = "e";
          }
          emit_epilogue(ld, anchor_value(ld, x), {}, pro_vals);
        },
        true);
  }
  w.close();

  Dim grid = sch.warp_per_row ? (rows + Dim(sch.rows_per_cta - 1)) / Dim(sch.rows_per_cta) : rows;
  return group_kernel_spec(name, w, gp, T, grid);
}

}  // namespace kiln
