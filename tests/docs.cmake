# Docs that cannot drift (tests/test_docs.sh; no server), included from
# tests/CMakeLists.txt. The man pages' own checks are man_pages
# (tests/packaging.cmake).
#
# docs_readme       README.md's soname and library package are the build's
#                   (the target's soname, CPack's package name), and no
#                   "Before X.Y" names a version after the project's
# cli_unknown_command  `rowlock nosuch` lists every command of rowlock --help
# man_functions     librowlock(3) names every function the library exports
#                   (nm -D) and every ROWLOCK_EXTERN of rowlock.h, and no other
# cli_reserved_tables  --table=<one of rowlock's own objects> is refused, the
#                   message naming exactly what sql/ creates
add_test(NAME docs_readme COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_docs.sh readme
         ${PROJECT_SOURCE_DIR} $<TARGET_SONAME_FILE_NAME:rowlock> ${CMAKE_BINARY_DIR}/CPackConfig.cmake
         ${PROJECT_VERSION})
add_test(NAME man_functions COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_docs.sh api
         ${PROJECT_SOURCE_DIR} $<TARGET_FILE:rowlock>)
set_tests_properties(docs_readme man_functions PROPERTIES LABELS "unit;doc" TIMEOUT 60)
if(TARGET tool_rowlock)
  add_test(NAME cli_unknown_command COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_docs.sh unknown
           ${PROJECT_SOURCE_DIR} $<TARGET_FILE:tool_rowlock>)
  add_test(NAME cli_reserved_tables COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_docs.sh tables
           ${PROJECT_SOURCE_DIR} $<TARGET_FILE:tool_rowlock>)
  set_tests_properties(cli_unknown_command cli_reserved_tables PROPERTIES LABELS "unit;doc" TIMEOUT 60)
endif()
