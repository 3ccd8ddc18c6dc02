// A test fixture for compile-only Engine tests: a fresh kernel-cache directory per test (also set
// as the env override, so nothing touches the user's cache) and EngineOptions that compile for
// sm_90 without loading kernels, so the tests run without a GPU.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/base/env.hpp"
#include "kiln/engine.hpp"

namespace kiln::testing {

class CompileOnlyEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("kiln-test-" +
         std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
         std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    EnvConfig c;
    c.cache_dir = dir_.string();
    set_env_override(&c);
  }
  void TearDown() override {
    set_env_override(nullptr);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EngineOptions opts() const {
    EngineOptions o;
    o.arch = "sm_90";
    o.load_kernels = false;
    o.cache_dir = dir_.string();
    return o;
  }
  std::filesystem::path dir_;
};

}  // namespace kiln::testing
