// The parts of the kiln._kiln module, each bound in its own file (module.cpp calls them).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "kiln/error.hpp"

// A user error raised from the bindings themselves (a kiln::Error, so it maps like kiln's own).
#define KILN_PY_CHECK(cond, msg)                                      \
  do {                                                                \
    if (!(cond)) throw ::kiln::Error(::kiln::ErrorKind::User, (msg)); \
  } while (0)

namespace kiln::py {

namespace nb = nanobind;

void bind_errors(nb::module_& m);     // module.cpp: kiln::Error -> kiln.UserError/...
void bind_graph(nb::module_& m);      // graph_py.cpp
void bind_engine(nb::module_& m);     // engine_py.cpp
void bind_reference(nb::module_& m);  // reference_py.cpp: run_reference, explain, environment

}  // namespace kiln::py
