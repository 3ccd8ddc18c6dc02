// The KILN_* environment registry: parsing, list items, and rejection messages.
#include <gtest/gtest.h>

#include "engine/base/env.hpp"
#include "heuristics/schedule.hpp"
#include "kiln/error.hpp"
#include "tests/user_error.hpp"

using namespace kiln;

namespace {
std::string user_error(const std::map<std::string, std::string>& vars) {
  return test::user_error([&] { parse_env(vars); });
}
}  // namespace

TEST(Env, EmptyIsAllDefaults) {
  EnvConfig c = parse_env({});
  EXPECT_FALSE(c.dump_plan || c.dump_cuda || c.dump_ptx || c.dump_launch);
  EXPECT_FALSE(c.disable_fusion || c.disable_autotune || c.disable_disk_cache);
  EXPECT_TRUE(c.cache_dir.empty());
}

TEST(Env, ParsesListsAndPath) {
  EnvConfig c = parse_env({{"KILN_DUMP", "plan, launch"},
                           {"KILN_DISABLE", "disk_cache,fusion,"},
                           {"KILN_CACHE_DIR", "/some/dir"},
                           {"HOME", "/root"},
                           {"PATH", "/bin"}});
  EXPECT_TRUE(c.dump_plan);
  EXPECT_TRUE(c.dump_launch);
  EXPECT_FALSE(c.dump_cuda);
  EXPECT_FALSE(c.dump_ptx);
  EXPECT_FALSE(c.dump_partition);
  EXPECT_TRUE(parse_env({{"KILN_DUMP", "partition"}}).dump_partition);
  EXPECT_TRUE(c.disable_fusion);
  EXPECT_TRUE(c.disable_disk_cache);
  EXPECT_FALSE(c.disable_autotune);
  EXPECT_EQ(c.cache_dir, "/some/dir");

  EnvConfig all = parse_env(
      {{"KILN_DUMP", "plan,cuda,ptx,launch"}, {"KILN_DISABLE", "fusion,autotune,disk_cache"}});
  EXPECT_TRUE(all.dump_plan && all.dump_cuda && all.dump_ptx && all.dump_launch);
  EXPECT_TRUE(all.disable_fusion && all.disable_autotune && all.disable_disk_cache);
  EXPECT_FALSE(parse_env({{"KILN_DUMP", ""}}).dump_plan);
}

TEST(Env, ListsUnknownVariablesInsteadOfRefusingThem) {
  // Another tool may own a KILN_* name: it is listed (env() warns once), never an error.
  EnvConfig c = parse_env({{"KILN_DUMPS", "plan"}, {"KILN_DUMP", "plan"}, {"KILN_ZZZ", ""}});
  EXPECT_TRUE(c.dump_plan);
  EXPECT_EQ(c.unknown, (std::vector<std::string>{"KILN_DUMPS", "KILN_ZZZ"}));
  std::string names = env_variable_names();
  for (const char* n : {"KILN_DUMP,", "KILN_DISABLE", "KILN_CACHE_DIR", "KILN_MEMORY_BUDGET"})
    EXPECT_NE(names.find(n), std::string::npos) << n;
}

TEST(Env, MemoryBudgetInBytesOrPercent) {
  EXPECT_EQ(parse_env({{"KILN_MEMORY_BUDGET", "8G"}}).memory_budget, uint64_t{8} << 30);
  EXPECT_EQ(parse_env({{"KILN_MEMORY_BUDGET", "512MiB"}}).memory_budget, uint64_t{512} << 20);
  EXPECT_EQ(parse_env({{"KILN_MEMORY_BUDGET", "1000"}}).memory_budget, 1000u);
  EXPECT_DOUBLE_EQ(parse_env({{"KILN_MEMORY_BUDGET", "75%"}}).memory_budget_fraction, 0.75);
  EXPECT_EQ(parse_env({{"KILN_MEMORY_BUDGET", ""}}).memory_budget, 0u);  // empty: the default
  for (const char* bad : {"0", "8X", "-1", "150%", "0%", "G", "99999999999T"}) {
    std::string m = user_error({{"KILN_MEMORY_BUDGET", bad}});
    EXPECT_NE(m.find("KILN_MEMORY_BUDGET="), std::string::npos) << bad << ": " << m;
  }
}

TEST(Env, RejectsUnknownListItemsListingValidOnes) {
  std::string m = user_error({{"KILN_DUMP", "plan,sass"}});
  EXPECT_NE(m.find("KILN_DUMP=plan,sass"), std::string::npos) << m;
  EXPECT_NE(m.find("'sass'"), std::string::npos) << m;
  EXPECT_NE(m.find("plan, cuda, ptx, launch"), std::string::npos) << m;

  m = user_error({{"KILN_DISABLE", "Fusion"}});  // case matters
  EXPECT_NE(m.find("'Fusion'"), std::string::npos) << m;
  EXPECT_NE(m.find("fusion, autotune, disk_cache"), std::string::npos) << m;
}

TEST(Env, OverrideReplacesProcessEnvironment) {
  EnvConfig c;
  c.dump_launch = true;
  c.cache_dir = "/x";
  set_env_override(&c);
  EXPECT_TRUE(env().dump_launch);
  EXPECT_EQ(dump_dir(), "/x");
  set_env_override(nullptr);
  EXPECT_NE(&env(), nullptr);
}

TEST(Env, ScheduleOverridesAreValidatedWhenParsed) {
  EXPECT_EQ(parse_env({{"KILN_SCHEDULE", "pointwise.vecs=2, rownorm.threads=256"}}).schedule,
            "pointwise.vecs=2, rownorm.threads=256");
  // env keeps the text; the heuristics layer, which owns the keys, parses it.
  auto schedule_error = [](const std::string& value) {
    EnvConfig cfg = parse_env({{"KILN_SCHEDULE", value}});
    set_env_override(&cfg);
    std::string m = test::user_error([] { env_schedule_overrides(); });
    set_env_override(nullptr);
    return m;
  };
  std::string m = schedule_error("rownorm.threads=300");
  EXPECT_NE(m.find("KILN_SCHEDULE=rownorm.threads=300"), std::string::npos) << m;
  EXPECT_NE(m.find("power of two"), std::string::npos) << m;
  m = schedule_error("pointwise.vec=2");
  EXPECT_NE(m.find("unknown key 'pointwise.vec'"), std::string::npos) << m;
  EXPECT_NE(m.find("pointwise.vecs (1..8)"), std::string::npos) << m;  // the valid keys
}
