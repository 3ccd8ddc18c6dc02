// The one exception type kiln throws across its C++ API.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

enum class ErrorKind {
  User,      // bad graph, bad input, unsupported combination: the caller can fix it (CLI exit 2)
  Internal,  // a kiln bug (CLI exit 1)
  Driver,    // CUDA driver or NVRTC failure (CLI exit 1); message carries call, log, source path
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace kiln
