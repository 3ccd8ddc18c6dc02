// The fusion planner: partitions the graph into groups, each of which becomes one kernel.
//
// Legality comes from the op table only (each op's FusionRole and category), never op names:
//  - Anchors (Normalization with statistics, Reduction, Window, Contraction, Scan) start a group.
//    Elementwise producers of a non-contraction anchor's main input with that input's shape fuse
//    in as a prologue; elementwise consumers of the anchor output with the output's shape fuse in
//    as an epilogue (their other operands may broadcast).
//  - Remaining elementwise nodes fuse vertically (connected DAGs with one iteration shape) and
//    horizontally (siblings reading a common input with the same shape).
//  - Movement ops are materialized by Copy groups. A copy reads each input element at most once,
//    so private elementwise producers of its input (their results used nowhere else) fuse in as
//    a prologue, computed on the fly where the copy reads them.
//  - Inference batchnorm (category Normalization, but no statistics) is a per-channel affine:
//    its table role is Elementwise, and its per-channel operands (OpInfo::channel_operands)
//    broadcast along dim 1 wherever it fuses.
// Every tentative fusion is checked to keep the group graph acyclic (engine/planner/group_order.hpp
// keeps that check local); a tensor produced inside a group and needed outside it (or a graph
// output) is written as an extra group output.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine/base/check.hpp"
#include "engine/ir/op_table.hpp"
#include "engine/passes/passes.hpp"
#include "engine/passes/strided_views.hpp"
#include "engine/planner/attention_pattern.hpp"
#include "engine/planner/group_order.hpp"
#include "engine/planner/plan.hpp"

namespace kiln {

const char* group_kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::Pointwise:
      return "pointwise";
    case GroupKind::RowNorm:
      return "rownorm";
    case GroupKind::ChannelNorm:
      return "channelnorm";
    case GroupKind::Reduction:
      return "reduction";
    case GroupKind::Window:
      return "window";
    case GroupKind::Contraction:
      return "contraction";
    case GroupKind::Copy:
      return "copy";
    case GroupKind::View:
      return "view";
    case GroupKind::Attention:
      return "attention";
    case GroupKind::Scan:
      return "scan";
    case GroupKind::AttentionVarlen:
      return "attention_varlen";
  }
  return "?";
}

namespace {

OpCategory cat(const Node& n) {
  return op_info(n.op).category;
}
FusionRole role(const Node& n) {
  return op_info(n.op).role;
}
bool elementwise(const Node& n) {
  return role(n) == FusionRole::Elementwise;
}
bool is_anchor(const Node& n) {
  FusionRole r = role(n);
  return r == FusionRole::Anchor || r == FusionRole::RowStatistics ||
         r == FusionRole::ChannelStatistics;
}

GroupKind anchor_kind(const Node& n) {
  switch (role(n)) {
    case FusionRole::RowStatistics:
      return GroupKind::RowNorm;
    case FusionRole::ChannelStatistics:
      return GroupKind::ChannelNorm;
    case FusionRole::Anchor:
      break;
    default:
      return GroupKind::Pointwise;
  }
  switch (cat(n)) {
    case OpCategory::Contraction:
      return GroupKind::Contraction;
    case OpCategory::Reduction:
      return GroupKind::Reduction;
    case OpCategory::Window:
      return GroupKind::Window;
    case OpCategory::Scan:
      return GroupKind::Scan;
    case OpCategory::Attention:
      return GroupKind::AttentionVarlen;
    default:
      return GroupKind::Pointwise;
  }
}

class Planner {
 public:
  Planner(const Graph& g, const PlanOptions& o) : g_(g), opts_(o) {}

