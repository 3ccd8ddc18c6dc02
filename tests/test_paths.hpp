// Where the tests find the build tree, the kiln CLI and the source tree's data (examples, golden
// files, bad graphs): from the running test binary's own location, so a build carried to another
// machine or checkout path finds its data without a link to the path it was configured at.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::testing {

// The directory of the running test binary (the build tree).
inline const std::string& build_dir() {
  static const std::string dir = [] {
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(KILN_CONFIGURED_BUILD_DIR) : exe.parent_path().string();
  }();
  return dir;
}

// The nearest ancestor of the build tree that is a kiln source tree, else the configured one (a
// build tree outside its sources).
inline const std::string& source_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (fs::path d = build_dir(); !d.empty(); d = d.parent_path()) {
      if (fs::exists(d / "tools" / "layers.txt", ec) && fs::exists(d / "examples" / "graphs", ec))
        return d.string();
      if (d == d.parent_path()) break;
    }
    return std::string(KILN_CONFIGURED_SOURCE_DIR);
  }();
  return dir;
}

// The kiln CLI of this build.
inline std::string cli_path() {
  return build_dir() + "/kiln";
}

}  // namespace kiln::testing
