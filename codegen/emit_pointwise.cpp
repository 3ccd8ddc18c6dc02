// Pointwise groups: an elementwise DAG (broadcast operands allowed) over one iteration shape,
// possibly with several outputs. Each thread handles U 16-byte vectors of the widest densely
// indexed tensor (dense = same shape and strides as the first output: read/written by linear
// index), the U vectors a CTA-width apart so every warp access is 512 contiguous bytes; all
// loads are issued before any math. Broadcast operands contiguous along the innermost dim (a
// bias) are loaded as vectors too; others are indexed through their own strides from the
// element's coordinates. Dense tensors take plain coherent 16-byte loads and stores (the
// schedule rule, see heuristics/schedule.cpp), broadcast operands the read-only path. The last
// partial CTA chunk takes a scalar path (omitted when the static element count is a multiple of
// the chunk), so any size and alignment of the element count works; the grid covers the tensor
// once (no grid-stride loop). Index math is 32-bit when the static element count allows it.
#include <algorithm>

#include "codegen/emit.hpp"
#include "codegen/pointwise_expr.hpp"
#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "heuristics/schedule.hpp"

namespace kiln {
namespace {

std::string map_key(int t, const std::vector<int>& map) {
  std::string k = fmt::format("{}", t);
  for (int m : map) k += fmt::format(",{}", m);
  return k;
}

// A broadcast operand contiguous along the innermost memory dim of the iteration (a bias over
// the last dim, a per-channel parameter in NHWC): within one V-aligned vector only that
// coordinate moves, so the V values are V consecutive elements (one 16-byte load).
struct BcastVec {
  int t;
  std::vector<int> map;
  std::string key;
};

class PointwiseKernel {
 public:
  PointwiseKernel(const EmitContext& cx, const FusionGroup& grp)
      : g_(cx.graph), grp_(grp), gp_(cx.graph, grp), dp_(gp_.dims) {
    const TensorDesc& out0 = g_.tensor(grp.outputs[0]).desc;
    iter_ = out0.shape;
    dense_ = iteration_strides(out0);
    for (size_t i = 0; i < iter_.size(); ++i) identity_.push_back(static_cast<int>(i));
    classify_tensors();
    PointwiseSchedule sch = choose_pointwise(max_bytes_, cx.opts.sm, cx.opts.schedule);
    V_ = sch.vec;
    T_ = sch.threads;
    U_ = sch.vecs;
    chunk_ = int64_t{V_} * T_ * U_;
    numel_ = shape_numel(iter_);
    const bool small = numel_.is_static() && numel_.value() + chunk_ < (int64_t{1} << 31);
    idx_ = small ? "int" : "long long";
    exact_ = numel_.is_static() && numel_.value() % chunk_ == 0;
    find_broadcast_vectors();
  }

  KernelSpec emit() {
    w_.line("const {0} n = {1};", idx_, dp_.ref(numel_));
    w_.line("(void)n;");
    w_.line("const {0} blk = static_cast<{0}>(blockIdx.x) * {1};", idx_, chunk_);
    if (V_ > 1) vector_chunk();
    if (!exact_ || V_ == 1) scalar_tail();
    GroupKernel k;
    k.name = group_kernel_name(g_, grp_, "");
    k.heading = fmt::format("// group {}: {}\n", grp_.id, grp_.name);
    k.threads = T_;
    k.grid = (numel_ + Dim(chunk_ - 1)) / Dim(chunk_);
    return group_kernel_spec(k, gp_, w_.str());
  }

 private:
  bool is_dense(int t) const {
    const TensorDesc& d = g_.tensor(t).desc;
    return d.shape == iter_ && tensor_strides(d) == dense_;
  }

  void classify_tensors() {
    for (int t : grp_.inputs)
      if (is_dense(t)) {
        dense_in_.push_back(t);
        max_bytes_ = std::max<int>(max_bytes_, dtype_size(g_.tensor(t).desc.dtype));
      }
    for (int t : grp_.outputs) {
      if (is_dense(t)) {
        dense_out_.push_back(t);
        max_bytes_ = std::max<int>(max_bytes_, dtype_size(g_.tensor(t).desc.dtype));
      } else {
        other_out_.push_back(t);
        max_bytes_ = std::max<int>(max_bytes_, dtype_size(g_.tensor(t).desc.dtype));
      }
    }
  }

  // Whether operand `t` read through `map` is one 16-byte vector per V-aligned lane group.
  bool vector_broadcast(int t, const std::vector<int>& map, int d_in) const {
    const TensorDesc& d = g_.tensor(t).desc;
    Shape st = tensor_strides(d);
    int od = map[d_in];
    bool ok = od >= 0 && st[od].is_static() && st[od].value() == 1 && d.shape[od].is_static() &&
              d.shape[od].value() == iter_[d_in].value();
    for (size_t i = 0; ok && i < map.size(); ++i) {
      if (static_cast<int>(i) == d_in || map[i] < 0) continue;
      const Dim& sz = d.shape[map[i]];
      if (sz.is_static() && sz.value() == 1) continue;
      ok = st[map[i]].is_static() && st[map[i]].value() % V_ == 0;
    }
    return ok;
  }