  Plan run() {
    const auto& nodes = g_.nodes();
    int nn = static_cast<int>(nodes.size());
    group_of_.assign(nn, -1);
    consumers_.assign(g_.tensors().size(), {});
    for (int i = 0; i < nn; ++i)
      for (int t : nodes[i].inputs) consumers_[t].push_back(i);
    for (int t : g_.outputs()) is_output_.insert(t);
    compute_live();
    order_ = std::make_unique<GroupOrder>(
        2 * nn,
        [this](int v, bool fwd, const std::function<void(int)>& f) { neighbours(v, fwd, f); },
        [this] { return vertices(); },
        [this](int v) {
          return v < node_count() ? size_t{1} : groups_[v - node_count()].nodes.size();
        });

    if (!opts_.fusion) {
      for (int i = 0; i < nn; ++i)
        if (live_[i]) new_group(i, kind_of(i), is_anchor(nodes[i]) ? i : -1);
    } else {
      // 0. Attention chains: two contractions around a softmax, one kernel.
      if (opts_.fused_attention && opts_.sm >= 80)
        for (int i = 0; i < nn; ++i)
          if (live_[i] && group_of_[i] < 0) claim_attention(i);
      // 1. Anchors with prologues and epilogues, in topological order.
      for (int i = 0; i < nn; ++i)
        if (live_[i] && group_of_[i] < 0 && is_anchor(nodes[i])) {
          if (anchor_kind(nodes[i]) == GroupKind::AttentionVarlen) {
            claim_varlen_attention(i);
            continue;
          }
          int gid = new_group(i, anchor_kind(nodes[i]), i);
          if (anchor_kind(nodes[i]) != GroupKind::Contraction) claim_prologue(gid, i);
          claim_epilogue(gid, i);
        }
      // 2. Movement ops with their prologues (after the anchors: an anchor's epilogue comes free);
      // views take no kernel and nothing fuses into them.
      for (int i = 0; i < nn; ++i)
        if (live_[i] && group_of_[i] < 0 && cat(nodes[i]) == OpCategory::Movement) {
          if (is_view_node(g_, nodes[i])) {
            new_group(i, GroupKind::View, -1);
            const char* how = nodes[i].op == OpKind::Concat
                                  ? "its inputs were stored in their places"
                                  : "reads its input's memory in place";
            groups_.back().notes.push_back(
                fmt::format("view: {} ({}) {}, no kernel", nm(i), op_name(nodes[i].op), how));
          } else {
            // A copy of several inputs (concat) reads each through its own range: no prologue.
            const int gid = new_group(i, GroupKind::Copy, -1);
            if (nodes[i].inputs.size() == 1) claim_prologue(gid, i);
          }
        }
      // 3. Remaining elementwise nodes: vertical, then horizontal fusion.
      for (int i = 0; i < nn; ++i)
        if (live_[i] && group_of_[i] < 0 && elementwise(nodes[i])) place_pointwise(i);
      // 4. Anything left (nothing today: every node is an anchor, elementwise or movement).
      for (int i = 0; i < nn; ++i)
        if (live_[i] && group_of_[i] < 0) new_group(i, kind_of(i), -1);
    }
    return finish();
  }

 private:
  struct G {
    GroupKind kind;
    int anchor;
    std::set<int> nodes;
    bool dead = false;
    std::vector<std::string> notes;           // fusion decisions recorded while planning
    std::optional<AttentionChain> attention;  // Attention groups: the matched chain
  };

  GroupKind kind_of(int i) const {
    const Node& n = g_.nodes()[i];
    if (is_anchor(n)) return anchor_kind(n);
    if (elementwise(n)) return GroupKind::Pointwise;
    return is_view_node(g_, n) ? GroupKind::View : GroupKind::Copy;
  }

  void compute_live() {
    const auto& nodes = g_.nodes();
    live_.assign(nodes.size(), false);
    std::vector<int> stack(g_.outputs().begin(), g_.outputs().end());
    std::vector<bool> seen(g_.tensors().size(), false);
    while (!stack.empty()) {
      int t = stack.back();
      stack.pop_back();
      if (seen[t]) continue;
      seen[t] = true;
      int p = g_.tensor(t).producer;
      if (p < 0 || live_[p]) continue;
      live_[p] = true;
      for (int in : nodes[p].inputs) stack.push_back(in);
    }
  }

  int new_group(int node, GroupKind kind, int anchor) {
    G grp;
    grp.kind = kind;
    grp.anchor = anchor;
    grp.nodes.insert(node);
    groups_.push_back(std::move(grp));
    int gid = static_cast<int>(groups_.size()) - 1;
    group_of_[node] = gid;
    if (order_) order_->rename(node, node_count() + gid);
    return gid;
  }

