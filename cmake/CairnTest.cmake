# cairn_test(NAME SOURCES... [LIBS ...] [COST N]): one line per GoogleTest binary.
# COST: ctest starts tests of a higher cost first (long crash shares, so that
# `ctest -j` does not end on one of them alone).
include(GoogleTest)
function(cairn_test name)
  cmake_parse_arguments(T "" "COST" "LIBS" ${ARGN})
  if(NOT T_COST)
    set(T_COST 0)
  endif()
  add_executable(${name} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE cairn cairn_warnings GTest::gtest GTest::gtest_main nlohmann_json::nlohmann_json
                                        ${T_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600 COST ${T_COST})
endfunction()
