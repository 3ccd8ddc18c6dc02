// The fuzzers' hostile-input regression corpus (tests/fuzz/make_corpus.py, issue 24), replayed in
// the CPU suite without libFuzzer: each file loads or is refused with one user error, as named.
#include <gtest/gtest.h>

#include <set>

#include "engine/ir/json_io.hpp"
#include "kiln/io.hpp"
#include "tests/hostile_util.hpp"
#include "tests/test_paths.hpp"

using namespace kiln;
using namespace kiln::hostile;

namespace {

fs::path corpus(const std::string& target) {
  return fs::path(kiln::testing::source_dir()) / "tests" / "fuzz" / "corpus" / target;
}

// "loaded", or the user error's message.
std::string outcome(const std::function<void()>& f) {
  try {
    f();
    return "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::User) << e.what();
    return e.what();
  }
}

}  // namespace

TEST(FuzzCorpus, GraphLoaderCasesLoadOrAreRefused) {
  const std::set<std::string> loads = {"hostile_deep_255.json", "hostile_many_objects.json",
                                       "hostile_chain_2000.json", "hostile_huge_init.json",
                                       "hostile_init_at_limit.json"};
  int n = 0;
  for (const auto& e : fs::directory_iterator(corpus("graph_loader"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("hostile_", 0) != 0) continue;
    ++n;
    std::string r = outcome([&] { load_graph_string(read_all(e.path()), name, "."); });
    if (loads.count(name))
      EXPECT_EQ(r, "loaded") << name;
    else
      EXPECT_EQ(r.rfind(name, 0), 0u) << name << ": " << r;  // located: the file first
  }
  EXPECT_GE(n, 11);
}

TEST(FuzzCorpus, SafetensorsCasesParseOrAreRefused) {
  const std::set<std::string> parses = {"hostile_many_entries.bin", "hostile_many_metadata.bin",
                                        "hostile_space_padding.bin", "hostile_good.bin"};
  TempDir d;
  int n = 0;
  for (const auto& e : fs::directory_iterator(corpus("safetensors"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("hostile_", 0) != 0) continue;
    ++n;
    const std::string bytes = read_all(e.path());
    ASSERT_FALSE(bytes.empty()) << name;
    const fs::path p = d / (name + ".safetensors");
    write_raw_safetensors(p, bytes.substr(1),
                          std::string(size_t{static_cast<unsigned char>(bytes[0])} * 16, '\0'));
    std::string r = outcome([&] { SafetensorsFile f(p.string()); });
    if (parses.count(name))
      EXPECT_EQ(r, "loaded") << name;
    else
      EXPECT_EQ(r.rfind(p.string(), 0), 0u) << name << ": " << r;
  }
  EXPECT_GE(n, 10);
}