  void find_broadcast_vectors() {
    int d_in = -1;
    for (size_t i = 0; i < iter_.size(); ++i)
      if (dense_[i].is_static() && dense_[i].value() == 1 && iter_[i].is_static() &&
          iter_[i].value() > 1)
        d_in = static_cast<int>(i);
    if (V_ <= 1 || d_in < 0 || iter_[d_in].value() % V_ != 0) return;
    // Outputs in the same case (a concat input in its place: the innermost dim contiguous, the
    // other strides whole vectors) store one 16-byte vector per lane group too.
    for (int t : other_out_)
      if (vec_elems(g_.tensor(t).desc.dtype) == V_ && vector_broadcast(t, identity_, d_in))
        vec_out_.push_back(t);
    for (int n : grp_.nodes) {
      const Node& node = g_.nodes()[n];
      for (size_t slot = 0; slot < node.inputs.size(); ++slot) {
        int t = node.inputs[slot];
        if (std::find(grp_.inputs.begin(), grp_.inputs.end(), t) == grp_.inputs.end()) continue;
        if (is_dense(t)) continue;
        std::vector<int> map = operand_dim_map(g_, node, static_cast<int>(slot), iter_);
        std::string key = map_key(t, map);
        bool seen = false;
        for (const auto& b : bvec_) seen |= b.key == key;
        if (vector_broadcast(t, map, d_in) && !seen) bvec_.push_back({t, map, key});
      }
    }
  }

  // The DAG for the element at linear index `lin`; returns every node's value.
  std::map<int, std::string> emit_element(const std::string& lin, const std::string& suffix,
                                          const std::map<std::string, std::string>& preloaded) {
    ElementLoader ld{g_, iter_, dense_, lin, {}, &dp_, suffix, preloaded};
    ld.coords = decompose(lin, iter_, ld.dense, dp_);
    PointwiseEmitter pe{g_, ld.fn(), {}, suffix};
    pe.coords = ld.coords;
    pe.emit(w_, grp_.nodes);
    return pe.values;
  }

  // Stores of the outputs not laid out like the first one, through their own strides (in the
  // vector path, those not stored as vectors).
  void store_other(const std::map<int, std::string>& vals, const std::string& lin,
                   bool vector_path) {
    std::vector<int> ts;
    for (int t : other_out_)
      if (!vector_path || std::find(vec_out_.begin(), vec_out_.end(), t) == vec_out_.end())
        ts.push_back(t);
    if (ts.empty()) return;
    std::vector<std::string> coords = decompose(lin, iter_, dense_, dp_);
    for (int t : ts)
      w_.line("{};",
              store_f32(fmt::format("{} + {}", tensor_param(t),
                                    operand_offset(g_.tensor(t).desc, identity_, coords, dp_)),
                        vals.at(t)));
  }

  // Vector u's loads: the dense inputs and the broadcast vectors.
  void load_vector(int u) {
    const std::string base = fmt::format("base{}", u);
    for (int t : dense_in_) {
      w_.line("{} a{}_{}[{}];", value_ctype(g_.tensor(t).desc.dtype), t, u, V_);
      if (vec_elems(g_.tensor(t).desc.dtype) == V_) {
        w_.line("kiln_ldv_plain({} + {}, a{}_{});", tensor_param(t), base, t, u);
      } else {
        for (int j = 0; j < V_; ++j)
          w_.line("a{0}_{1}[{2}] = kiln_ld({3} + {4} + {2});", t, u, j, tensor_param(t), base);
      }
    }
    if (bvec_.empty()) return;
    std::vector<std::string> coords = decompose(base, iter_, dense_, dp_);
    for (size_t b = 0; b < bvec_.size(); ++b) {
      const BcastVec& bv = bvec_[b];
      std::string ptr = fmt::format("{} + {}", tensor_param(bv.t),
                                    operand_offset(g_.tensor(bv.t).desc, bv.map, coords, dp_));
      w_.line("{} b{}_{}[{}];", value_ctype(g_.tensor(bv.t).desc.dtype), b, u, V_);
      if (vec_elems(g_.tensor(bv.t).desc.dtype) == V_)
        w_.line("kiln_ldv({}, b{}_{});", ptr, b, u);
      else
        for (int j = 0; j < V_; ++j) w_.line("b{0}_{1}[{2}] = kiln_ld({3} + {2});", b, u, j, ptr);
    }
  }

