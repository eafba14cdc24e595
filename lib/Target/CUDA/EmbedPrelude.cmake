# Builds the kernel prelude that EmitCUDA.cpp prints at the top of every
# model.cu from kernels/*.cuh (the rule is in kernels/Prelude.cuh): the part
# between the cnnc-prelude markers of each family that Prelude.cuh includes,
# in its order, one empty line between two families, closed by the anonymous
# namespace's `}`. Writes OUTPUT as the elements of a char array (with the
# terminating zero): a string literal this long exceeds what some compilers
# accept.
#
#   cmake -DPRELUDE=kernels/Prelude.cuh -DOUTPUT=KernelPrelude.inc -P EmbedPrelude.cmake
cmake_minimum_required(VERSION 3.20)
if(NOT PRELUDE OR NOT OUTPUT)
  message(FATAL_ERROR "EmbedPrelude.cmake: pass -DPRELUDE=<Prelude.cuh> -DOUTPUT=<file>")
endif()
get_filename_component(PRELUDE "${PRELUDE}" ABSOLUTE)
get_filename_component(dir "${PRELUDE}" DIRECTORY)
file(READ "${PRELUDE}" umbrella)
string(REGEX MATCHALL "\n#include \"[A-Za-z0-9_]+\\.cuh\"" includes "\n${umbrella}")
if(NOT includes)
  message(FATAL_ERROR "${PRELUDE}: includes no kernel family (#include \"X.cuh\")")
endif()

set(begin "\n// cnnc-prelude-begin\n")
set(end "\n// cnnc-prelude-end\n")
set(text "\n")
set(sep "")
foreach(inc IN LISTS includes)
  string(REGEX REPLACE "^\n#include \"(.*)\"$" "\\1" name "${inc}")
  set(file "${dir}/${name}")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${PRELUDE}: included family ${name} does not exist")
  endif()
  file(READ "${file}" content)
  # Exactly one marker pair, in order: anything else is a mistake that would
  # print a wrong prelude.
  string(FIND "${content}" "${begin}" b)
  string(FIND "${content}" "${begin}" b2 REVERSE)
  string(FIND "${content}" "${end}" e)
  string(FIND "${content}" "${end}" e2 REVERSE)
  if(b EQUAL -1 OR e EQUAL -1 OR NOT b EQUAL b2 OR NOT e EQUAL e2 OR e LESS b)
    message(FATAL_ERROR "${file}: needs exactly one '// cnnc-prelude-begin' "
                        "line followed by one '// cnnc-prelude-end' line")
  endif()
  string(LENGTH "${begin}" blen)
  math(EXPR start "${b} + ${blen}")
  math(EXPR len "${e} - ${start}")
  if(len LESS 0)
    message(FATAL_ERROR "${file}: the cnnc-prelude markers overlap")
  endif()
  string(SUBSTRING "${content}" ${start} ${len} part)
  string(APPEND text "${sep}${part}")
  set(sep "\n\n")
endforeach()
string(APPEND text "\n} // namespace\n// ---- end of prelude ----\n")

# The text beside the array, for reading and diffing; then the bytes.
file(WRITE "${OUTPUT}.cu.txt" "${text}")
file(READ "${OUTPUT}.cu.txt" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 16 bytes (80 characters) a line (CMake's regex has no {n}).
string(REPEAT "0x..," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n" bytes "${bytes}")
# A byte above 0x7f (UTF-8 in a comment) as a char constant: plain `char` is
# signed here, where 0xc3 in the braced list would be a narrowing error.
string(REGEX REPLACE "0x([89a-f][0-9a-f])" "(char)0x\\1" bytes "${bytes}")
set(out "// Generated from kernels/*.cuh by EmbedPrelude.cmake; do not edit.\n${bytes}0x00\n")
# Rewritten only when it changes, so that an unrelated edit of a family's
# comment outside the markers does not recompile EmitCUDA.cpp.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL out)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${out}")
