# tests/pkg: what an installed rowlock gives a user, included from
# tests/CMakeLists.txt. (tests/pkg/consumer, an outside application built
# against an installed prefix, is run by .ci/run and .ci/package.sh, not ctest.)
set(_pkg ${CMAKE_CURRENT_LIST_DIR})

# pkg_install: tests/pkg/test_install.sh installs this
# build into a throwaway prefix, moves it, and runs the installed tools against
# the shared sandbox server without LD_LIBRARY_PATH (their $ORIGIN RUNPATH
# finds the library).
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper AND TARGET tool_rowlock_bench
   AND TARGET tool_rowlock_demo)
  if(ROWLOCK_INSTALL_RPATH)
    set(_expect_rpath 1)
  else()
    set(_expect_rpath 0)
  endif()
  add_test(NAME pkg_install COMMAND bash ${_pkg}/test_install.sh)
  rowlock_db_test(pkg_install TIMEOUT 300)
  set_property(TEST pkg_install APPEND PROPERTY ENVIRONMENT
    "ROWLOCK_BUILD_DIR=${CMAKE_BINARY_DIR}" "ROWLOCK_EXPECT_RPATH=${_expect_rpath}")
  unset(_expect_rpath)
endif()

# The reaper's systemd units pass systemd-analyze verify; the service's
# offline security exposure stays low.
if(TARGET tool_rowlock_reaper)
  add_test(NAME pkg_systemd_units COMMAND bash ${_pkg}/test_systemd.sh
           ${PROJECT_SOURCE_DIR}/systemd $<TARGET_FILE:tool_rowlock_reaper>)
  set_tests_properties(pkg_systemd_units PROPERTIES LABELS "unit" TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()
unset(_pkg)
