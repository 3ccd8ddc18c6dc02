// Must not compile in the heuristics layer: codegen is above it (tests/layering/wrong_way.cmake).
#include "codegen/writer.hpp"
