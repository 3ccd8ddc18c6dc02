// `kiln import MODEL.onnx --out DIR`: converts an ONNX model to a kiln graph file and its weights
// by running the tools/onnx2kiln package with python3 (it does the work; its exit status passes
// through).
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "tools/cli_common.hpp"

extern char** environ;

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The converter package's entry point: in the source tree of a build tree
// (<src>/tools/onnx2kiln/__main__.py, the build directory anywhere below <src>), or in an install
// (<prefix>/share/kiln/onnx2kiln/__main__.py). Searched from the directory of the running
// executable upwards. Lists the places it looked.
std::optional<fs::path> find_script(std::vector<std::string>* looked) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  fs::path dir = exe.parent_path();
  for (int up = 0; up < 5 && !dir.empty(); ++up) {
    for (const fs::path& cand : {dir / "tools" / "onnx2kiln" / "__main__.py",
                                 dir / "share" / "kiln" / "onnx2kiln" / "__main__.py"}) {
      looked->push_back(cand.string());
      if (is_file(cand)) return cand;
    }
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

// python3 on PATH, or nothing.
std::optional<fs::path> find_python() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    fs::path dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    fs::path cand = dir / "python3";
    if (is_file(cand) && ::access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return std::nullopt;
}

int run_import(const std::vector<std::string>& argv) {
  Args a = parse_args("import", argv,
                      {{"--out", true, false},
                       {"--layout", true, false},
                       {"--dtype", true, false},
                       {"--name", true, false},
                       {"--force", false, false},
                       {"--report", false, false}},
                      1, 1);
  if (!a.has("--out") || a.get("--out").empty())
    usage_error("import", "--out DIR is required (the directory for NAME.json and its weights)");
  std::string layout = a.get("--layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    usage_error("import", fmt::format("--layout: expected NCHW or NHWC, found '{}'", layout));
  std::string dtype = a.get("--dtype");
  if (a.has("--dtype") && dtype != "f32" && dtype != "f16" && dtype != "bf16")
    usage_error("import", fmt::format("--dtype: expected f32, f16 or bf16, found '{}'", dtype));
  if (a.has("--name") && a.get("--name").empty())
    usage_error("import", "--name: expected a name, found an empty string");

  std::vector<std::string> looked;
  std::optional<fs::path> script = find_script(&looked);
  std::string places;
  for (const std::string& l : looked) places += "\n  " + l;
  KILN_CHECK(script.has_value(),
             "import: cannot find the converter package onnx2kiln; looked at:{}\n(it ships in "
             "the source tree as tools/onnx2kiln/ and installs as share/kiln/onnx2kiln/)",
             places);
  std::optional<fs::path> python = find_python();
  KILN_CHECK(python.has_value(),
             "import: python3 not found on PATH; 'kiln import' runs {} with python3 "
             "(and the packages in tools/requirements.txt: onnx, numpy)",
             script->string());

  std::vector<std::string> cmd = {python->string(), script->string(), a.positional[0],
                                  "--out",          a.get("--out"),   "--layout"};
  cmd.push_back(layout);
  if (a.has("--dtype")) {
    cmd.push_back("--dtype");
    cmd.push_back(dtype);
  }
  if (a.has("--name")) {
    cmd.push_back("--name");
    cmd.push_back(a.get("--name"));
  }
  if (a.has("--force")) cmd.push_back("--force");
  if (a.has("--report")) cmd.push_back("--report");
  std::vector<char*> cargv;
  for (std::string& s : cmd) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ);
  KILN_CHECK(rc == 0, "import: cannot start {}: {}", cmd[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) KILN_FAIL("import: waitpid on {} failed: {}", cmd[0], std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  fmt::print(stderr, "kiln: import: {} ended by signal {}\n", script->string(),
             WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return 1;
}

}  // namespace

KILN_CLI_COMMAND(
    onnx_import, "import", "convert an ONNX model to a kiln graph file and weights",
    "usage: kiln import MODEL.onnx --out DIR [--layout NCHW|NHWC] [--dtype f32|f16|bf16]\n"
    "                               [--name NAME] [--force] [--report]\n"
    "\n"
    "Writes DIR/NAME.json (a kiln graph file) and DIR/NAME.safetensors (the model's weights).\n"
    "Runs the tools/onnx2kiln package with python3, which needs the Python packages onnx and\n"
    "numpy (pip install -r tools/requirements.txt). See docs/ONNX.md for the supported ops.\n"
    "\n"
    "  --out DIR       output directory (created if missing)\n"
    "  --layout L      memory layout of 4-D inputs and conv filters: NCHW (default) or NHWC\n"
    "  --dtype D       store float inputs and weights as f32, f16 or bf16 (default: as in the\n"
    "                  model)\n"
    "  --name NAME     graph name and file stem (default: the model's graph name or file stem)\n"
    "  --force         convert even when DIR already holds this conversion: same model bytes,\n"
    "                  options and converter, outputs untouched (then 'up to date' is printed\n"
    "                  and nothing is rewritten)\n"
    "  --report        print the model's op histogram and what each ONNX op became (folded,\n"
    "                  kiln ops, fused, refused), also when the conversion fails\n"
    "\n"
    "Dynamic ONNX dims become kiln symbols (bind them with 'kiln run --shape' or from the\n"
    "inputs). Unsupported ops are listed all at once, by op type and node name (exit 2).\n",
    run_import);

}  // namespace kiln::cli
