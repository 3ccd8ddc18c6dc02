// kiln._kiln.Graph: the builder over kiln::Graph (tensors are ids), graph files, and the op list.
// kiln/graph.py wraps the ids in Tensor handles and adds the convenience methods.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kiln/error.hpp"
#include "kiln/graph.hpp"
#include "kiln/io.hpp"
#include "py_convert.hpp"

namespace kiln::py {

namespace {

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Input:
      return "input";
    case TensorRole::Constant:
      return "constant";
    case TensorRole::Intermediate:
      break;
  }
  return "intermediate";
}

TensorDesc desc_from(const Graph& g, const std::string& name, const std::string& dtype,
                     const nb::handle& shape, const std::string& layout) {
  std::string where = "graph '" + g.name() + "': tensor '" + name + "'";
  return TensorDesc{dtype_from(dtype, where + ".dtype"),
                    shape_from(shape, where + ".shape"),
                    layout_from(layout, where + ".layout"),
                    {}};
}

std::vector<Tensor> handles(const Graph& g, const std::vector<int>& ids, const std::string& where) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= static_cast<int>(g.tensors().size()))
      throw Error(ErrorKind::User, where + ": inputs[" + std::to_string(i) + "]: tensor id " +
                                       std::to_string(ids[i]) + " is not a tensor of graph '" +
                                       g.name() + "'");
    out.push_back(Tensor{ids[i]});
  }
  return out;
}

int add_constant(Graph& g, const std::string& name, const std::string& dtype,
                 const nb::handle& shape, const nb::handle& data, const std::string& layout) {
  TensorDesc d = desc_from(g, name, dtype, shape, layout);
  KILN_PY_CHECK(shape_is_static(d.shape), "graph '" + g.name() + "': constant '" + name +
                                              "': needs a static shape, found " +
                                              shape_str(d.shape));
  std::vector<int64_t> dims = eval_shape(d.shape, {});
  HostTensor t = host_tensor_from(d.dtype, dims, data, "constant '" + name + "'");
  return g.constant(name, d, std::move(t)).id;
}

nb::dict tensor_dict(const Graph& g, int id) {
  const TensorInfo& t = g.tensor(id);
  nb::dict d;
  d["id"] = id;
  d["name"] = t.name;
  d["dtype"] = dtype_name(t.desc.dtype);
  d["shape"] = shape_to(t.desc.shape);
  d["layout"] = layout_name(t.desc.layout);
  d["role"] = role_name(t.role);
  return d;
}

nb::list node_list(const Graph& g) {
  nb::list out;
  for (const Node& n : g.nodes()) {
    nb::dict d;
    d["op"] = op_name(n.op);
    d["name"] = n.name;
    d["inputs"] = n.inputs;
    d["outputs"] = n.outputs;
    nb::dict attrs;
    for (const auto& [k, v] : n.attrs) attrs[k.c_str()] = attr_to(v);
    d["attrs"] = attrs;
    out.append(d);
  }
  return out;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (int k = 0; k < static_cast<int>(OpKind::Count); ++k)
    out.push_back(op_name(static_cast<OpKind>(k)));
  return out;
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<Graph>(m, "Graph")
      .def(nb::init<std::string>(), nb::arg("name") = "graph")
      .def_prop_rw("name", &Graph::name, &Graph::set_name)
      .def(
          "_input",
          [](Graph& g, const std::string& name, const std::string& dtype, nb::handle shape,
             const std::string& layout) {
            return g.input(name, desc_from(g, name, dtype, shape, layout)).id;
          },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("layout") = "NCHW")
      .def("_constant", &add_constant, nb::arg("name"), nb::arg("dtype"), nb::arg("shape"),
           nb::arg("data"), nb::arg("layout") = "NCHW")
      .def(
          "_constant_random",
          [](Graph& g, const std::string& name, const std::string& dtype, nb::handle shape,
             const std::string& dist, double a, double b, uint64_t seed,
             const std::string& layout) {
            return g
                .constant_random(name, desc_from(g, name, dtype, shape, layout), dist, a, b, seed)
                .id;
          },
          nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("dist") = "normal",
          nb::arg("a") = 0.0, nb::arg("b") = 1.0, nb::arg("seed") = 1, nb::arg("layout") = "NCHW")
      .def(
          "_add_op",
          [](Graph& g, const std::string& op, const std::vector<int>& inputs, nb::handle attrs,
             const std::string& name, const std::vector<std::string>& output_names) {
            std::string where = "graph '" + g.name() + "': " + op +
                                (name.empty() ? std::string() : " (" + name + ")");
            Attrs a = attrs_from(attrs, where);
            std::vector<int> out;
            for (Tensor t : g.add_node(op, handles(g, inputs, where), a, name, output_names, where))
              out.push_back(t.id);
            return out;
          },
          nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::none(), nb::arg("name") = "",
          nb::arg("output_names") = std::vector<std::string>{})
      .def(
          "_output",
          [](Graph& g, int id) {
            g.output(handles(g, {id}, "graph '" + g.name() + "': output")[0]);
          },
          nb::arg("id"))
      .def("_tensor", &tensor_dict, nb::arg("id"))
      .def("_num_tensors", [](const Graph& g) { return g.tensors().size(); })
      .def("_find", &Graph::find, nb::arg("name"))
      .def("_inputs", &Graph::inputs)
      .def("_outputs", &Graph::outputs)
      .def("_nodes", &node_list)
      .def("symbols", &Graph::symbols)
      .def("to_json", [](const Graph& g) { return save_graph_string(g); })
      .def(
          "save", [](const Graph& g, const std::string& path) { save_graph_file(g, path); },
          nb::arg("path"));

  m.def("_load_graph", &load_graph_file, nb::arg("path"));
  m.def("_load_graph_string", &load_graph_string, nb::arg("text"),
        nb::arg("source_name") = "<string>", nb::arg("base_dir") = ".");
  m.def("op_names", &op_names, "Every op of kiln's op table, by its graph-file name.");
}

}  // namespace kiln::py
