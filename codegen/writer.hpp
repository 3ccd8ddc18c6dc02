// A small indenting source writer for generated CUDA: every emitter builds its kernel through it.
//
//   Writer w;
//   w.open("extern \"C\" __global__ void k(const float* x) {");
//   w.line("int i = blockIdx.x * {} + threadIdx.x;", threads);
//   {
//     auto s = w.block("if (i < n) {");  // closed by the scope's destructor
//     w.line("y[i] = x[i];");
//   }
//   w.close();
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace kiln {

class Writer {
 public:
  explicit Writer(int indent_width = 2) : width_(indent_width) {}

  // One line at the current indentation (fmt syntax; braces in literal text are doubled).
  template <class... A>
  void line(fmt::format_string<A...> f, A&&... a) {
    put(fmt::format(f, std::forward<A>(a)...));
  }
  // One line taken verbatim (no fmt processing).
  void put(std::string_view text) {
    if (!text.empty()) out_.append(static_cast<size_t>(depth_ * width_), ' ');
    out_.append(text);
    out_.push_back('\n');
  }
  // Several lines verbatim, each indented at the current depth (a trailing newline is dropped).
  void raw(std::string_view text) {
    while (!text.empty()) {
      size_t nl = text.find('\n');
      put(text.substr(0, nl));
      if (nl == std::string_view::npos) break;
      text.remove_prefix(nl + 1);
    }
  }
  void blank() { out_.push_back('\n'); }

  // Writes `header` (normally ending in "{") and indents what follows.
  template <class... A>
  void open(fmt::format_string<A...> f, A&&... a) {
    put(fmt::format(f, std::forward<A>(a)...));
    ++depth_;
  }
  // Dedents and writes `trailer` ("}" by default; "};" or "} else {" also work).
  void close(std::string_view trailer = "}") {
    if (depth_ > 0) --depth_;
    put(trailer);
  }

  // Dedents, writes `text` and indents again: "} else {".
  void reopen(std::string_view text) {
    close(text);
    ++depth_;
  }

  // RAII scope: open(header) now, close() when the scope object dies.
  class Scope {
   public:
    Scope(Writer& w, std::string trailer) : w_(&w), trailer_(std::move(trailer)) {}
    Scope(Scope&& o) noexcept : w_(o.w_), trailer_(std::move(o.trailer_)) { o.w_ = nullptr; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (w_) w_->close(trailer_);
    }

   private:
    Writer* w_;
    std::string trailer_;
  };
  template <class... A>
  [[nodiscard]] Scope block(fmt::format_string<A...> f, A&&... a) {
    open("{}", fmt::format(f, std::forward<A>(a)...));
    return Scope(*this, "}");
  }

  int depth() const { return depth_; }
  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  int depth_ = 0;
  int width_;
};

}  // namespace kiln