  // The group graph for GroupOrder: vertex node_count() + g is group g, vertex n < node_count() a
  // live node not placed yet.
  int node_count() const { return static_cast<int>(g_.nodes().size()); }
  int vertex_of(int node) const {
    return group_of_[node] >= 0 ? node_count() + group_of_[node] : node;
  }
  std::vector<int> vertices() const {
    std::vector<int> vs;
    std::vector<bool> in(2 * static_cast<size_t>(node_count()), false);
    for (int n = 0; n < node_count(); ++n)
      if (live_[n] && !in[vertex_of(n)]) {
        in[vertex_of(n)] = true;
        vs.push_back(vertex_of(n));
      }
    return vs;
  }
  void neighbours(int v, bool forward, const std::function<void(int)>& visit) const {
    auto one = [&](int n) {
      const Node& node = g_.nodes()[n];
      if (forward) {
        for (int t : node.outputs)
          for (int c : consumers_[t])
            if (live_[c] && vertex_of(c) != v) visit(vertex_of(c));
      } else {
        for (int t : node.inputs) {
          int p = g_.tensor(t).producer;
          if (p >= 0 && live_[p] && vertex_of(p) != v) visit(vertex_of(p));
        }
      }
    };
    if (v < node_count()) {
      one(v);
    } else {
      for (int n : groups_[v - node_count()].nodes) one(n);
    }
  }

  const Shape& out_shape(int node) const {
    return g_.tensor(g_.nodes()[node].outputs[0]).desc.shape;
  }
  const std::string& nm(int node) const { return g_.nodes()[node].name; }

