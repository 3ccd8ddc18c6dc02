// The CLI's located errors, on kiln::Error (kiln/error.hpp): the same macros and meaning as the
// library's internal engine/base/check.hpp, which the CLI, a client of the public headers only,
// does not see. The dispatcher (tools/kiln_main.cpp) prints "kiln: <message>" and exits 2 for a
// user error, 1 for anything else.
#pragma once

#include <fmt/format.h>

#include <string>

#include "kiln/error.hpp"

namespace kiln::cli::detail {
[[noreturn]] inline void fail_user(std::string msg) {
  throw Error(ErrorKind::User, std::move(msg));
}
[[noreturn]] inline void fail_internal(const char* file, int line, const char* cond,
                                       const std::string& msg) {
  throw Error(ErrorKind::Internal,
              fmt::format("internal error at {}:{}: {} ({})", file, line, msg, cond));
}
}  // namespace kiln::cli::detail

// A user error: the message says where (file, flag, input) and what was expected and found.
#define KILN_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) ::kiln::cli::detail::fail_user(fmt::format(__VA_ARGS__)); \
  } while (0)

#define KILN_FAIL(...) ::kiln::cli::detail::fail_user(fmt::format(__VA_ARGS__))

// An invariant of the CLI itself: failing it is a kiln bug.
#define KILN_ASSERT(cond, ...)                                                                    \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::kiln::cli::detail::fail_internal(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)
