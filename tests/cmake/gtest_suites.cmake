# One ctest test per GoogleTest suite (the first name of TEST and TEST_F), not
# one per TEST. CMake's own gtest_discover_tests() starts the program once per
# TEST: about 600 starts of sanitized programs, and a suite whose fixture
# shares one frsd between its TESTs (SetUpTestSuite) started it once per TEST.
#
# The function below takes gtest_discover_tests()'s name and arguments, so
# every tests/ folder, and a program added later, is registered this way
# without an edit: TEST_PREFIX, TEST_SUFFIX, EXTRA_ARGS, WORKING_DIRECTORY,
# DISCOVERY_TIMEOUT and PROPERTIES as CMake documents them; TIMEOUT in
# PROPERTIES is each TEST's, and a suite gets it once per TEST it holds.
# One more keyword, LONG_SUITES Suite[:N]...: the suites that take long (each
# TEST a few programs started, killed, restarted), which ctest starts first
# (property COST) instead of last, and, with :N, runs as N tests side by
# side, GoogleTest's shards ("Suite.1of4": GTEST_SHARD_INDEX/TOTAL_SHARDS).
#
# What a suite's test prints names each TEST ("[  FAILED  ] Suite.Test");
# each run also writes GoogleTest's XML report to <build>/gtest-xml/, where
# tools/check_skips.py finds a GTEST_SKIP inside a suite that passed.
# One TEST: the program itself, e.g.
#   build-asan/tests/store/store_test --gtest_filter=StoreCrash.KillNineThenReopenKeepsEveryNode
set(FRS_GTEST_XML_DIR ${PROJECT_BINARY_DIR}/gtest-xml)
set(_frs_gtest_list_script ${CMAKE_CURRENT_LIST_DIR}/gtest_list_suites.cmake)

function(gtest_discover_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TEST_PREFIX;TEST_SUFFIX;DISCOVERY_TIMEOUT;WORKING_DIRECTORY"
                        "EXTRA_ARGS;PROPERTIES;LONG_SUITES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "gtest_discover_tests(${target}): not taken here: ${arg_UNPARSED_ARGUMENTS}"
                        " (tests/cmake/gtest_suites.cmake)")
  endif()
  if(NOT arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 30)
  endif()
  if(NOT arg_WORKING_DIRECTORY)
    set(arg_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  # TIMEOUT is scaled by the suite's size at discovery; the rest is passed on.
  set(timeout "")
  set(props "")
  list(LENGTH arg_PROPERTIES n)
  set(i 0)
  while(i LESS n)
    list(GET arg_PROPERTIES ${i} key)
    math(EXPR j "${i} + 1")
    list(GET arg_PROPERTIES ${j} value)
    if(key STREQUAL "TIMEOUT")
      set(timeout ${value})
    else()
      string(APPEND props " [==[${key}]==] [==[${value}]==]")
    endif()
    math(EXPR i "${i} + 2")
  endwhile()
  set(extra "")
  foreach(a ${arg_EXTRA_ARGS})
    string(APPEND extra " [==[${a}]==]")
  endforeach()
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake)
  # Read by ctest: the program lists its suites when it, this file or the
  # listing script is newer than the list (the sanitized builds list in their
  # own runtime, as CMake's PRE_TEST mode does).
  file(GENERATE OUTPUT ${include_file} CONTENT "\
set(_frs_exe [==[$<TARGET_FILE:${target}>]==])
if(EXISTS \"\${_frs_exe}\")
  if(NOT EXISTS [==[${list_file}]==] OR \"\${_frs_exe}\" IS_NEWER_THAN [==[${list_file}]==]
     OR \"\${CMAKE_CURRENT_LIST_FILE}\" IS_NEWER_THAN [==[${list_file}]==]
     OR [==[${_frs_gtest_list_script}]==] IS_NEWER_THAN [==[${list_file}]==])
    set(_frs_target [==[${target}]==])
    set(_frs_out [==[${list_file}]==])
    set(_frs_prefix [==[${arg_TEST_PREFIX}]==])
    set(_frs_suffix [==[${arg_TEST_SUFFIX}]==])
    set(_frs_timeout [==[${timeout}]==])
    set(_frs_discovery_timeout [==[${arg_DISCOVERY_TIMEOUT}]==])
    set(_frs_workdir [==[${arg_WORKING_DIRECTORY}]==])
    set(_frs_xml_dir [==[${FRS_GTEST_XML_DIR}]==])
    set(_frs_props [===[${props}]===])
    set(_frs_extra [==[${extra}]==])
    set(_frs_long [==[${arg_LONG_SUITES}]==])
    include([==[${_frs_gtest_list_script}]==])
  endif()
  include([==[${list_file}]==])
else()
  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

# frs_tsan_tests(TARGET FILTER): the TESTs of TARGET that start threads, one
# ctest test labelled "tsan" (tools/test.sh's ThreadSanitizer stage builds
# the programs named here, target frs_tsan_programs, and runs that label
# only). The ASan stage runs them with the rest of their program. A TEST
# that starts threads, added to one of these programs, is added to FILTER.
add_custom_target(frs_tsan_programs)
function(frs_tsan_tests target filter)
  add_test(NAME tsan.${target} COMMAND ${target} --gtest_filter=${filter}
                                       --gtest_output=xml:${FRS_GTEST_XML_DIR}/${target}@tsan.@threads.xml)
  set_tests_properties(tsan.${target} PROPERTIES LABELS tsan TIMEOUT 300)
  add_dependencies(frs_tsan_programs ${target})
endfunction()
