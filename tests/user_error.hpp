// The message of the kiln::Error(User) that `f` throws; a test failure (and "") when it throws
// nothing, another kind, or a non-kiln exception.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>

#include "kiln/error.hpp"

namespace kiln::test {

inline std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected kiln::Error, got std::exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a user error";
  return "";
}

}  // namespace kiln::test
