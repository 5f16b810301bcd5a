# Fails when a program of tools/ includes a private header: one of src/
# rather than of include/frs/ (docs/architecture.md, "The public face").
#
#   cmake -DSOURCE_DIR=<the source tree> -P tools/check_public_includes.cmake
#
# frsbench and frsctl build against include/ alone (frs_public), so the
# compiler refuses a private header too (Tools.PrivateIncludeDoesNotCompile);
# this names every one at once, with the file that includes it.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=DIR -P check_public_includes.cmake")
endif()

file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/tools/*.cc ${SOURCE_DIR}/tools/*.h ${SOURCE_DIR}/tools/*.c)
set(errors "")
set(n 0)
foreach(f ${files})
  file(STRINGS ${SOURCE_DIR}/${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(inc ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${inc}")
    math(EXPR n "${n} + 1")
    if(EXISTS ${SOURCE_DIR}/src/${header})
      string(APPEND errors "  ${f} includes the private header ${header} (src/${header}): "
                           "include/frs/ must publish what it needs\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "tools/ includes private headers:\n${errors}")
endif()
message(STATUS "tools/: ${n} quoted includes, none of src/")
