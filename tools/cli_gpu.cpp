// The GPU path of the CLI: compile with the Engine, upload host inputs, run, download outputs.
#include "tools/cli_gpu.hpp"

#include <fmt/format.h>

#include <chrono>

#include "kiln/device.hpp"
#include "kiln/engine.hpp"
#include "kiln/nvrtc.hpp"
#include "tools/cli_common.hpp"
#include "tools/cli_error.hpp"

namespace kiln::cli {

bool gpu_available(std::string* why) {
  std::string reason;
  bool ok = cuda_available(&reason);
  if (why) *why = ok ? "" : "no CUDA device: " + reason;
  return ok;
}

DeviceFlag parse_device_flag(const std::string& cmd, const std::string& value, bool allow_cpu) {
  DeviceFlag f;
  if (allow_cpu && value == "auto") return f;
  if (allow_cpu && value == "cpu") {
    f.kind = DeviceFlag::Kind::Cpu;
    return f;
  }
  f.kind = DeviceFlag::Kind::Gpu;
  if (value == "gpu") return f;
  const std::string digits = value.size() > 4 ? value.substr(4) : "";
  const bool ok = value.compare(0, 4, "gpu:") == 0 && !digits.empty() && digits.size() <= 4 &&
                  digits.find_first_not_of("0123456789") == std::string::npos;
  if (!ok)
    usage_error(cmd,
                fmt::format("--device: expected {}gpu or gpu:N (N a device ordinal: 0, 1, ...; "
                            "`kiln devices` lists them), found '{}'",
                            allow_cpu ? "auto, cpu, " : "", value));
  f.ordinal = std::stoi(digits);
  return f;
}

void require_gpu(const std::string& cmd, int ordinal) {
  std::string why;
  KILN_CHECK(gpu_available(&why), "{}: --device gpu:{}: {}", cmd, ordinal, why);
  const int n = device_count();
  if (ordinal < n) return;
  std::string list;
  for (const DeviceListing& d : list_devices())
    list += fmt::format("{}gpu:{} ({}, {})", list.empty() ? "" : ", ", d.ordinal, d.facts.name,
                        d.facts.arch);
  KILN_FAIL(
      "{}: --device gpu:{}: there is no CUDA device {}; the devices here are {} (`kiln "
      "devices` lists them; CUDA_VISIBLE_DEVICES selects and renumbers them)",
      cmd, ordinal, ordinal, list);
}

DeviceSession::DeviceSession(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                             const Bindings& bindings, const EngineOptions& opts)
    : device_(opts.device),
      init_ms_([&opts] {
        // NVRTC's one-time start (~200 ms on the H200 machine) overlaps CUDA's (~120 ms).
        nvrtc_start_async();
        auto t0 = std::chrono::steady_clock::now();
        cuda_init(opts.device);
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
            .count();
      }()),
      engine_(opts),
      bindings_(bindings) {
  DeviceScope on(device_);  // the buffers live on the engine's device
  auto t0 = std::chrono::steady_clock::now();
  compiled_ = engine_.compile(g);
  compile_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int id : g.inputs()) {
    const TensorInfo& t = g.tensor(id);
    auto it = inputs.find(t.name);
    KILN_CHECK(it != inputs.end(), "input '{}' was not supplied", t.name);
    const HostTensor& h = it->second;
    const Layout layout = t.desc.layout == Layout::Strided ? Layout::NCHW : t.desc.layout;
    KILN_ASSERT(h.strides == layout_strides(h.shape, layout, {}),
                "input '{}' reached the GPU session not in its declared layout {}", t.name,
                layout_name(layout));
    buffers_.emplace_back(h.data.size());
    copy_to_device(buffers_.back().ptr(), h.data.data(), h.data.size());
    inputs_[t.name] = DeviceTensor{buffers_.back().ptr(), h.shape};
  }
  for (const auto& [name, shape] : compiled_.output_shapes(bindings_)) {
    const TensorInfo& t = g.tensor(g.find(name));
    HostTensor h = HostTensor::zeros(
        t.desc.dtype, shape, t.desc.layout == Layout::Strided ? Layout::NCHW : t.desc.layout);
    buffers_.emplace_back(h.data.size());
    outputs_[name] = DeviceTensor{buffers_.back().ptr(), shape};
    host_outputs_[name] = std::move(h);
  }
}

double DeviceSession::run() {
  DeviceScope on(device_);
  // Poison the outputs: a kernel that skips an element leaves NaN (0xff bytes) behind.
  for (const auto& [name, d] : outputs_)
    fill_device(d.ptr, 0xff, host_outputs_.at(name).data.size());
  synchronize_device();
  auto t0 = std::chrono::steady_clock::now();
  compiled_.run(inputs_, outputs_, nullptr, 0);
  synchronize_device();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::map<std::string, HostTensor> DeviceSession::download() const {
  DeviceScope on(device_);
  std::map<std::string, HostTensor> out = host_outputs_;
  for (auto& [name, h] : out) copy_to_host(h.data.data(), outputs_.at(name).ptr, h.data.size());
  return out;
}

DeviceRunResult run_on_gpu(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                           const Bindings& bindings, int device) {
  EngineOptions eo;
  eo.device = device;
  DeviceSession s(g, inputs, bindings, eo);
  double first_ms = s.run();  // first run: first-touch costs
  DeviceRunResult r;
  r.ms = s.run();
  r.outputs = s.download();
  EngineStats st = s.engine().stats();
  r.stats = st;
  r.backend = fmt::format(
      "gpu:{} {} ({} kernel{}; CUDA init {:.0f} ms; compile {:.1f} ms: {} nvrtc, {} memory, {} "
      "disk "
      "cache hits; first run {:.2f} ms)",
      device, s.engine().arch(), s.compiled().kernels().size(),
      s.compiled().kernels().size() == 1 ? "" : "s", s.cuda_init_ms(), s.compile_ms(),
      st.nvrtc_compiles, st.memory_cache_hits, st.disk_cache_hits, first_ms);
  return r;
}

}  // namespace kiln::cli
