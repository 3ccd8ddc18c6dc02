// KILN_CHECK (user errors, located by the caller's context) and KILN_ASSERT (internal bugs).
#pragma once

#include <fmt/format.h>

#include "kiln/error.hpp"

namespace kiln::detail {
[[noreturn]] inline void fail_user(std::string msg) {
  throw Error(ErrorKind::User, std::move(msg));
}
[[noreturn]] inline void fail_internal(const char* file, int line, const char* cond,
                                       const std::string& msg) {
  throw Error(ErrorKind::Internal,
              fmt::format("internal error at {}:{}: {} ({})", file, line, msg, cond));
}
}  // namespace kiln::detail

// A user error: the message must say where (file, node, attribute) and what was expected/found.
#define KILN_CHECK(cond, ...)                                         \
  do {                                                                \
    if (!(cond)) ::kiln::detail::fail_user(fmt::format(__VA_ARGS__)); \
  } while (0)

#define KILN_FAIL(...) ::kiln::detail::fail_user(fmt::format(__VA_ARGS__))

// An internal invariant: failing it is a kiln bug.
#define KILN_ASSERT(cond, ...)                                                               \
  do {                                                                                       \
    if (!(cond))                                                                             \
      ::kiln::detail::fail_internal(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)
