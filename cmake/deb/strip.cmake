# CPACK_PRE_BUILD_SCRIPTS (CMake 3.19+): runs on the staged files before the
# .debs are built (and their md5sums computed). Strips what dh_strip strips
# and CPACK_STRIP_FILES leaves: the .comment and .note sections of binaries
# (lintian: binary-has-unneeded-section) and the debug symbols of the static
# library (unstripped-static-library).
file(GLOB_RECURSE _files LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(f IN LISTS _files)
  if(IS_SYMLINK "${f}")
    continue()
  endif()
  if(f MATCHES "\\.a$")
    set(args --strip-debug --enable-deterministic-archives)
  else()
    file(READ "${f}" magic LIMIT 4 HEX)
    if(NOT magic STREQUAL "7f454c46")
      continue()
    endif()
    set(args)
  endif()
  execute_process(COMMAND "${CPACK_ROWLOCK_STRIP}" ${args} --remove-section=.comment
                          --remove-section=.note "${f}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "strip ${f} failed: ${rc}")
  endif()
endforeach()
