# Fault-injection suite with a history checker: tests/fault/.
# Included from tests/CMakeLists.txt. Every test here has the label `fault`;
# those that start a private server (tools/rowlock-sandbox in a temporary
# directory, never the shared test server) hold RESOURCE_LOCK
# rowlock_private_server, so they run one at a time. faultrun.py kills every
# process group it started, by pid, and stops its server, also on failure;
# a guard process does it if the orchestrator itself is killed.
#
#   fault_checker         the checker on synthetic histories (no server)
#   fault_<scenario>      holder_kill, server_restart, pause, relay, db_error
#                         (1205/1213/2013 injected through the src/fault.c fault
#                         seam), planted (must make the checker FAIL), soak,
#                         late_claim
#   fault_summary         prints the table of every scenario run (last)
#
# ROWLOCK_SOAK_SECONDS (at test time) sets the soak's length (default 120).

find_program(ROWLOCK_PYTHON3 python3)
if(NOT ROWLOCK_PYTHON3 OR NOT TARGET tool_rowlock)
  message(WARNING "rowlock fault suite: python3 or the rowlock tool (ROWLOCK_BUILD_TOOLS) missing, not added")
  return()
endif()

set(_fault_dir ${CMAKE_CURRENT_LIST_DIR})
add_executable(fault_worker ${_fault_dir}/fault_worker.c)
target_link_libraries(fault_worker PRIVATE rowlock PkgConfig::MYSQLCLIENT)
target_compile_definitions(fault_worker PRIVATE _GNU_SOURCE)

# The worker again, linked with the library built with the test-only fault
# seam (ROWLOCK_FAULT_INJECTION, src/fault.c) when the build has it: the
# db_error scenario injects 1205/1213/2013 through ROWLOCK_FAULTS.
set(_fault_seam_env "")
if(TARGET rowlock_fault_objects)
  add_executable(fault_worker_seam ${_fault_dir}/fault_worker.c $<TARGET_OBJECTS:rowlock_fault_objects>)
  target_include_directories(fault_worker_seam PRIVATE ${PROJECT_SOURCE_DIR}/include ${ROWLOCK_GEN_DIR})
  target_link_libraries(fault_worker_seam PRIVATE PkgConfig::MYSQLCLIENT Threads::Threads m)
  target_compile_definitions(fault_worker_seam PRIVATE _GNU_SOURCE ROWLOCK_FAULT_INJECTION)
  set(_fault_seam_env "FAULT_WORKER_SEAM=$<TARGET_FILE:fault_worker_seam>")
endif()

set(_fault_summary ${CMAKE_CURRENT_BINARY_DIR}/fault-summary.tsv)
set(_fault_env
  "FAULT_WORKER=$<TARGET_FILE:fault_worker>"
  "ROWLOCK_BIN=$<TARGET_FILE:tool_rowlock>"
  "ROWLOCK_SANDBOX=${ROWLOCK_SANDBOX_SCRIPT}"
  "FAULT_SUMMARY=${_fault_summary}"
  ${_fault_seam_env})

add_test(NAME fault_checker COMMAND ${ROWLOCK_PYTHON3} ${_fault_dir}/test_check_history.py)
set_tests_properties(fault_checker PROPERTIES LABELS "unit;fault" TIMEOUT 60
  ENVIRONMENT "${_fault_env}")

add_test(NAME fault_summary_reset COMMAND ${CMAKE_COMMAND} -E rm -f ${_fault_summary})
set_tests_properties(fault_summary_reset PROPERTIES LABELS "fault" FIXTURES_SETUP fault_summary)
add_test(NAME fault_summary COMMAND ${ROWLOCK_PYTHON3} ${_fault_dir}/faultrun.py summary)
set_tests_properties(fault_summary PROPERTIES LABELS "fault" FIXTURES_CLEANUP fault_summary
  ENVIRONMENT "${_fault_env}")

# scenario  timeout (s)
set(_fault_scenarios holder_kill 150 server_restart 180 pause 150 relay 180 db_error 60
    planted 150 soak 300)
while(_fault_scenarios)
  list(POP_FRONT _fault_scenarios _sc _to)
  add_test(NAME fault_${_sc} COMMAND ${ROWLOCK_PYTHON3} ${_fault_dir}/faultrun.py ${_sc})
  set_tests_properties(fault_${_sc} PROPERTIES
    LABELS "fault"
    TIMEOUT ${_to}
    SKIP_RETURN_CODE 77
    RESOURCE_LOCK rowlock_private_server
    FIXTURES_REQUIRED fault_summary
    ENVIRONMENT "${_fault_env}")
endwhile()

# A product bug found by fault_soak, fixed in src/lock.c
# (adopt_leftover): an insert or optimistic claim that reaches the server
# after its acquire gave up (read timeout, ROWLOCK_EDB) still commits; the
# same client's next acquire used to count it re-entrant (the same token after
# a release) and its last release left the lock held until the lease ended.
# This reproduction fails if that comes back.
add_test(NAME fault_late_claim COMMAND ${ROWLOCK_PYTHON3} ${_fault_dir}/faultrun.py late_claim)
set_tests_properties(fault_late_claim PROPERTIES LABELS "fault" TIMEOUT 120
  RESOURCE_LOCK rowlock_private_server ENVIRONMENT "${_fault_env}")
unset(_fault_dir)
unset(_fault_summary)
unset(_fault_env)
