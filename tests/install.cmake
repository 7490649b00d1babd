# What `cmake --install` gives a user: tests/test_install.sh installs this
# build into a throwaway prefix, moves it, and runs the installed tools against
# the shared sandbox server without LD_LIBRARY_PATH (their $ORIGIN RUNPATH
# finds the library). Included from tests/CMakeLists.txt.
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper AND TARGET tool_rowlock_bench
   AND TARGET tool_rowlock_demo)
  if(ROWLOCK_INSTALL_RPATH)
    set(_expect_rpath 1)
  else()
    set(_expect_rpath 0)
  endif()
  add_test(NAME install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh)
  rowlock_db_test(install TIMEOUT 300)
  set_property(TEST install APPEND PROPERTY ENVIRONMENT
    "ROWLOCK_BUILD_DIR=${CMAKE_BINARY_DIR}" "ROWLOCK_EXPECT_RPATH=${_expect_rpath}")
  unset(_expect_rpath)
endif()

# The man pages render without warnings (mandoc -Tlint, groff -ww, man -l)
# and document every option the tools' --help lists.
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME man_pages COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_man.sh
           ${PROJECT_SOURCE_DIR}/man $<TARGET_FILE_DIR:tool_rowlock>)
else()
  add_test(NAME man_pages COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_man.sh ${PROJECT_SOURCE_DIR}/man)
endif()
set_tests_properties(man_pages PROPERTIES LABELS "unit;doc" TIMEOUT 60 SKIP_RETURN_CODE 77)
