// Batchnorm folding into conv2d / matmul weights (engine/passes/passes.hpp).
#include <fmt/format.h>

#include <cmath>

#include "engine/base/check.hpp"
#include "engine/ir/graph_queries.hpp"
#include "engine/passes/graph_edit.hpp"
#include "engine/passes/passes.hpp"

namespace kiln {
namespace {

// Folds batchnorm node `bi` if it can; true when the graph changed.
bool try_fold(Graph& g, int bi) {
  const Node& bn = g.nodes()[bi];
  if (bn.op != OpKind::Batchnorm) return false;
  int xt = bn.inputs[0];
  int pi = g.tensor(xt).producer;
  if (pi < 0 || g.tensor(xt).role != TensorRole::Intermediate) return false;
  const Node& c = g.nodes()[pi];
  if (c.op != OpKind::Conv2d && c.op != OpKind::Matmul) return false;
  bool conv = c.op == OpKind::Conv2d;
  // Nothing but the batchnorm may read the contraction's output.
  for (int o : g.outputs())
    if (o == xt) return false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (static_cast<int>(i) == bi) continue;
    for (int t : g.nodes()[i].inputs)
      if (t == xt) return false;
  }
  int wt = c.inputs[1];
  int bt = c.inputs.size() > 2 ? c.inputs[2] : -1;
  if (!has_constant_data(g, wt) || (bt >= 0 && !has_constant_data(g, bt))) return false;
  for (size_t i = 1; i < 5; ++i)
    if (!has_constant_data(g, bn.inputs[i])) return false;
  const TensorDesc& wd = g.tensor(wt).desc;
  bool tb = false;
  if (!conv) {
    // The batchnorm channel (dim 1) must be the matmul's N: a 2-D output and a 2-D weight.
    if (g.tensor(xt).desc.rank() != 2 || wd.rank() != 2) return false;
    tb = c.attr_int("transpose_b") != 0;
  }
  const TensorDesc& yd = g.tensor(xt).desc;
  int64_t channels = yd.shape[1].value();
  std::vector<double> gamma = g.tensor(bn.inputs[1]).data->to_f64();
  std::vector<double> beta = g.tensor(bn.inputs[2]).data->to_f64();
  std::vector<double> mean = g.tensor(bn.inputs[3]).data->to_f64();
  std::vector<double> var = g.tensor(bn.inputs[4]).data->to_f64();
  double eps = bn.attr_float("eps");
  std::vector<double> f(channels);
  for (int64_t k = 0; k < channels; ++k) f[k] = gamma[k] / std::sqrt(var[k] + eps);

  // W' in logical row-major order: conv [K, C/g, R, S] scales dim 0; matmul [K, N] scales the
  // last dim ([N, K] with transpose_b: dim 0).
  // Constants hold row-major data (Graph::constant): scale in place on a copy, element by element
  // through f64 (no f64 copy of the whole weight: ResNet-50 folds 25 M of them per Engine build).
  HostTensor wnew = *g.tensor(wt).data;
  KILN_ASSERT(wnew.is_row_major(), "constant '{}' is not row-major", g.tensor(wt).name);
  int64_t inner = 1;
  for (size_t i = 1; i < wnew.shape.size(); ++i) inner *= wnew.shape[i];
  const int64_t rows = wnew.shape.empty() ? 1 : wnew.shape[0];
  const size_t es = dtype_size(wnew.dtype);
  std::byte* wp = wnew.data.data();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < inner; ++j) {
      // conv [K, C/g, R, S] / transposed matmul [N, K]: dim 0; matmul [K, N]: the last dim.
      const double s = (conv || tb) ? f[r] : f[j];
      std::byte* e = wp + static_cast<size_t>(r * inner + j) * es;
      store_element(wnew.dtype, e, load_element(wnew.dtype, e) * s);
    }
  std::vector<double> b(channels, 0.0);
  if (bt >= 0) b = g.tensor(bt).data->to_f64();
  for (int64_t k = 0; k < channels; ++k) b[k] = (b[k] - mean[k]) * f[k] + beta[k];

  DType bdt = bt >= 0 ? g.tensor(bt).desc.dtype : wd.dtype;
  Tensor nw = g.constant(fresh_name(g, g.tensor(wt).name + "_bnfold"), wd, std::move(wnew));
  TensorDesc bd{bdt, {Dim(channels)}, Layout::NCHW, {}};
  Tensor nb = g.constant(fresh_name(g, c.name + "_bnfold_bias"), bd,
                         HostTensor::from_f64(bdt, {channels}, b));
  std::vector<Node>& nodes = g.mutable_nodes();
  Node& cn = nodes[pi];
  int yt = nodes[bi].outputs[0];
  cn.inputs[1] = nw.id;
  if (cn.inputs.size() > 2)
    cn.inputs[2] = nb.id;
  else
    cn.inputs.push_back(nb.id);
  cn.outputs[0] = yt;
  std::vector<TensorInfo>& ts = g.mutable_tensors();
  ts[yt].producer = pi;
  ts[xt].producer = -1;
  // The batchnorm now reads nothing live; prune drops it and the old conv output.
  nodes[bi].inputs[0] = nw.id;
  nodes[bi].outputs.clear();
  g.prune();
  return true;
}

