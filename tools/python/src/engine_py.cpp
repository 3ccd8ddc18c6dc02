// kiln._kiln.Engine / EngineOptions / CompiledGraph over kiln/engine.hpp. Device tensors come in
// as (pointer, shape) pairs: kiln/compiled.py checks dtypes, devices and strides of torch tensors
// against the graph before it calls run().
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "kiln/engine.hpp"
#include "kiln/error.hpp"

namespace kiln::py {

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;
using Buffers = std::map<std::string, std::pair<uint64_t, std::vector<int64_t>>>;

std::map<std::string, DeviceTensor> device_tensors(const Buffers& b) {
  std::map<std::string, DeviceTensor> out;
  for (const auto& [name, pb] : b) out[name] = DeviceTensor{pb.first, pb.second};
  return out;
}

// One shape binding of a CompiledGraph's inputs and outputs, prepared once: a call passes only
// the buffers' addresses, in the graph's input and output order. The torch.compile backend's
// per-call path runs through it (kiln/engine.py _Plan).
class PreparedRun {
 public:
  PreparedRun(const CompiledGraph& c, const Shapes& inputs, const Shapes& outputs) : c_(c) {
    const Graph& g = c.graph();
    for (int id : g.inputs()) add(&in_, &in_order_, inputs, g.tensor(id).name);
    for (int id : g.outputs()) add(&out_, &out_order_, outputs, g.tensor(id).name);
  }

  void run(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
           uint64_t stream, uint64_t workspace) const {
    if (inputs.size() != in_order_.size() || outputs.size() != out_order_.size()) {
      throw Error(ErrorKind::User, "graph '" + c_.graph().name() + "': a prepared run takes " +
                                       std::to_string(in_order_.size()) + " input and " +
                                       std::to_string(out_order_.size()) +
                                       " output addresses, found " + std::to_string(inputs.size()) +
                                       " and " + std::to_string(outputs.size()));
    }
    auto in = in_;  // a copy per call: runs of one plan may come from several threads
    auto out = out_;
    for (size_t i = 0; i < inputs.size(); ++i) in[in_order_[i]].ptr = inputs[i];
    for (size_t i = 0; i < outputs.size(); ++i) out[out_order_[i]].ptr = outputs[i];
    nb::gil_scoped_release unlocked;
    c_.run(in, out, reinterpret_cast<void*>(stream), workspace);
  }

 private:
  static void add(std::map<std::string, DeviceTensor>* m, std::vector<std::string>* order,
                  const Shapes& shapes, const std::string& name) {
    auto it = shapes.find(name);
    if (it == shapes.end())
      throw Error(ErrorKind::User, "prepared run: no shape for '" + name + "'");
    m->emplace(name, DeviceTensor{0, it->second});
    order->push_back(name);
  }

  const CompiledGraph& c_;
  std::map<std::string, DeviceTensor> in_, out_;
  std::vector<std::string> in_order_, out_order_;
};

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["plans"] = s.plans;
  d["nvrtc_compiles"] = s.nvrtc_compiles;
  d["memory_cache_hits"] = s.memory_cache_hits;
  d["disk_cache_hits"] = s.disk_cache_hits;
  d["nvrtc_ms"] = s.nvrtc_ms;
  d["graph_cache_hits"] = s.graph_cache_hits;
  d["specializations"] = s.specializations;
  d["specialized_runs"] = s.specialized_runs;
  d["autotune_measured"] = s.autotune_measured;
  d["autotune_reused"] = s.autotune_reused;
  d["passes_ms"] = s.passes_ms;
  d["codegen_ms"] = s.codegen_ms;
  d["cache_ms"] = s.cache_ms;
  d["load_ms"] = s.load_ms;
  return d;
}

nb::list kernel_list(const CompiledGraph& c) {
  nb::list out;
  for (const KernelInfo& k : c.kernels()) {
    nb::dict d;
    d["name"] = k.name;
    d["group"] = k.group;
    d["nodes"] = k.nodes;
    d["compile_ms"] = k.compile_ms;
    d["cache"] = k.cache;
    d["bytes_moved"] = k.bytes_moved;
    d["flops"] = k.flops;
    d["tuning"] = k.tuning;
    out.append(d);
  }
  return out;
}

void bind_options(nb::module_& m) {
  nb::class_<EngineOptions>(m, "EngineOptions")
      .def(nb::init<>())
      .def_rw("device", &EngineOptions::device)
      .def_rw("use_current_context", &EngineOptions::use_current_context)
      .def_rw("arch", &EngineOptions::arch)
      .def_rw("fusion", &EngineOptions::fusion)
      .def_rw("disk_cache", &EngineOptions::disk_cache)
      .def_rw("cache_dir", &EngineOptions::cache_dir)
      .def_rw("load_kernels", &EngineOptions::load_kernels)
      .def_rw("specialize_after", &EngineOptions::specialize_after)
      .def_rw("cuda_graphs", &EngineOptions::cuda_graphs)
      .def_rw("deferred_errors", &EngineOptions::deferred_errors)
      .def_rw("schedule", &EngineOptions::schedule)
      .def_rw("autotune", &EngineOptions::autotune)
      .def_rw("tuning_file", &EngineOptions::tuning_file);
}

}  // namespace

void bind_engine(nb::module_& m) {
  bind_options(m);
  nb::class_<PreparedRun>(m, "PreparedRun")
      .def("run", &PreparedRun::run, nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0,
           nb::arg("workspace") = 0);
  nb::class_<CompiledGraph>(m, "CompiledGraph")
      .def("kernels", &kernel_list)
      .def(
          "prepare",
          [](const CompiledGraph& c, const Shapes& inputs, const Shapes& outputs) {
            return PreparedRun(c, inputs, outputs);
          },
          nb::arg("input_shapes"), nb::arg("output_shapes"), nb::keep_alive<0, 1>())
      .def(
          "bind",
          [](const CompiledGraph& c, const Shapes& input_shapes, const Bindings& extra) {
            return c.graph().bind(input_shapes, extra);
          },
          nb::arg("input_shapes"), nb::arg("extra") = Bindings{})
      .def("output_shapes", &CompiledGraph::output_shapes, nb::arg("bindings"))
      .def("workspace_size", &CompiledGraph::workspace_size, nb::arg("bindings"))
      .def(
          "run",
          [](const CompiledGraph& c, const Buffers& inputs, const Buffers& outputs, uint64_t stream,
             uint64_t workspace) {
            auto in = device_tensors(inputs);
            auto out = device_tensors(outputs);
            nb::gil_scoped_release unlocked;
            c.run(in, out, reinterpret_cast<void*>(stream), workspace);
          },
          nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0, nb::arg("workspace") = 0)
      .def("check_errors", [](const CompiledGraph& c) {
        nb::gil_scoped_release unlocked;
        c.check_errors();
      });

  nb::class_<Engine>(m, "Engine")
      .def(nb::init<EngineOptions>(), nb::arg("options") = EngineOptions{})
      .def(
          "compile",
          [](Engine& e, const Graph& g) {
            nb::gil_scoped_release unlocked;
            return e.compile(g);
          },
          nb::arg("graph"), nb::keep_alive<0, 1>())
      .def("stats", [](const Engine& e) { return stats_dict(e.stats()); })
      .def("has_device", &Engine::has_device)
      .def("arch", &Engine::arch)
      .def("device", &Engine::device);
}

}  // namespace kiln::py