  // True when the group graph has no cycle. Live nodes not yet placed count as groups of their
  // own, so that every intermediate state stays schedulable.
  bool acyclic() const {
    const auto& nodes = g_.nodes();
    int ng = static_cast<int>(groups_.size());
    int total = ng + static_cast<int>(nodes.size());
    auto gid = [&](int node) { return group_of_[node] >= 0 ? group_of_[node] : ng + node; };
    std::vector<std::vector<int>> succ(total);
    std::vector<int> indeg(total, 0);
    std::vector<bool> present(total, false);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!live_[i]) continue;
      int gi = gid(static_cast<int>(i));
      present[gi] = true;
      for (int t : nodes[i].inputs) {
        int p = g_.tensor(t).producer;
        if (p < 0 || !live_[p] || gid(p) == gi) continue;
        succ[gid(p)].push_back(gi);
        ++indeg[gi];
      }
    }
    std::vector<int> q;
    int count = 0;
    for (int i = 0; i < total; ++i) {
      if (!present[i]) continue;
      ++count;
      if (indeg[i] == 0) q.push_back(i);
    }
    int done = 0;
    while (!q.empty()) {
      int x = q.back();
      q.pop_back();
      ++done;
      for (int s : succ[x])
        if (--indeg[s] == 0) q.push_back(s);
    }
    return done == count;
  }

  // Tentatively adds `node` to `gid`; keeps it when the group graph stays acyclic.
  bool try_add(int gid, int node) {
    if (!takes_strided_views(gid, node)) return false;
    if (order_->join(node_count() + gid, node, node_count() + gid)) {
      group_of_[node] = gid;
      groups_[gid].nodes.insert(node);
      return true;
    }
    cycle_rejects_.insert(node);
    return false;
  }

  // Strided views (a slice, an expand, a concat input: engine/passes/strided_views.hpp) are
  // read and written through their strides by pointwise kernels and contraction epilogues: a
  // node touching one joins no other kind of group (a pool anchor stores its own strided output,
  // but nothing that touches it fuses into the pool).
  bool takes_strided_views(int gid, int node) const {
    const GroupKind k = groups_[gid].kind;
    if (k == GroupKind::Pointwise || k == GroupKind::Contraction) return true;
    const Node& n = g_.nodes()[node];
    // A pool's epilogue stores each result through its strides (codegen/emit_window.cpp,
    // scalar_pool): an elementwise node after the anchor may write a strided view (an
    // Inception branch's relu into its place of the concat).
    const bool window_epilogue =
        k == GroupKind::Window && elementwise(n) && node > groups_[gid].anchor;
    for (int t : n.inputs)
      if (is_strided_view(g_, t)) return false;
    for (int t : n.outputs)
      if (is_strided_view(g_, t) && !window_epilogue) return false;
    return true;
  }

  // The attention chain starting at matmul `qk`, when the fused kernel takes it, as one group.
  void claim_attention(int qk) {
    std::optional<AttentionChain> c = match_attention(g_, qk);
    if (!c) return;
    const std::vector<int> chain = c->nodes();
    for (int n : chain)
      if (n != qk && (group_of_[n] >= 0 || !live_[n])) return;
    int gid = new_group(qk, GroupKind::Attention, qk);
    groups_[gid].attention = c;
    for (int n : chain)
      if (n != qk) {
        groups_[gid].nodes.insert(n);
        group_of_[n] = gid;
      }
    // The chain's intermediates have no reader outside it, so no path leaves it and comes back.
    KILN_ASSERT(acyclic(), "attention group of {} makes the plan cyclic", nm(qk));
    order_->invalidate();
    std::string chain_text;
    for (int n : chain) chain_text += (chain_text.empty() ? "" : " -> ") + nm(n);
    std::string band;
    if (c->causal) band += fmt::format(", causal (offset {})", c->causal_offset);
    if (c->window) band += fmt::format(", sliding window (keys from offset {})", c->window_offset);
    if (!band.empty()) band += ": masked key blocks skipped";
    groups_[gid].notes.push_back(fmt::format(
        "attention: {}: scores and probabilities stay on chip (one kernel){}", chain_text, band));
  }

  // attention_varlen as a group of its own: its kernel reads Q, K, V and the offsets as stored
  // and writes O as a whole, so no producer or consumer fuses in.
  void claim_varlen_attention(int i) {
    const int gid = new_group(i, GroupKind::AttentionVarlen, i);
    groups_[gid].notes.push_back(
        fmt::format("attention_varlen: {}: a ragged batch, sequences found from the offsets at "
                    "run time (a kernel of its own)",
                    nm(i)));
  }

  // Whether every operand and the result of node i are floating. Integer / bool elementwise
  // nodes (comparisons, where, logical ops, integer math) fuse only into pointwise kernels: the
  // anchors' and copies' emitters hold f32 values in their prologues and epilogues.
  bool all_floating(int i) const {
    const Node& n = g_.nodes()[i];
    for (int t : n.inputs)
      if (!is_float(g_.tensor(t).desc.dtype)) return false;
    for (int t : n.outputs)
      if (!is_float(g_.tensor(t).desc.dtype)) return false;
    return true;
  }

  // Whether node p, a movement op that reads its data through an index operand (gather: an
  // embedding lookup), fuses into row-norm group gid's prologue: its floating result has the
  // row norm's input shape and is read only by the group's elementwise prologue (not by the
  // anchor itself, which loads its input directly), so each element is gathered where it is
  // needed and the lookup needs no kernel of its own.
  bool row_lookup(int gid, int p, bool anchor_input, const Shape& shape) const {
    const Node& pn = g_.nodes()[p];
    if (groups_[gid].kind != GroupKind::RowNorm || anchor_input) return false;
    if (!op_info(pn.op).index_operand || cat(pn) != OpCategory::Movement) return false;
    const int out = pn.outputs[0];
    if (out_shape(p) != shape || !is_float(g_.tensor(out).desc.dtype) || is_output_.count(out))
      return false;
    for (int c : consumers_[out])
      if (live_[c] && group_of_[c] != gid) return false;
    return true;
  }

  // Elementwise producers of the anchor's (or movement op's) main input, and their producers,
  // with that shape.
  void claim_prologue(int gid, int anchor) {
    const Node& a = g_.nodes()[anchor];
    const Shape& shape = g_.tensor(a.inputs[0]).desc.shape;
    std::vector<int> work{a.inputs[0]};
    while (!work.empty()) {
      int t = work.back();
      work.pop_back();
      int p = g_.tensor(t).producer;
      if (p < 0 || group_of_[p] >= 0 || !live_[p]) continue;
      const Node& pn = g_.nodes()[p];
      if (row_lookup(gid, p, t == a.inputs[0], shape)) {
        if (!try_add(gid, p)) continue;
        groups_[gid].notes.push_back(
            fmt::format("prologue: {} ({}) read through by {}'s prologue (no copy kernel)", pn.name,
                        op_name(pn.op), a.name));
        continue;  // its data and indices are group inputs
      }
      // Index sources (range) compute from the element's index, which only pointwise kernels
      // hold.
      if (!elementwise(pn) || out_shape(p) != shape || !all_floating(p) ||
          op_info(pn.op).index_source)
        continue;
      // A window visits its input elements zero or several times, a copy in its output's order:
      // neither writes a prologue intermediate as an extra output, so only private ones fuse in.
      if (groups_[gid].kind == GroupKind::Window || groups_[gid].kind == GroupKind::Copy) {
        bool private_use = !is_output_.count(pn.outputs[0]);
        for (int c : consumers_[pn.outputs[0]]) private_use &= !live_[c] || group_of_[c] == gid;
        if (!private_use) continue;
      }
      if (!try_add(gid, p)) continue;
      groups_[gid].notes.push_back(
          fmt::format("prologue: {} ({}) fused into {}'s input", pn.name, op_name(pn.op), a.name));
      // Only the operands with the iteration shape can be computed on the fly.
      for (int in : pn.inputs) work.push_back(in);
    }
  }

  // Operand shapes a contraction epilogue accepts: same shape, or a vector along one dim
  // (per-channel bias, scalar).
  bool contraction_operand_ok(const Shape& operand, const Shape& iter) const {
    std::vector<int> map;
    int ri = static_cast<int>(iter.size()), ro = static_cast<int>(operand.size());
    if (ro > ri) return false;
    int mapped = 0;
    for (int i = 0; i < ri; ++i) {
      int od = i - (ri - ro);
      if (od < 0) continue;
      const Dim& d = operand[od];
      if (d.is_static() && d.value() == 1) continue;
      if (d != iter[i]) return false;
      ++mapped;
    }
    return mapped <= 1 || operand == iter;
  }

  // Elementwise consumers of group tensors with the anchor output's shape.
  void claim_epilogue(int gid, int anchor) {
    const Node& a = g_.nodes()[anchor];
    const Shape& shape = out_shape(anchor);
    bool contraction = groups_[gid].kind == GroupKind::Contraction;
    std::vector<int> work{a.outputs[0]};
    while (!work.empty()) {
      int t = work.front();
      work.erase(work.begin());
      for (int c : consumers_[t]) {
        if (!live_[c] || group_of_[c] >= 0) continue;
        const Node& cn = g_.nodes()[c];
        if (!elementwise(cn) || out_shape(c) != shape || !all_floating(c)) continue;
        bool ok = true;
        for (size_t s = 0; s < cn.inputs.size(); ++s) {
          int in = cn.inputs[s];
          int p = g_.tensor(in).producer;
          if (p >= 0 && group_of_[p] == gid) {
            // Reductions, windows and contractions see their input elements in another shape
            // or order than their output: an epilogue can only read the anchor's result chain.
            GroupKind k = groups_[gid].kind;
            if ((k == GroupKind::Reduction || k == GroupKind::Window ||
                 k == GroupKind::Contraction) &&
                p < anchor)
              ok = false;
            continue;
          }
          // Per-channel parameters (batchnorm's) index dim 1 of the iteration.
          bool per_channel = op_info(cn.op).channel_operands && s > 0;
          if (contraction && !per_channel &&
              !contraction_operand_ok(g_.tensor(in).desc.shape, shape))
            ok = false;
        }
        if (!ok || !try_add(gid, c)) continue;
        groups_[gid].notes.push_back(
            fmt::format("epilogue: {} ({}) fused on {}'s output", cn.name, op_name(cn.op), a.name));
        work.push_back(cn.outputs[0]);
      }
    }
  }

  // The iteration shape of a pointwise group (its nodes all share it).
  const Shape& iter_shape(int gid) const { return out_shape(*groups_[gid].nodes.begin()); }

  void merge(int into, int from) {
    for (int n : groups_[from].nodes) {
      group_of_[n] = into;
      groups_[into].nodes.insert(n);
    }
    groups_[from].nodes.clear();
    groups_[from].dead = true;
  }

  bool try_merge(int into, int from) {
    if (!order_->join(node_count() + into, node_count() + from, node_count() + into)) return false;
    merge(into, from);
    return true;
  }

  void place_pointwise(int i) {
    const Node& n = g_.nodes()[i];
    const Shape& shape = out_shape(i);
    // Vertical: join the group of an elementwise producer with the same iteration shape.
    for (int t : n.inputs) {
      int p = g_.tensor(t).producer;
      if (p < 0 || group_of_[p] < 0) continue;
      int gid = group_of_[p];
      if (groups_[gid].kind != GroupKind::Pointwise || iter_shape(gid) != shape) continue;
      if (try_add(gid, i)) {
        // Several producer groups: merge them too (one DAG, one kernel).
        for (int t2 : n.inputs) {
          int p2 = g_.tensor(t2).producer;
          if (p2 < 0 || group_of_[p2] < 0 || group_of_[p2] == gid) continue;
          int g2 = group_of_[p2];
          if (groups_[g2].kind == GroupKind::Pointwise && iter_shape(g2) == shape)
            try_merge(gid, g2);
        }
        return;
      }
    }
    // Horizontal: a pointwise group with the same shape that reads one of our inputs.
    for (int t : n.inputs) {
      for (int c : consumers_[t]) {
        if (c == i || group_of_[c] < 0) continue;
        int gid = group_of_[c];
        if (groups_[gid].kind != GroupKind::Pointwise || iter_shape(gid) != shape) continue;
        if (try_add(gid, i)) {
          groups_[gid].notes.push_back(
              fmt::format("horizontal: {} ({}) shares input '{}' with {}: one kernel", n.name,
                          op_name(n.op), g_.tensor(t).name, nm(c)));
          return;
        }
      }
    }
    new_group(i, GroupKind::Pointwise, -1);
  }

  // Why producer p (group gp) and consumer c (group gc) ended up in different kernels.
  std::string boundary_reason(int p, int c, int slot) const {
    const Node& pn = g_.nodes()[p];
    const Node& cn = g_.nodes()[c];
    std::string edge = fmt::format("{} -> {}", pn.name, cn.name);
    if (!opts_.fusion) return edge + ": fusion disabled (one kernel per op)";
    if (cat(pn) == OpCategory::Movement && is_view_node(g_, pn))
      return fmt::format("{}: {} is a view (no kernel), read in place", edge, pn.name);
    if (cat(cn) == OpCategory::Contraction)
      return fmt::format("{}: {} is a contraction anchor, {} cannot be its prologue", edge, cn.name,
                         pn.name);
    if (cat(cn) == OpCategory::Attention || cat(pn) == OpCategory::Attention)
      return fmt::format(
          "{}: attention_varlen reads and writes memory as stored (a kernel of "
          "its own)",
          edge);
    if (cat(pn) == OpCategory::Movement)
      return fmt::format("{}: {} is a movement op, materialized by its own copy kernel", edge,
                         pn.name);
    if (cat(cn) == OpCategory::Movement && is_view_node(g_, cn))
      return fmt::format("{}: {} is a view of {}'s result (no kernel)", edge, cn.name, pn.name);
    if (cat(cn) == OpCategory::Movement) {
      std::string why = "it is not elementwise";
      if (cn.inputs.size() > 1)
        why = "a copy of several inputs takes no prologue";
      else if (elementwise(pn))
        why = cycle_rejects_.count(p) ? "fusing it would create a cycle"
              : groups_[group_of_[p]].kind != GroupKind::Pointwise
                  ? "it is already fused into its producer's kernel"
                  : "its result is also used elsewhere";
      return fmt::format("{}: {} is a movement op (copy kernel); {} is not its prologue: {}", edge,
                         cn.name, pn.name, why);
    }
    if (is_anchor(pn) && is_anchor(cn))
      return fmt::format("{}: both are anchors ({}, {}); one anchor per kernel", edge,
                         category_name(cat(pn)), category_name(cat(cn)));
    if (elementwise(pn) && op_info(pn.op).index_source && !elementwise(cn))
      return fmt::format(
          "{}: {} computes from the element's index: it runs in a pointwise kernel, not in {}'s "
          "prologue",
          edge, pn.name, cn.name);
    if (elementwise(pn) && !all_floating(p) && !elementwise(cn))
      return fmt::format(
          "{}: {} has integer / bool operands or result: it runs in a pointwise "
          "kernel, not in {}'s prologue",
          edge, pn.name, cn.name);
    if (is_anchor(cn)) {
      if (slot != 0)
        return fmt::format("{}: feeds {}'s parameter input {}, not its main input", edge, cn.name,
                           slot);
      if (cycle_rejects_.count(p))
        return fmt::format("{}: fusing {} would create a cycle between kernels", edge, pn.name);
      if (out_shape(p) != g_.tensor(cn.inputs[0]).desc.shape)
        return fmt::format("{}: shape {} differs from {}'s input shape {}", edge,
                           shape_str(out_shape(p)), cn.name,
                           shape_str(g_.tensor(cn.inputs[0]).desc.shape));
      return fmt::format("{}: {} is already fused into its producer's kernel", edge, pn.name);
    }
    // c is elementwise.
    if (!all_floating(c) && groups_[group_of_[p]].kind != GroupKind::Pointwise)
      return fmt::format(
          "{}: {} has integer / bool operands or result: it runs in a pointwise "
          "kernel, not in {}'s epilogue",
          edge, cn.name, pn.name);
    if (cycle_rejects_.count(c))
      return fmt::format("{}: fusing {} would create a cycle between kernels", edge, cn.name);
    if (out_shape(c) != out_shape(p))
      return fmt::format("{}: iteration shapes differ ({} vs {})", edge, shape_str(out_shape(p)),
                         shape_str(out_shape(c)));
    if (groups_[group_of_[p]].kind == GroupKind::Contraction)
      return fmt::format(
          "{}: {} has an operand that a contraction epilogue cannot index (not same-shape, "
          "per-channel or scalar)",
          edge, cn.name);
    return fmt::format("{}: {} needs an operand computed by a later kernel", edge, cn.name);
  }

  // The live groups in a valid execution order: topological (Kahn), ties by smallest node index.
  std::vector<int> execution_order() const {
    const auto& nodes = g_.nodes();
    int ng = static_cast<int>(groups_.size());
    std::vector<std::set<int>> succ(ng);
    std::vector<int> indeg(ng, 0);
    for (size_t i = 0; i < nodes.size(); ++i) {
      int gi = group_of_[i];
      if (gi < 0) continue;
      for (int t : nodes[i].inputs) {
        int p = g_.tensor(t).producer;
        if (p < 0 || group_of_[p] < 0 || group_of_[p] == gi) continue;
        if (succ[group_of_[p]].insert(gi).second) ++indeg[gi];
      }
    }
    auto first_node = [&](int gi) { return *groups_[gi].nodes.begin(); };
    std::set<std::pair<int, int>> ready;
    for (int i = 0; i < ng; ++i)
      if (!groups_[i].dead && !groups_[i].nodes.empty() && indeg[i] == 0)
        ready.insert({first_node(i), i});
    std::vector<int> order;
    while (!ready.empty()) {
      int x = ready.begin()->second;
      ready.erase(ready.begin());
      order.push_back(x);
      for (int s : succ[x])
        if (--indeg[s] == 0) ready.insert({first_node(s), s});
    }
    KILN_ASSERT(order.size() == static_cast<size_t>(std::count_if(
                                    groups_.begin(), groups_.end(),
                                    [](const G& x) { return !x.dead && !x.nodes.empty(); })),
                "fusion plan has a cycle");
    return order;
  }

  // Group `gi`'s outputs: tensors it produces that a graph output is or another group reads,
  // with why each intermediate one is written.
  void add_outputs(int gi, FusionGroup* fg) const {
    const auto& nodes = g_.nodes();
    int last = fg->nodes.back();
    for (int n : fg->nodes) {
      for (int t : nodes[n].outputs) {
        std::vector<std::string> outside;
        for (int c : consumers_[t])
          if (live_[c] && group_of_[c] != gi) outside.push_back(nm(c));
        bool out = is_output_.count(t) > 0;
        if (outside.empty() && !out) continue;
        fg->outputs.push_back(t);
        if (n == last) continue;
        std::string users;
        for (const std::string& u : outside) users += (users.empty() ? "" : ", ") + u;
        if (out && outside.empty())
          fg->why.push_back(fmt::format("{} output '{}' is a graph output: written as extra output",
                                        nm(n), g_.tensor(t).name));
        else
          fg->why.push_back(fmt::format("{} output '{}' also used by {}: written as extra output",
                                        nm(n), g_.tensor(t).name, users));
      }
    }
  }

  // The kernel-name stem: kind_dtype_op_op... (repeats folded, at most six ops).
  std::string name_stem(const FusionGroup& fg) const {
    const auto& nodes = g_.nodes();
    const TensorDesc& d0 =
        g_.tensor(nodes[fg.anchor >= 0 ? fg.anchor : fg.nodes[0]].outputs[0]).desc;
    std::string stem = fmt::format("{}_{}", group_kind_name(fg.kind), dtype_name(d0.dtype));
    // An attention group is named by its chain (scores, steps, softmax, product): the operands'
    // reshape / transpose chains and a band mask's computation joined it as addressing.
    std::vector<int> named = fg.nodes;
    if (fg.attention) {
      const AttentionChain& c = *fg.attention;
      named = {c.qk};
      for (const ScoreStep& s : c.steps) named.push_back(s.node);
      named.push_back(c.softmax);
      named.push_back(c.pv);
    }
    std::string prev;
    int count = 0;
    for (int n : named) {
      std::string op = op_name(nodes[n].op);
      if (op == prev) continue;
      if (++count > 6) {
        stem += "_etc";
        break;
      }
      stem += "_" + op;
      prev = op;
    }
    return stem;
  }

  Plan finish() {
    const auto& nodes = g_.nodes();
    const std::vector<int> order = execution_order();
    std::vector<int> new_id(groups_.size(), -1);
    for (size_t k = 0; k < order.size(); ++k) new_id[order[k]] = static_cast<int>(k);

    Plan plan;
    for (size_t k = 0; k < order.size(); ++k) {
      const G& src = groups_[order[k]];
      FusionGroup fg;
      fg.id = static_cast<int>(k);
      fg.kind = src.kind;
      fg.anchor = src.anchor;
      fg.attention = src.attention;
      fg.nodes.assign(src.nodes.begin(), src.nodes.end());  // node order is topological
      std::set<int> produced, inputs_seen;
      for (int n : fg.nodes)
        for (int t : nodes[n].outputs) produced.insert(t);
      for (int n : fg.nodes)
        for (int t : nodes[n].inputs)
          if (!produced.count(t) && inputs_seen.insert(t).second) fg.inputs.push_back(t);
      if (src.anchor >= 0)
        fg.why.push_back(fmt::format("anchor: {} ({}) -> {} kernel", nm(src.anchor),
                                     category_name(cat(nodes[src.anchor])),
                                     group_kind_name(src.kind)));
      for (const std::string& s : src.notes) fg.why.push_back(s);
      add_outputs(order[k], &fg);
      // Boundaries with producer groups.
      for (int n : fg.nodes) {
        const Node& node = nodes[n];
        for (size_t s = 0; s < node.inputs.size(); ++s) {
          int p = g_.tensor(node.inputs[s]).producer;
          if (p < 0 || group_of_[p] == order[k]) continue;
          fg.why.push_back(fmt::format("{} (group {})", boundary_reason(p, n, static_cast<int>(s)),
                                       new_id[group_of_[p]]));
        }
      }
      fg.name = name_stem(fg);
      plan.groups.push_back(std::move(fg));
    }
    return plan;
  }

  const Graph& g_;
  PlanOptions opts_;
  std::vector<int> group_of_;
  std::vector<bool> live_;
  std::vector<std::vector<int>> consumers_;
  std::set<int> is_output_;
  std::set<int> cycle_rejects_;
  std::vector<G> groups_;
  std::unique_ptr<GroupOrder> order_;  // made in run()
};

}  // namespace