// The conv2d that alone reads batchnorm node `bi`'s output, as its input, with constant weights
// (and bias), one group and no padding, or -1: a padded tap reads 0, not the batchnorm of 0.
int conv_reading(const Graph& g, int bi) {
  const Node& bn = g.nodes()[bi];
  if (bn.op != OpKind::Batchnorm || bn.outputs.empty()) return -1;
  const int yt = bn.outputs[0];
  for (int o : g.outputs())
    if (o == yt) return -1;
  int ci = -1;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (int t : g.nodes()[i].inputs)
      if (t == yt) {
        if (ci >= 0) return -1;
        ci = static_cast<int>(i);
      }
  if (ci < 0) return -1;
  const Node& c = g.nodes()[ci];
  if (c.op != OpKind::Conv2d || c.inputs[0] != yt || c.inputs[1] == yt) return -1;
  if (c.attr_int("groups") != 1) return -1;
  for (int64_t p : c.attr_ints("padding"))
    if (p != 0) return -1;
  if (!has_constant_data(g, c.inputs[1]) ||
      (c.inputs.size() > 2 && !has_constant_data(g, c.inputs[2])))
    return -1;
  for (size_t i = 1; i < 5; ++i)
    if (!has_constant_data(g, bn.inputs[i])) return -1;
  return ci;
}

// Folds batchnorm node `bi` into the conv after it if it can (MaxViT's and pre-activation
// blocks' norm before a 1x1 conv): with f = gamma / sqrt(var + eps) and t = beta - mean f over
// the input channels c, W'[k, c, r, s] = W[k, c, r, s] f[c] and b'[k] = b[k] + sum W[k, c, r, s]
// t[c]; the conv reads the batchnorm's input. True when the graph changed.
bool try_fold_before(Graph& g, int bi) {
  const int ci = conv_reading(g, bi);
  if (ci < 0) return false;
  const Node& bn = g.nodes()[bi];
  const Node& c = g.nodes()[ci];
  const int wt = c.inputs[1];
  const int bt = c.inputs.size() > 2 ? c.inputs[2] : -1;
  std::vector<double> gamma = g.tensor(bn.inputs[1]).data->to_f64();
  std::vector<double> beta = g.tensor(bn.inputs[2]).data->to_f64();
  std::vector<double> mean = g.tensor(bn.inputs[3]).data->to_f64();
  std::vector<double> var = g.tensor(bn.inputs[4]).data->to_f64();
  const double eps = bn.attr_float("eps");
  HostTensor wnew = *g.tensor(wt).data;
  KILN_ASSERT(wnew.is_row_major() && wnew.rank() == 4, "constant '{}' is not a row-major filter",
              g.tensor(wt).name);
  const int64_t k_out = wnew.shape[0], cin = wnew.shape[1], taps = wnew.shape[2] * wnew.shape[3];
  KILN_ASSERT(static_cast<int64_t>(gamma.size()) == cin,
              "batchnorm '{}' of {} channels before a "
              "conv of {}",
              bn.name, gamma.size(), cin);
  std::vector<double> b(static_cast<size_t>(k_out), 0.0);
  if (bt >= 0) b = g.tensor(bt).data->to_f64();
  const size_t es = dtype_size(wnew.dtype);
  std::byte* wp = wnew.data.data();
  for (int64_t k = 0; k < k_out; ++k)
    for (int64_t ch = 0; ch < cin; ++ch) {
      const double f = gamma[ch] / std::sqrt(var[ch] + eps), t = beta[ch] - mean[ch] * f;
      for (int64_t r = 0; r < taps; ++r) {
        std::byte* e = wp + static_cast<size_t>((k * cin + ch) * taps + r) * es;
        const double w = load_element(wnew.dtype, e);
        b[k] += w * t;
        store_element(wnew.dtype, e, w * f);
      }
    }
  const TensorDesc wd = g.tensor(wt).desc;
  const DType bdt = bt >= 0 ? g.tensor(bt).desc.dtype : wd.dtype;
  Tensor nw = g.constant(fresh_name(g, g.tensor(wt).name + "_bnfold"), wd, std::move(wnew));
  Tensor nb = g.constant(fresh_name(g, c.name + "_bnfold_bias"),
                         TensorDesc{bdt, {Dim(k_out)}, Layout::NCHW, {}},
                         HostTensor::from_f64(bdt, {k_out}, b));
  Node& cn = g.mutable_nodes()[ci];
  cn.inputs[0] = g.nodes()[bi].inputs[0];
  cn.inputs[1] = nw.id;
  if (cn.inputs.size() > 2)
    cn.inputs[2] = nb.id;
  else
    cn.inputs.push_back(nb.id);
  g.prune();  // the batchnorm, read by nothing now
  return true;
}

}  // namespace

int fold_batchnorm(Graph& g) {
  int folded = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (try_fold(g, static_cast<int>(i)) || try_fold_before(g, static_cast<int>(i))) {
        ++folded;
        changed = true;
        break;
      }
    }
  }
  return folded;
}

bool has_batchnorm_next_to_contraction(const Graph& g) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != OpKind::Batchnorm || n.inputs.empty()) continue;
    int p = g.tensor(n.inputs[0]).producer;
    if (p >= 0 && (g.nodes()[p].op == OpKind::Conv2d || g.nodes()[p].op == OpKind::Matmul))
      return true;
    if (conv_reading(g, static_cast<int>(i)) >= 0) return true;
  }
  return false;
}

}  // namespace kiln
