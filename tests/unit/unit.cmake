# tests/unit: no server (label `unit`). The C programs link the library's
# objects, so the internal helpers of src/rowlock_int.h are callable.
# Included from tests/CMakeLists.txt.
function(rowlock_unit_test name source)
  add_executable(${name} ${source} $<TARGET_OBJECTS:rowlock_objects>)
  target_include_directories(${name} PRIVATE
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${ROWLOCK_GEN_DIR})
  target_link_libraries(${name} PRIVATE PkgConfig::CMOCKA PkgConfig::MYSQLCLIENT Threads::Threads m)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  add_dependencies(${name} rowlock_objects)
endfunction()

rowlock_unit_test(test_logic ${CMAKE_CURRENT_LIST_DIR}/test_logic.c)
add_test(NAME unit_logic COMMAND test_logic)
set_tests_properties(unit_logic PROPERTIES LABELS "unit" TIMEOUT 60)

rowlock_unit_test(test_optfile ${CMAKE_CURRENT_LIST_DIR}/test_optfile.c)
add_test(NAME unit_optfile COMMAND test_optfile)
set_tests_properties(unit_optfile PROPERTIES LABELS "unit" TIMEOUT 60)
# Where test servers may listen (tools/listen-ports.bash): no server.
add_test(NAME unit_listen_ports COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_listen_ports.sh)
set_tests_properties(unit_listen_ports PROPERTIES LABELS "unit" TIMEOUT 60)
