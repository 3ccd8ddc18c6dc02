// A topological order of the planner's group graph (vertices: fusion groups, and live nodes not
// placed yet), kept valid across merges, so that a tentative merge searches only the vertices
// between the two it joins instead of the whole graph: planning a chain of n nodes is linear,
// where a whole-graph acyclicity check per merge made it quadratic.
//
// Joining vertices a and b (the graph acyclic before) makes a cycle exactly when a path of two or
// more edges leads from one to the other. Any such path stays between them in the order, so the
// search starts at the smaller vertex, walks towards the other one (backwards from the later,
// forwards from the earlier) and never leaves that window. When there is no such path, the
// vertices it reached move next to the other one (just before it, or just after it) and the
// joined vertex takes the other one's place: every edge still points forwards (Pearce and Kelly,
// "A dynamic topological sort algorithm for directed acyclic graphs", 2006, with one side).
#pragma once

#include <functional>
#include <map>
#include <vector>

namespace kiln {

class GroupOrder {
 public:
  // Calls visit(w) for every successor (forward) or predecessor w of vertex v (repeats allowed).
  using Neighbours =
      std::function<void(int v, bool forward, const std::function<void(int)>& visit)>;

  // Vertex ids are below `max_vertices`. `vertices` lists the current ones (to build the order),
  // `size` says how large one is (the search starts from the smaller side).
  GroupOrder(int max_vertices, Neighbours neighbours, std::function<std::vector<int>()> vertices,
             std::function<size_t(int)> size);

  // Whether joining a and b keeps the graph acyclic. When it does, the order is updated as if
  // the joined vertex were `keep` (a or b) and the other one were gone; the caller then joins
  // them. Nothing changes when it does not.
  bool join(int a, int b, int keep);
  // Vertex `from` is now called `to` (a node that became a group of its own).
  void rename(int from, int to);
  // The graph changed otherwise: the order is rebuilt when next needed.
  void invalidate() { valid_ = false; }

 private:
  void build();

  Neighbours neighbours_;
  std::function<std::vector<int>()> vertices_;
  std::function<size_t(int)> size_;
  bool valid_ = false;
  std::vector<double> label_;       // by vertex: its place in the order
  std::map<double, int> by_label_;  // the order
  std::vector<char> seen_;          // scratch of join(), all zero between calls
};

}  // namespace kiln
