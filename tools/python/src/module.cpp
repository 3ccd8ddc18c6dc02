// kiln._kiln: the extension module. kiln's exceptions become the Python classes kiln.Error
// (base), kiln.UserError (also a ValueError: the caller can fix the input), kiln.InternalError
// (a kiln bug) and kiln.DriverError (CUDA driver or NVRTC), each carrying kiln's located message.
#include <nanobind/nanobind.h>

#include "bindings.hpp"

namespace kiln::py {

namespace {

PyObject* g_error = nullptr;
PyObject* g_user = nullptr;
PyObject* g_internal = nullptr;
PyObject* g_driver = nullptr;

PyObject* new_error(const char* name, const char* doc, PyObject* bases) {
  PyObject* cls = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (!cls) throw nb::python_error();
  return cls;
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = new_error("kiln.Error", "An error kiln raised; the message names where and what.",
                      PyExc_RuntimeError);
  nb::object user_bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_user = new_error("kiln.UserError",
                     "Bad input (graph, tensor, option): the message says where, what was "
                     "expected and what was found.",
                     user_bases.ptr());
  g_internal = new_error("kiln.InternalError", "A bug in kiln.", g_error);
  g_driver =
      new_error("kiln.DriverError",
                "A CUDA driver or NVRTC failure: the message names the call and its log.", g_error);
  m.attr("Error") = nb::handle(g_error);
  m.attr("UserError") = nb::handle(g_user);
  m.attr("InternalError") = nb::handle(g_internal);
  m.attr("DriverError") = nb::handle(g_driver);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* cls = e.kind() == ErrorKind::User       ? g_user
                      : e.kind() == ErrorKind::Internal ? g_internal
                                                        : g_driver;
      PyErr_SetString(cls, e.what());
    }
  });
}

}  // namespace kiln::py

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ library (the Python API is the kiln package around it)";
  m.attr("__version__") = KILN_VERSION;
  // The torch.compile backend's engines and compiled graphs live in dynamo's caches until the
  // interpreter exits, past the point where nanobind counts instances: its leak report would be
  // printed at the end of every program that used the backend.
  nanobind::set_leak_warnings(false);
  kiln::py::bind_errors(m);
  kiln::py::bind_graph(m);
  kiln::py::bind_engine(m);
  kiln::py::bind_reference(m);
}
