#include "codegen/nvrtc.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>

#include "engine/base/check.hpp"
#include "engine/base/env.hpp"
#include "engine/base/file_io.hpp"
#include "engine/base/hash.hpp"
#include "heuristics/device_info.hpp"

namespace kiln {

namespace {

// A file-name-safe version of a kernel name.
std::string safe_name(const std::string& name) {
  std::string s;
  for (char c : name.substr(0, 120))
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return s.empty() ? "kernel" : s;
}

// Writes `text` to dump_dir()/<file>, a directory kiln owns, atomically and never through a link
// planted at that name; returns the path, or "" (with the reason in *err) on failure.
std::string write_dump(const std::string& file, const std::string& text, std::string* err) {
  std::string dir = dump_dir();
  std::string why;
  bool follow = !kiln_cache_dir_is_shared_fallback();
  if (!prepare_private_dir(dir, &why, follow)) {
    if (err) *err = fmt::format("could not write {} in {}: the directory {}", file, dir, why);
    return {};
  }
  std::string path = (std::filesystem::path(dir) / file).string();
  if (!write_file_atomic(path, text, &why)) {
    if (err) *err = fmt::format("could not write {}: {}", path, why);
    return {};
  }
  return path;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& o : v) s += (s.empty() ? "" : " ") + o;
  return s;
}

std::string nvrtc_err(nvrtcResult r) {
  return fmt::format("{} ({})", nvrtcGetErrorString(r), static_cast<int>(r));
}

struct Program {
  nvrtcProgram prog = nullptr;
  ~Program() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

std::string program_log(nvrtcProgram prog) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1) return {};
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// Compiles; returns the result code and fills *log.
nvrtcResult compile(Program* p, const std::string& source, const std::string& name,
                    const std::vector<std::string>& opts, std::string* log) {
  nvrtcResult r =
      nvrtcCreateProgram(&p->prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return r;
  std::vector<const char*> cs;
  for (const std::string& o : opts) cs.push_back(o.c_str());
  r = nvrtcCompileProgram(p->prog, static_cast<int>(cs.size()), cs.data());
  *log = program_log(p->prog);
  return r;
}

[[noreturn]] void fail(const std::string& what, const std::string& name, const std::string& source,
                       const std::vector<std::string>& opts, const std::string& log) {
  std::string werr;
  std::string path = write_dump(
      fmt::format("kiln-failed-{}-{}.cu", safe_name(name), hash_hex(source).substr(0, 16)), source,
      &werr);
  throw Error(
      ErrorKind::Driver,
      fmt::format("NVRTC: {} for kernel '{}'\n  options: {}\n  source: {}\n  log:\n{}", what, name,
                  join(opts), path.empty() ? "(not dumped: " + werr + ")" : path,
                  log.empty() ? "(empty)" : log));
}

// The start: one compile of an empty kernel; its wall time.
double start_nvrtc() {
  auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram p = nullptr;
  if (nvrtcCreateProgram(&p, "extern \"C\" __global__ void kiln_nvrtc_start() {}", "start.cu", 0,
                         nullptr, nullptr) == NVRTC_SUCCESS) {
    const char* opt = "--gpu-architecture=sm_80";
    nvrtcCompileProgram(p, 1, &opt);  // a failure here resurfaces, located, in the real compile
    nvrtcDestroyProgram(&p);
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_future<double> nvrtc_start(bool async) {
  static std::mutex mu;
  static std::shared_future<double> started;
  std::lock_guard<std::mutex> lock(mu);
  if (!started.valid())
    started = std::async(async ? std::launch::async : std::launch::deferred, start_nvrtc).share();
  return started;
}

}  // namespace

void nvrtc_start_async() {
  nvrtc_start(true);
}

double nvrtc_start_ms() {
  return nvrtc_start(false).get();
}

std::vector<std::string> nvrtc_options(const std::string& arch,
                                       const std::vector<std::string>& extra_opts) {
  parse_arch(arch, nullptr, "NVRTC target arch");
  // No --use_fast_math (f32 results must match the f64 reference to ~1e-5) and no -I: generated
  // sources include only the embedded prelude.
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17", "-default-device",
                                   "--fmad=true", "-minimal"};
  opts.insert(opts.end(), extra_opts.begin(), extra_opts.end());
  return opts;
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name,
                          const std::string& arch, const std::vector<std::string>& extra_opts) {
  std::vector<std::string> opts = nvrtc_options(arch, extra_opts);
  const EnvConfig& cfg = env();
  nvrtc_start_ms();  // the one-time start is not this kernel's time
  auto t0 = std::chrono::steady_clock::now();
  NvrtcResult out;
  {
    Program p;
    nvrtcResult r = compile(&p, source, name, opts, &out.log);
    if (r != NVRTC_SUCCESS)
      fail("compilation failed: " + nvrtc_err(r), name, source, opts, out.log);
    size_t n = 0;
    r = nvrtcGetCUBINSize(p.prog, &n);
    if (r != NVRTC_SUCCESS || n == 0)
      fail("nvrtcGetCUBINSize failed: " + nvrtc_err(r), name, source, opts, out.log);
    out.cubin.resize(n);
    r = nvrtcGetCUBIN(p.prog, out.cubin.data());
    if (r != NVRTC_SUCCESS)
      fail("nvrtcGetCUBIN failed: " + nvrtc_err(r), name, source, opts, out.log);
  }
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::string stem = fmt::format("kiln-{}-{}", safe_name(name), hash_hex(source).substr(0, 16));
  if (cfg.dump_cuda) {
    std::string err;
    std::string path = write_dump(stem + ".cu", source, &err);
    fmt::print(stderr, "kiln: CUDA source of {} ({}) -> {}\n", name, arch,
               path.empty() ? err : path);
  }
  if (cfg.dump_ptx) {
    // PTX exists only for a virtual arch: compile a second time for compute_XX.
    std::vector<std::string> popts = opts;
    popts[0] = "--gpu-architecture=compute_" + arch.substr(3);
    Program p;
    std::string log;
    std::string err;
    nvrtcResult r = compile(&p, source, name, popts, &log);
    size_t n = 0;
    if (r == NVRTC_SUCCESS) r = nvrtcGetPTXSize(p.prog, &n);
    std::string ptx(n, '\0');
    if (r == NVRTC_SUCCESS) r = nvrtcGetPTX(p.prog, ptx.data());
    if (r != NVRTC_SUCCESS)
      fail("PTX compilation (KILN_DUMP=ptx) failed: " + nvrtc_err(r), name, source, popts, log);
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    std::string path = write_dump(stem + ".ptx", ptx, &err);
    fmt::print(stderr, "kiln: PTX of {} ({}) -> {}\n", name, arch, path.empty() ? err : path);
  }
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return fmt::format("{}.{}", major, minor);
}

}  // namespace kiln
