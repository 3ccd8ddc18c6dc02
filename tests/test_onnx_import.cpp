// ONNX import: runs the Python tests of the tools/onnx2kiln package (tests/python) against this
// build's kiln CLI. They build small ONNX models, convert them, run them with `kiln run --device
// cpu` and compare with onnxruntime. Skipped (with the reason) when python3 with onnx,
// onnxruntime, numpy and pytest is not available (pip install -r tools/requirements.txt).
#include <gtest/gtest.h>

#include "tests/shell_util.hpp"
#include "tests/test_paths.hpp"

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int status = -1;
  std::string output;
};

// Runs a shell command, capturing stdout and stderr together.
Result shell(const std::string& cmd) {
  Result r;
  r.status = kiln::testing::run_shell(cmd, &r.output);
  return r;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(OnnxImport, PythonSuiteAgainstOnnxRuntime) {
  Result probe = shell("python3 -c 'import onnx, onnxruntime, numpy, pytest'");
  if (probe.status != 0) {
    std::string why = probe.output.empty() ? "python3 not found" : probe.output;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    if (size_t nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
    GTEST_SKIP() << "needs python3 with onnx, onnxruntime, numpy and pytest "
                    "(pip install -r tools/requirements.txt): "
                 << why;
  }
  std::string cmd =
      "cd " + quote(kiln::testing::source_dir()) +
      " && KILN_CLI=" + quote(kiln::testing::cli_path()) +
      " PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider tests/python"
      // The package's own tests need it installed: tools/test.sh installs it and runs them.
      " --ignore-glob='tests/python/test_package*'";
  Result r = shell(cmd);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.output;
  EXPECT_NE(r.output.find(" passed"), std::string::npos) << r.output;
}

}  // namespace
