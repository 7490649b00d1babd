# What an installed rowlock gives a user, included from
# tests/CMakeLists.txt.
#
# install: tests/test_install.sh installs this
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

# The bash completion: commands, options and values without a server (and
# quietly no lock names when the database does not answer); lock names from
# a live server in completion_db.
if(TARGET tool_rowlock)
  add_test(NAME completion COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_completion.sh
           ${PROJECT_SOURCE_DIR}/completion/rowlock.bash $<TARGET_FILE_DIR:tool_rowlock>)
  set_tests_properties(completion PROPERTIES LABELS "unit" TIMEOUT 60)
  add_test(NAME completion_db COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_completion.sh
           ${PROJECT_SOURCE_DIR}/completion/rowlock.bash $<TARGET_FILE_DIR:tool_rowlock> db)
  rowlock_db_test(completion_db TIMEOUT 120)
endif()

# The reaper's systemd units pass systemd-analyze verify; the service's
# offline security exposure stays low.
if(TARGET tool_rowlock_reaper)
  add_test(NAME systemd_units COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_systemd.sh
           ${PROJECT_SOURCE_DIR}/systemd $<TARGET_FILE:tool_rowlock_reaper>)
  set_tests_properties(systemd_units PROPERTIES LABELS "unit" TIMEOUT 60 SKIP_RETURN_CODE 77)
endif()
