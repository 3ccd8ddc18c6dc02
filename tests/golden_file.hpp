// Golden generated-source files (tests/golden/): the text a test generates must equal the
// committed file; UPDATE_GOLDEN=1 rewrites the file instead (and skips), for an intended change.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_paths.hpp"

namespace kiln::test {

// Compares `text` with tests/golden/<file>; a rewrite marks the test skipped (the assertions after
// the call still run).
inline void expect_golden(const std::string& file, const std::string& text) {
  const std::string path = std::string(kiln::testing::source_dir()) + "/tests/golden/" + file;
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path << " (run with UPDATE_GOLDEN=1 to create it)";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), text) << "generated code drifted from " << path
                            << "; if intended, rerun with UPDATE_GOLDEN=1 and review the diff";
}

}  // namespace kiln::test
