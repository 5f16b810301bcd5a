# Fails when a program of tools/ includes a private header: one of src/
# rather than of include/frs/ (docs/architecture.md, "The public face").
#
#   cmake -DSOURCE_DIR=<the source tree> -P tools/check_public_includes.cmake
#
# frsbench and frsctl build against include/ alone (frs_public), so the
# compiler refuses a private header there too, but in the .cc files of
# frsctl listed, file by file, in tools/frsctl/private_includes.txt: those
# get src/ (tools/frsctl/CMakeLists.txt). A listed include that is gone fails
# as well, so the list only shrinks: delete its line. A header of tools/ is
# never listed: every file that includes it would need src/.
cmake_minimum_required(VERSION 3.25)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=DIR -P check_public_includes.cmake")
endif()
set(allow_file ${SOURCE_DIR}/tools/frsctl/private_includes.txt)
set(allowed "")
if(EXISTS ${allow_file})
  file(STRINGS ${allow_file} lines)
  foreach(line ${lines})
    if(line MATCHES "^[ \t]*(#|$)")
      continue()
    endif()
    string(STRIP "${line}" line)
    list(APPEND allowed "${line}")
  endforeach()
endif()

file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/tools/*.cc ${SOURCE_DIR}/tools/*.h ${SOURCE_DIR}/tools/*.c)
set(errors "")
set(seen "")
foreach(f ${files})
  file(STRINGS ${SOURCE_DIR}/${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  foreach(inc ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${inc}")
    if(NOT EXISTS ${SOURCE_DIR}/src/${header})
      continue()  # include/frs/, or a header of the tool's own folder
    endif()
    set(entry "${f} ${header}")
    list(APPEND seen "${entry}")
    if(NOT f MATCHES "\\.cc$")
      string(APPEND errors "  ${f} includes the private header ${header} (src/${header}): a header of tools/ "
                           "may include only include/frs/ and its own folder's\n")
    elseif(NOT entry IN_LIST allowed)
      string(APPEND errors "  ${f} includes the private header ${header} (src/${header}): "
                           "include/frs/ must publish what it needs\n")
    endif()
  endforeach()
endforeach()
foreach(entry ${allowed})
  if(NOT entry IN_LIST seen)
    string(APPEND errors "  tools/frsctl/private_includes.txt lists \"${entry}\", which is no longer "
                         "included: delete the line\n")
  endif()
endforeach()
if(errors)
  message(FATAL_ERROR "tools/ includes private headers:\n${errors}")
endif()
list(LENGTH seen n)
message(STATUS "tools/: ${n} private includes, all listed in tools/frsctl/private_includes.txt")
