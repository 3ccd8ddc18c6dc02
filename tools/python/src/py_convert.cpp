#include "py_convert.hpp"

#include <nanobind/stl/string.h>

#include <cstring>

#include "kiln/error.hpp"

namespace kiln::py {

namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw Error(ErrorKind::User, msg);
}

std::string py_type_name(const nb::handle& h) {
  return nb::cast<std::string>(nb::str(h.type().attr("__name__")));
}

// Python bools are ints: test them first.
bool is_int(const nb::handle& h) {
  return PyLong_Check(h.ptr()) != 0;
}

}  // namespace

DType dtype_from(const std::string& name, const std::string& where) {
  DType t;
  if (!parse_dtype(name, &t))
    fail(where + ": unknown dtype '" + name + "' (expected f32, f16, bf16, i32, i64 or bool)");
  return t;
}

Layout layout_from(const std::string& name, const std::string& where) {
  if (name == "NCHW" || name == "row_major" || name.empty()) return Layout::NCHW;
  if (name == "NHWC") return Layout::NHWC;
  fail(where + ": unknown layout '" + name + "' (expected NCHW or NHWC)");
}

Shape shape_from(const nb::handle& seq, const std::string& where) {
  if (!PySequence_Check(seq.ptr()) || PyUnicode_Check(seq.ptr()))
    fail(where + ": expected a list of dims (ints or symbol names), found " + py_type_name(seq));
  Shape s;
  size_t i = 0;
  for (nb::handle d : seq) {
    std::string at = where + "[" + std::to_string(i++) + "]";
    if (is_int(d) && !PyBool_Check(d.ptr()))
      s.emplace_back(nb::cast<int64_t>(d));
    else if (PyUnicode_Check(d.ptr()))
      s.push_back(parse_dim(nb::cast<std::string>(d), at));
    else
      fail(at + ": expected an int or a symbol name, found " + py_type_name(d));
  }
  return s;
}

nb::list shape_to(const Shape& s) {
  nb::list out;
  for (const Dim& d : s) {
    if (d.is_static())
      out.append(nb::int_(d.value()));
    else
      out.append(nb::str(d.str().c_str()));
  }
  return out;
}

namespace {

AttrValue list_attr(const nb::handle& seq, const std::string& where) {
  bool any_str = false, any_float = false;
  for (nb::handle v : seq) {
    if (PyUnicode_Check(v.ptr()))
      any_str = true;
    else if (PyFloat_Check(v.ptr()))
      any_float = true;
    else if (!is_int(v))
      fail(where + ": expected a list of ints, numbers or dims, found an element of type " +
           py_type_name(v));
  }
  if (any_str && any_float) fail(where + ": a list mixes numbers and dim names");
  if (any_str) return shape_from(seq, where);
  if (any_float) {
    std::vector<double> out;
    for (nb::handle v : seq) out.push_back(nb::cast<double>(v));
    return out;
  }
  std::vector<int64_t> out;
  for (nb::handle v : seq) out.push_back(nb::cast<int64_t>(v));
  return out;
}

}  // namespace

Attrs attrs_from(const nb::handle& dict, const std::string& where) {
  Attrs out;
  if (dict.is_none()) return out;
  if (!PyDict_Check(dict.ptr()))
    fail(where + ": attributes must be a dict, found " + py_type_name(dict));
  for (auto [k, v] : nb::borrow<nb::dict>(dict)) {
    if (!PyUnicode_Check(k.ptr())) fail(where + ": attribute names must be strings");
    std::string name = nb::cast<std::string>(k);
    std::string at = where + "." + name;
    if (is_int(v))
      out[name] = nb::cast<int64_t>(v);
    else if (PyFloat_Check(v.ptr()))
      out[name] = nb::cast<double>(v);
    else if (PyUnicode_Check(v.ptr()))
      out[name] = nb::cast<std::string>(v);
    else if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()))
      out[name] = list_attr(v, at);
    else
      fail(at + ": unsupported attribute value of type " + py_type_name(v));
  }
  return out;
}

nb::object attr_to(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return nb::int_(*i);
  if (const auto* d = std::get_if<double>(&v)) return nb::float_(*d);
  if (const auto* s = std::get_if<std::string>(&v)) return nb::str(s->c_str());
  nb::list out;
  if (const auto* iv = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t x : *iv) out.append(nb::int_(x));
  if (const auto* dv = std::get_if<std::vector<Dim>>(&v)) return shape_to(*dv);
  if (const auto* fv = std::get_if<std::vector<double>>(&v))
    for (double x : *fv) out.append(nb::float_(x));
  return out;
}

HostTensor host_tensor_from(DType dtype, const std::vector<int64_t>& shape, const nb::handle& buf,
                            const std::string& where) {
  Py_buffer view;
  if (PyObject_GetBuffer(buf.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    fail(where + ": expected a C-contiguous buffer (a numpy array), found " + py_type_name(buf));
  }
  HostTensor t = HostTensor::zeros(dtype, shape);
  size_t want = t.data.size();
  size_t got = static_cast<size_t>(view.len);
  if (got != want) {
    PyBuffer_Release(&view);
    fail(where + ": expected " + std::to_string(want) + " bytes for " + dtype_name(dtype) +
         " data of " + std::to_string(t.numel()) + " elements, found " + std::to_string(got));
  }
  if (want) std::memcpy(t.data.data(), view.buf, want);
  PyBuffer_Release(&view);
  return t;
}

nb::tuple host_tensor_to(const HostTensor& t) {
  HostTensor relaid;
  const HostTensor* rm = &t;
  if (!t.is_row_major()) {
    relaid = t.relayout(Layout::NCHW);
    rm = &relaid;
  }
  nb::list shape;
  for (int64_t d : rm->shape) shape.append(nb::int_(d));
  nb::bytes data(reinterpret_cast<const char*>(rm->data.data()), rm->data.size());
  return nb::make_tuple(nb::str(dtype_name(t.dtype)), shape, data);
}

}  // namespace kiln::py
