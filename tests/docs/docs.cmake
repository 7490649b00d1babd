# tests/docs: docs that cannot drift (no server; labels `unit` and `doc`),
# included from tests/CMakeLists.txt.
#
# docs_man_pages    the man pages render without warnings (mandoc -Tlint,
#                   groff -ww, man -l) and document every option the tools'
#                   --help lists (test_man.sh)
# docs_readme       README.md's soname and library package are the build's
#                   (the target's soname, CPack's package name), and no
#                   "Before X.Y" names a version after the project's
# docs_cli_unknown_command  `rowlock nosuch` lists every command of rowlock --help
# docs_man_functions  librowlock(3) names every function the library exports
#                   (nm -D) and every ROWLOCK_EXTERN of rowlock.h, and no other
# docs_cli_reserved_tables  --table=<one of rowlock's own objects> is refused,
#                   the message naming exactly what sql/ creates
# docs_architecture docs/ARCHITECTURE.md names every file of src/, and every
#                   path, statement tag and identifier it names exists
set(_docs ${CMAKE_CURRENT_LIST_DIR})
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME docs_man_pages COMMAND bash ${_docs}/test_man.sh
           ${PROJECT_SOURCE_DIR}/man $<TARGET_FILE_DIR:tool_rowlock>)
else()
  add_test(NAME docs_man_pages COMMAND bash ${_docs}/test_man.sh ${PROJECT_SOURCE_DIR}/man)
endif()
set_tests_properties(docs_man_pages PROPERTIES LABELS "unit;doc" TIMEOUT 60 SKIP_RETURN_CODE 77)

add_test(NAME docs_readme COMMAND bash ${_docs}/test_docs.sh readme
         ${PROJECT_SOURCE_DIR} $<TARGET_SONAME_FILE_NAME:rowlock> ${CMAKE_BINARY_DIR}/CPackConfig.cmake
         ${PROJECT_VERSION})
add_test(NAME docs_man_functions COMMAND bash ${_docs}/test_docs.sh api
         ${PROJECT_SOURCE_DIR} $<TARGET_FILE:rowlock>)
add_test(NAME docs_architecture COMMAND bash ${_docs}/test_docs.sh architecture ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_readme docs_man_functions docs_architecture PROPERTIES LABELS "unit;doc" TIMEOUT 60)
if(TARGET tool_rowlock)
  add_test(NAME docs_cli_unknown_command COMMAND bash ${_docs}/test_docs.sh unknown
           ${PROJECT_SOURCE_DIR} $<TARGET_FILE:tool_rowlock>)
  add_test(NAME docs_cli_reserved_tables COMMAND bash ${_docs}/test_docs.sh tables
           ${PROJECT_SOURCE_DIR} $<TARGET_FILE:tool_rowlock>)
  set_tests_properties(docs_cli_unknown_command docs_cli_reserved_tables PROPERTIES
    LABELS "unit;doc" TIMEOUT 60)
endif()
unset(_docs)