  // Vector u's math, lane by lane, and its stores.
  void compute_vector(int u) {
    std::vector<std::map<int, std::string>> lanes;
    for (int j = 0; j < V_; ++j) {
      std::map<std::string, std::string> lane_pre;
      for (int t : dense_in_) lane_pre[map_key(t, identity_)] = fmt::format("a{}_{}[{}]", t, u, j);
      for (size_t b = 0; b < bvec_.size(); ++b)
        lane_pre[bvec_[b].key] = fmt::format("b{}_{}[{}]", b, u, j);
      w_.line("// vector {} lane {}", u, j);
      std::string lin = fmt::format("(base{} + {})", u, j);
      lanes.push_back(emit_element(lin, fmt::format("_{}_{}", u, j), lane_pre));
      store_other(lanes.back(), lin, true);
    }
    for (int t : dense_out_) {
      std::string vals;
      for (int j = 0; j < V_; ++j) vals += (j ? ", " : "") + lanes[j].at(t);
      if (vec_elems(g_.tensor(t).desc.dtype) == V_) {
        w_.line("const float o{}_{}[{}] = {{{}}};", t, u, V_, vals);
        w_.line("kiln_stv({} + base{}, o{}_{});", tensor_param(t), u, t, u);
      } else {
        for (int j = 0; j < V_; ++j)
          w_.line("{};", store_f32(fmt::format("{} + base{} + {}", tensor_param(t), u, j),
                                   lanes[j].at(t)));
      }
    }
    store_vector_outputs(u, lanes);
  }

  // Vector u's strided outputs stored as vectors: V lanes at consecutive addresses.
  void store_vector_outputs(int u, const std::vector<std::map<int, std::string>>& lanes) {
    if (vec_out_.empty()) return;
    std::vector<std::string> coords = decompose(fmt::format("base{}", u), iter_, dense_, dp_);
    for (int t : vec_out_) {
      std::string vals;
      for (int j = 0; j < V_; ++j) vals += (j ? ", " : "") + lanes[j].at(t);
      w_.line("const float o{}_{}[{}] = {{{}}};", t, u, V_, vals);
      w_.line("kiln_stv({} + {}, o{}_{});", tensor_param(t),
              operand_offset(g_.tensor(t).desc, identity_, coords, dp_), t, u);
    }
  }

  // A full CTA chunk: U vectors per thread, every load issued before any math.
  void vector_chunk() {
    if (!exact_) w_.open("if (blk + {} <= n) {{", chunk_);
    if (exact_) w_.open("{{");
    for (int u = 0; u < U_; ++u)
      w_.line("const {} base{} = blk + {} + threadIdx.x * {};", idx_, u, int64_t{u} * T_ * V_, V_);
    for (int u = 0; u < U_; ++u) load_vector(u);
    for (int u = 0; u < U_; ++u) compute_vector(u);
    if (!exact_) w_.line("return;");
    w_.close();
  }

  // The last partial CTA chunk (or every element when V == 1), element by element.
  void scalar_tail() {
    w_.open("for (int u = 0; u < {}; ++u) {{", U_);
    w_.line("const {} base = blk + u * {} + threadIdx.x * {};", idx_, T_ * V_, V_);
    w_.open("for (int j = 0; j < {}; ++j) {{", V_);
    w_.line("const {} i = base + j;", idx_);
    w_.line("if (i >= n) break;");
    auto vals = emit_element("i", "", {});
    for (int t : dense_out_) w_.line("{};", store_f32(tensor_param(t) + " + i", vals.at(t)));
    store_other(vals, "i", false);
    w_.close();
    w_.close();
  }

  const Graph& g_;
  const FusionGroup& grp_;
  GroupParams gp_;
  DimParams& dp_;
  Writer w_;
  Shape iter_, dense_;
  std::vector<int> identity_, dense_in_, dense_out_, other_out_;
  std::vector<BcastVec> bvec_;
  std::vector<int> vec_out_;  // other_out_ stored as vectors in the vector path
  int max_bytes_ = 1;
  int V_ = 1, T_ = 256, U_ = 1;
  int64_t chunk_ = 1;
  Dim numel_;
  const char* idx_ = "int";
  bool exact_ = false;
};

}  // namespace

KernelSpec emit_pointwise(const EmitContext& cx, const FusionGroup& grp) {
  const Graph& g = cx.graph;
  KILN_ASSERT(!grp.nodes.empty() && !grp.outputs.empty(), "empty pointwise group {}", grp.id);
  const Shape& iter = g.tensor(grp.outputs[0]).desc.shape;
  for (int n : grp.nodes) {
    KILN_ASSERT(is_elementwise(g, g.nodes()[n]), "group {}: node {} is not elementwise", grp.id,
                g.nodes()[n].name);
    KILN_ASSERT(g.tensor(g.nodes()[n].outputs[0]).desc.shape == iter,
                "group {}: node {} has another iteration shape", grp.id, g.nodes()[n].name);
  }
  return PointwiseKernel(cx, grp).emit();
}

}  // namespace kiln
