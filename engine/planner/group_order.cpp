#include "engine/planner/group_order.hpp"

#include <algorithm>
#include <iterator>

#include "engine/base/check.hpp"

namespace kiln {

GroupOrder::GroupOrder(int max_vertices, Neighbours neighbours,
                       std::function<std::vector<int>()> vertices, std::function<size_t(int)> size)
    : neighbours_(std::move(neighbours)),
      vertices_(std::move(vertices)),
      size_(std::move(size)),
      label_(static_cast<size_t>(max_vertices), 0.0),
      seen_(static_cast<size_t>(max_vertices), 0) {}

void GroupOrder::build() {
  std::vector<int> vs = vertices_();
  std::vector<int> indeg(label_.size(), 0);
  for (int v : vs) neighbours_(v, true, [&](int w) { ++indeg[w]; });
  std::vector<int> ready;
  for (int v : vs)
    if (indeg[v] == 0) ready.push_back(v);
  by_label_.clear();
  double next = 0;
  while (!ready.empty()) {
    int v = ready.back();
    ready.pop_back();
    label_[v] = next;
    by_label_.emplace(next, v);
    next += 1;
    neighbours_(v, true, [&](int w) {
      if (--indeg[w] == 0) ready.push_back(w);
    });
  }
  KILN_ASSERT(by_label_.size() == vs.size(), "the group graph has a cycle");
  valid_ = true;
}

bool GroupOrder::join(int a, int b, int keep) {
  if (!valid_) build();
  const int s = size_(a) <= size_(b) ? a : b, o = s == a ? b : a;
  const double bound = label_[o];
  const bool forward = label_[s] < bound;  // walk from s towards o
  std::vector<int> reached, stack{s};
  bool cycle = false;
  while (!stack.empty() && !cycle) {
    int v = stack.back();
    stack.pop_back();
    neighbours_(v, forward, [&](int w) {
      if (cycle || seen_[w] || w == s) return;
      if (w == o) {
        cycle = v != s;  // the edge s-o itself is what the join contracts
        return;
      }
      if (forward ? label_[w] >= bound : label_[w] <= bound) return;  // past o: cannot reach it
      seen_[w] = 1;
      reached.push_back(w);
      stack.push_back(w);
    });
  }
  for (int w : reached) seen_[w] = 0;
  if (cycle) return false;

  // The reached vertices move next to o, in their order: before it when reached backwards (they
  // lead to s), after it when reached forwards (s leads to them).
  std::sort(reached.begin(), reached.end(), [&](int x, int y) { return label_[x] < label_[y]; });
  for (int w : reached) by_label_.erase(label_[w]);
  by_label_.erase(label_[s]);
  if (!reached.empty()) {
    auto at = by_label_.find(bound);
    double lo = 0, hi = 0;
    const double n = static_cast<double>(reached.size()) + 1;
    if (forward) {
      lo = bound;
      hi = std::next(at) == by_label_.end() ? bound + n : std::next(at)->first;
    } else {
      hi = bound;
      lo = at == by_label_.begin() ? bound - n : std::prev(at)->first;
    }
    const double step = (hi - lo) / n;
    if (!(lo + step > lo && lo + step * (n - 1) < hi)) {
      valid_ = false;  // the gap is exhausted: rebuild after the caller's join
    } else {
      for (size_t i = 0; i < reached.size(); ++i) {
        label_[reached[i]] = lo + step * static_cast<double>(i + 1);
        by_label_.emplace(label_[reached[i]], reached[i]);
      }
    }
  }
  by_label_.erase(bound);
  label_[keep] = bound;
  by_label_.emplace(bound, keep);
  return true;
}

void GroupOrder::rename(int from, int to) {
  if (!valid_) return;
  label_[to] = label_[from];
  by_label_[label_[to]] = to;
}

}  // namespace kiln