Plan plan_fusion(const Graph& g, const PlanOptions& opts) {
  return Planner(g, opts).run();
}

std::string plan_to_string(const Graph& g, const Plan& p) {
  const size_t views = static_cast<size_t>(
      std::count_if(p.groups.begin(), p.groups.end(),
                    [](const FusionGroup& grp) { return grp.kind == GroupKind::View; }));
  const size_t kernels = p.groups.size() - views;
  std::string s = fmt::format(
      "plan for '{}': {} kernel{}{} for {} node{}\n", g.name(), kernels, kernels == 1 ? "" : "s",
      views ? fmt::format(" and {} view{}", views, views == 1 ? "" : "s") : std::string(),
      [&] {
        size_t n = 0;
        for (const auto& grp : p.groups) n += grp.nodes.size();
        return n;
      }(),
      "s");
  auto tensors = [&](const std::vector<int>& ts) {
    std::string r;
    for (int t : ts)
      r += fmt::format("{}{} {}", r.empty() ? "" : ", ", g.tensor(t).name, g.tensor(t).desc.str());
    return r.empty() ? std::string("-") : r;
  };
  for (const FusionGroup& grp : p.groups) {
    s += fmt::format("group {} [{}] {}\n", grp.id, group_kind_name(grp.kind), grp.name);
    std::string ns;
    for (int n : grp.nodes) {
      const Node& node = g.nodes()[n];
      ns += fmt::format("{}{}{} ({})", ns.empty() ? "" : ", ", n == grp.anchor ? "*" : "",
                        node.name, op_name(node.op));
    }
    s += fmt::format("  nodes:   {}\n", ns);
    s += fmt::format("  inputs:  {}\n", tensors(grp.inputs));
    s += fmt::format("  outputs: {}\n", tensors(grp.outputs));
    for (const std::string& w : grp.why) s += fmt::format("  why:     {}\n", w);
  }
  return s;
}

}  // namespace kiln
