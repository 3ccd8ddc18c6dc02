# ctest Layering.WrongWayIncludeFailsToBuild: a heuristics source that includes a codegen header
# must fail to compile against the heuristics layer's view (build/layers/heuristics), naming the
# header, while a codegen source including a heuristics header compiles against codegen's view.
# -DCXX=compiler -DLAYERS=build/layers -DSRC=tests/layering
execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only -I${LAYERS}/codegen ${SRC}/codegen_includes_heuristics.cpp
  RESULT_VARIABLE ok_rc ERROR_VARIABLE ok_err)
if(NOT ok_rc EQUAL 0)
  message(FATAL_ERROR "the right-way include did not compile:\n${ok_err}")
endif()
execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only -I${LAYERS}/heuristics ${SRC}/heuristics_includes_codegen.cpp
  RESULT_VARIABLE bad_rc ERROR_VARIABLE bad_err)
if(bad_rc EQUAL 0)
  message(FATAL_ERROR "a heuristics source including codegen/writer.hpp compiled: the layer views do not enforce the order")
endif()
if(NOT bad_err MATCHES "codegen/writer.hpp")
  message(FATAL_ERROR "the wrong-way include failed for another reason:\n${bad_err}")
endif()
message(STATUS "wrong-way include refused: ${bad_err}")
