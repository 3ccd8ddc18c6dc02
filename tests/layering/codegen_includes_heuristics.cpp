// Compiles in the codegen layer: heuristics is below it (the control of wrong_way.cmake).
#include "heuristics/schedule.hpp"
