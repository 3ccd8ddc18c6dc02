// `kiln`: the command line. Dispatches to the subcommands of the table in tools/cli_common.hpp
// and maps errors to exit statuses: 0 ok, 2 user error (bad arguments, bad files), 1 anything else.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/environment.hpp"
#include "kiln/error.hpp"
#include "tools/cli_common.hpp"

namespace {

using kiln::cli::Command;

void print_overview(std::FILE* f) {
  fmt::print(f,
             "kiln {}: a graph-based operation-fusion engine with JIT CUDA kernels\n\n"
             "usage: kiln <command> [arguments]\n"
             "       kiln <command> --help    help for one command\n"
             "       kiln --version\n\n"
             "commands:\n",
             KILN_VERSION);
  size_t w = 4;
  for (const Command& c : kiln::cli::commands()) w = std::max(w, std::string(c.name).size());
  for (const Command& c : kiln::cli::commands())
    fmt::print(f, "  {:<{}}  {}\n", c.name, w, c.summary);
  fmt::print(f, "  {:<{}}  {}\n", "help", w, "show this help, or `kiln help <command>`");
  fmt::print(f,
             "\nexit status: 0 success, 2 bad arguments or a bad graph/input file, 1 internal or "
             "driver error\n");
}

void print_command_help(const Command& c) {
  fmt::print("{}\n\n{}", c.summary, c.help);
  if (!std::string(c.help).empty() && std::string(c.help).back() != '\n') fmt::print("\n");
}

bool is_help(const std::string& a) {
  return a == "--help" || a == "-h";
}

int dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::string names;
    for (const Command& k : kiln::cli::commands())
      names += (names.empty() ? "" : ", ") + std::string(k.name);
    throw kiln::Error(kiln::ErrorKind::User,
                      fmt::format("expected a command ({}; see 'kiln --help')", names));
  }
  const std::string& cmd = args[0];
  if (is_help(cmd)) {
    print_overview(stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    fmt::print("kiln {}\n", KILN_VERSION);
    return 0;
  }
  if (cmd == "help") {
    if (args.size() == 1) {
      print_overview(stdout);
      return 0;
    }
    const Command* c = kiln::cli::find_command(args[1]);
    if (!c)
      throw kiln::Error(kiln::ErrorKind::User,
                        fmt::format("help: unknown command '{}' (see 'kiln --help')", args[1]));
    print_command_help(*c);
    return 0;
  }
  const Command* c = kiln::cli::find_command(cmd);
  if (!c) {
    std::string names;
    for (const Command& k : kiln::cli::commands())
      names += (names.empty() ? "" : ", ") + std::string(k.name);
    throw kiln::Error(
        kiln::ErrorKind::User,
        fmt::format("unknown command '{}' (commands: {}; see 'kiln --help')", cmd, names));
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& a : rest) {
    if (a == "--") break;
    if (is_help(a)) {
      print_command_help(*c);
      return 0;
    }
  }
  kiln::check_environment();  // a misspelled KILN_* variable fails before any work
  return c->handler(rest);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    int rc = dispatch(args);
    std::fflush(stdout);
    return rc;
  } catch (const kiln::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "kiln: {}\n", e.what());
    return e.kind() == kiln::ErrorKind::User ? 2 : 1;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "kiln: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "kiln: internal error: {}\n", e.what());
    return 1;
  } catch (...) {
    std::fflush(stdout);
    fmt::print(stderr, "kiln: internal error: unknown exception\n");
    return 1;
  }
}
