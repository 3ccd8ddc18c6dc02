// Conversions between Python values and kiln's public types, for the bindings of kiln._kiln:
// attribute dicts, shapes, dtypes and layouts by their graph-file names, and host tensors from
// and to Python buffers (numpy arrays). Every bad value is a kiln::Error(User) naming `where`.
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "kiln/graph.hpp"

namespace kiln::py {

namespace nb = nanobind;

DType dtype_from(const std::string& name, const std::string& where);
Layout layout_from(const std::string& name, const std::string& where);
// A list of ints and dim texts ("N", "N*S").
Shape shape_from(const nb::handle& seq, const std::string& where);
// Static dims as ints, symbolic ones as their canonical text.
nb::list shape_to(const Shape& s);
// A dict of attribute values: int/bool, float, str, and lists of ints, of numbers, or of ints and
// dim texts.
Attrs attrs_from(const nb::handle& dict, const std::string& where);
nb::object attr_to(const AttrValue& v);

// A tensor of `dtype` and logical `shape` from a C-contiguous buffer holding exactly its bytes in
// row-major logical order (numpy's tobytes() order), copied.
HostTensor host_tensor_from(DType dtype, const std::vector<int64_t>& shape, const nb::handle& buf,
                            const std::string& where);
// (dtype name, shape, bytes in row-major logical order).
nb::tuple host_tensor_to(const HostTensor& t);

}  // namespace kiln::py
