// The kiln command line: the subcommand table, argument parsing, and helpers shared by the
// subcommands (tools/cli_*.cpp).
//
// Adding a subcommand is one file, tools/cli_<name>.cpp, with a handler and one line:
//
//   KILN_CLI_COMMAND(plan, "plan", "show the fusion plan of a graph",
//                    "kiln plan GRAPH [--shape SYM=V ...]\n\n<longer help>", run_plan);
//
// Handlers take the arguments after the subcommand name and return the exit status; they report
// user errors by throwing kiln::Error (User) through KILN_CHECK/KILN_FAIL (tools/cli_error.hpp)
// or cli::usage_error, which the dispatcher turns into "kiln: <message>" and exit status 2. The
// CLI is a client of the public library: it includes only include/kiln/ headers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph.hpp"
#include "kiln/host_tensor.hpp"
#include "tools/cli_error.hpp"

namespace kiln::cli {

using Handler = int (*)(const std::vector<std::string>& args);

struct Command {
  const char* name;     // "run"
  const char* summary;  // one line for `kiln --help`
  const char* help;     // usage line(s) first, then details, for `kiln <name> --help`
  Handler handler;
};

// Adds a subcommand to the table (called from static initializers; returns true).
bool register_command(const Command& c);
// Every subcommand, sorted by name.
std::vector<Command> commands();
const Command* find_command(const std::string& name);

#define KILN_CLI_COMMAND(ident, name, summary, help, handler)      \
  [[maybe_unused]] static const bool kiln_cli_registered_##ident = \
      ::kiln::cli::register_command(::kiln::cli::Command{name, summary, help, handler})

// A user error about the command line itself: the message gets a pointer to `kiln <cmd> --help`.
[[noreturn]] void usage_error(const std::string& cmd, const std::string& message);

// ---- argument parsing ----

struct FlagSpec {
  std::string name;  // "--shape"
  bool takes_value = true;
  bool repeatable = false;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;  // flag -> values (one per use)

  bool has(const std::string& flag) const { return values.count(flag) != 0; }
  // The flag's value, or `def` when absent.
  std::string get(const std::string& flag, const std::string& def = {}) const;
  const std::vector<std::string>& all(const std::string& flag) const;
};

// Parses `--flag value`, `--flag=value` and positionals; unknown flags, missing values, a
// non-repeatable flag given twice, and a positional count outside [min_pos, max_pos] are usage
// errors of `cmd`. "--" ends the flags.
Args parse_args(const std::string& cmd, const std::vector<std::string>& args,
                const std::vector<FlagSpec>& flags, size_t min_pos, size_t max_pos);

// "123" -> 123 for a flag value; anything else (empty, trailing junk, out of range, below `min`)
// is a usage error naming the flag.
int64_t parse_int(const std::string& cmd, const std::string& flag, const std::string& value,
                  int64_t min);

// Parses --shape values ("N=8", also "N=8,seq=128") into bindings. Every symbol must be one of
// the graph's and every value a positive integer.
Bindings parse_shape_flags(const std::string& cmd, const std::vector<std::string>& values,
                           const Graph& g);

// ---- run inputs (shared by run, bench, ...) ----

struct InputOptions {
  std::string inputs_file;               // --inputs: every tensor by its input name
  std::vector<std::string> input_flags;  // --input NAME=FILE (key NAME or the file's only tensor)
  Bindings shapes;                       // --shape
  uint64_t seed = 1;                     // --seed: random inputs
  int64_t int_lo = 0, int_hi = 16;       // --int-range LO:HI: random i32/i64 inputs in [LO, HI)
};

// Parses --int-range LO:HI (LO < HI, both within +-2^53) into `o`; a usage error otherwise.
void parse_int_range(const std::string& cmd, const std::string& value, InputOptions* o);

struct PreparedInputs {
  std::map<std::string, HostTensor> tensors;  // every graph input, by name
  std::map<std::string, std::string> origin;  // input -> "file.safetensors[key]" or "random"
  Bindings bindings;                          // every symbol of the graph
};

// Reads the given inputs, binds every symbol, and fills the rest with seeded normal(0, 1) values
// (in the input's declared dtype and layout): integer inputs with uniform integers in
// [int_lo, int_hi), bool inputs with 0/1 each of probability 1/2. Each input's random stream
// depends only on the seed and its name.
PreparedInputs prepare_inputs(const std::string& cmd, const Graph& g, const InputOptions& o);

// ---- printing ----

// FNV-1a 64 of the tensor's bytes in row-major logical order (what a safetensors file holds).
uint64_t fnv1a64(const HostTensor& t);

struct TensorStats {
  double min = 0, max = 0, mean = 0;
  int64_t nan = 0, inf = 0;
};
TensorStats tensor_stats(const HostTensor& t);

// "1, 256, 56, 56" -> "[1, 256, 56, 56]".
std::string dims_str(const std::vector<int64_t>& shape);

}  // namespace kiln::cli
