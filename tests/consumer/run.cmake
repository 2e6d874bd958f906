# Install the build tree into a scratch prefix, then configure, build and run the consumer
# project against it. Invoked by the ctest test consumer:find_package with cmake -P.
# Inputs: IOATTN_BUILD_DIR IOATTN_PREFIX CONSUMER_SOURCE_DIR CONSUMER_BINARY_DIR
#         CONSUMER_GENERATOR CONSUMER_CXX_COMPILER CONSUMER_BUILD_TYPE CONSUMER_SANITIZE
#         CONSUMER_PYTHON CONSUMER_PYTHONPATH (optional: import the installed Python package)

foreach(var IOATTN_BUILD_DIR IOATTN_PREFIX CONSUMER_SOURCE_DIR CONSUMER_BINARY_DIR
            CONSUMER_GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: ${var} is not set")
  endif()
endforeach()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${name} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${IOATTN_PREFIX} ${CONSUMER_BINARY_DIR})

step(install ${CMAKE_COMMAND} --install ${IOATTN_BUILD_DIR} --prefix ${IOATTN_PREFIX})

# installed headers include no private one: no quoted includes, and every <ioattn/...> they
# include is installed too
file(GLOB_RECURSE installed ${IOATTN_PREFIX}/include/ioattn/*.hpp)
foreach(header IN LISTS installed)
  file(STRINGS ${header} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS includes)
    if(line MATCHES "#[ \t]*include[ \t]*\"")
      message(FATAL_ERROR "consumer test: ${header} includes a private header: ${line}")
    endif()
    if(line MATCHES "<(ioattn/[^>]+)>" AND NOT EXISTS ${IOATTN_PREFIX}/include/${CMAKE_MATCH_1})
      message(FATAL_ERROR "consumer test: ${header} includes ${CMAKE_MATCH_1}, not installed")
    endif()
  endforeach()
endforeach()
list(LENGTH installed n_installed)
message(STATUS "consumer test: ${n_installed} installed headers include no private header")

set(args -S ${CONSUMER_SOURCE_DIR} -B ${CONSUMER_BINARY_DIR} -G ${CONSUMER_GENERATOR}
         -DCMAKE_PREFIX_PATH=${IOATTN_PREFIX})
if(CONSUMER_CXX_COMPILER)
  list(APPEND args -DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER})
endif()
if(CONSUMER_BUILD_TYPE)
  list(APPEND args -DCMAKE_BUILD_TYPE=${CONSUMER_BUILD_TYPE})
endif()
if(CONSUMER_SANITIZE)
  # the installed static library was built with sanitizers: link their runtimes too
  list(APPEND args "-DCMAKE_CXX_FLAGS=-fsanitize=${CONSUMER_SANITIZE}"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${CONSUMER_SANITIZE}")
endif()
step(configure ${CMAKE_COMMAND} ${args})
step(build ${CMAKE_COMMAND} --build ${CONSUMER_BINARY_DIR})

find_program(consumer_exe ioattn_consumer PATHS ${CONSUMER_BINARY_DIR} NO_DEFAULT_PATH
             REQUIRED)
step(run ${consumer_exe})

if(CONSUMER_PYTHON)
  # the package cmake --install put under the prefix, not the build tree's, computes attention
  step(python-import ${CMAKE_COMMAND} -E env PYTHONPATH=${CONSUMER_PYTHONPATH}
       ${CONSUMER_PYTHON} -c [=[
import numpy as np, ioattn, os, sys
assert ioattn.__file__.startswith(os.environ["PYTHONPATH"]), ioattn.__file__
q = np.ones((1, 1, 4, 2)); out = ioattn.attention(q, q, q, mask="window:1")
sys.exit(0 if np.allclose(out, 1.0) else 1)
]=])
  message(STATUS "consumer test: the installed Python package imports and runs")
endif()
message(STATUS "consumer test: find_package(ioattn), build and run passed")
