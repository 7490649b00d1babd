# tests/db: C programs (and the Python binding's test) against the shared
# test server (label `db`, fixture `sandbox`); test_lease's and
# test_for_update's `fault` groups kill processes and restart private
# servers (label `fault` too). Included from tests/CMakeLists.txt.
set(_db ${CMAKE_CURRENT_LIST_DIR})

# A program of the seam build: the library's sources compiled with
# ROWLOCK_FAULT_INJECTION (src/rowlock_int.h), never installed.
function(rowlock_inject_program name)
  add_executable(${name} ${ARGN} ${ROWLOCK_TEST_LIB_DIR}/testutil.c $<TARGET_OBJECTS:rowlock_fault_objects>)
  target_include_directories(${name} PRIVATE ${ROWLOCK_TEST_LIB_DIR}
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include ${ROWLOCK_GEN_DIR})
  target_link_libraries(${name} PRIVATE PkgConfig::CMOCKA PkgConfig::MYSQLCLIENT Threads::Threads m)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE ROWLOCK_FAULT_INJECTION)
endfunction()

# The strategies every per-strategy suite runs for (behaviour, lease, demo,
# keeper): a new strategy is added here once (src/strategy.h's steps).
set(ROWLOCK_TEST_STRATEGIES insert for-update optimistic)

# The behaviour suite: one source, run once per strategy.
rowlock_db_program(test_behaviour ${_db}/test_behaviour.c)
foreach(s ${ROWLOCK_TEST_STRATEGIES})
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_behaviour_${sid} COMMAND test_behaviour ${s})
  rowlock_db_test(db_behaviour_${sid} TIMEOUT 900)
endforeach()

# The behaviour suite once more with sql_mode SIMULTANEOUS_ASSIGNMENT in
# every test session (MariaDB then evaluates an UPDATE's assignments with the
# old column values; the claim and release statements say they give the same
# row either way). The library never changes session settings itself: the
# mode comes from init-command in a copy of the test option file, which the
# fixture below writes once the server is up.
set(ROWLOCK_SA_DEFAULTS_FILE ${CMAKE_CURRENT_BINARY_DIR}/simultaneous_assignment.cnf)
add_test(NAME db_sandbox_simultaneous_assignment COMMAND ${CMAKE_COMMAND} -DIN=${ROWLOCK_TEST_DEFAULTS_FILE}
  -DOUT=${ROWLOCK_SA_DEFAULTS_FILE} -DMODE=SIMULTANEOUS_ASSIGNMENT -P ${_db}/sql_mode_cnf.cmake)
set_tests_properties(db_sandbox_simultaneous_assignment PROPERTIES FIXTURES_SETUP sandbox_sa
  FIXTURES_REQUIRED sandbox LABELS "db")
foreach(s ${ROWLOCK_TEST_STRATEGIES})
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_behaviour_${sid}_simultaneous_assignment COMMAND test_behaviour ${s})
  rowlock_db_test(db_behaviour_${sid}_simultaneous_assignment TIMEOUT 900)
  set_tests_properties(db_behaviour_${sid}_simultaneous_assignment PROPERTIES
    ENVIRONMENT "ROWLOCK_DEFAULTS_FILE=${ROWLOCK_SA_DEFAULTS_FILE};ROWLOCK_SANDBOX=${ROWLOCK_SANDBOX_SCRIPT};ROWLOCK_SANDBOX_DIR=${ROWLOCK_SANDBOX_DIR};ROWLOCK_TEST_SQL_MODE=SIMULTANEOUS_ASSIGNMENT"
    FIXTURES_REQUIRED "sandbox;sandbox_sa")
endforeach()

# Strategy-specific suites; their "fault" group runs the cases that kill
# processes or restart (private) servers.
# test_lease and test_admin: one source each, run per lease strategy.
rowlock_db_program(test_lease ${_db}/test_lease.c)
rowlock_db_program(test_admin ${_db}/test_admin.c)
foreach(p insert optimistic)
  add_test(NAME db_lease_${p} COMMAND test_lease ${p} main)
  rowlock_db_test(db_lease_${p} TIMEOUT 600)
  add_test(NAME db_lease_${p}_fault COMMAND test_lease ${p} fault)
  rowlock_db_test(db_lease_${p}_fault TIMEOUT 900 LABELS fault)
  add_test(NAME db_admin_${p} COMMAND test_admin ${p})
  rowlock_db_test(db_admin_${p} TIMEOUT 300)
endforeach()
rowlock_db_program(test_for_update ${_db}/test_for_update.c)
add_test(NAME db_for_update COMMAND test_for_update main)
rowlock_db_test(db_for_update TIMEOUT 600)
add_test(NAME db_for_update_fault COMMAND test_for_update fault)
rowlock_db_test(db_for_update_fault TIMEOUT 900 LABELS fault)

# Injected errors (the seam of src/db.c): statements made to fail, stall or
# lose their connection, against the shared server; no private server needed.
rowlock_inject_program(test_inject ${_db}/test_inject.c)
add_test(NAME db_inject COMMAND test_inject)
rowlock_db_test(db_inject TIMEOUT 600)
add_test(NAME db_inject_env COMMAND test_inject env)
rowlock_db_test(db_inject_env TIMEOUT 120)
set_property(TEST db_inject_env APPEND PROPERTY ENVIRONMENT "ROWLOCK_FAULTS=claim:0:1205")
# Both runs of test_inject create, use and drop the same tables (t_fault...):
# never at the same time (under the fault label they were serialised by the
# private-server lock; without it, -j2 let one drop the other's table).
set_tests_properties(db_inject db_inject_env PROPERTIES RESOURCE_LOCK test_inject_tables)

# The failover epoch (src/epoch.c) on one server, per strategy: a failover
# simulated by editing the `<table>_epoch` row.
rowlock_db_program(test_epoch ${_db}/test_epoch.c)
foreach(s ${ROWLOCK_TEST_STRATEGIES})
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_epoch_${sid} COMMAND test_epoch ${s})
  rowlock_db_test(db_epoch_${sid} TIMEOUT 300)
endforeach()

rowlock_db_program(test_mixed ${_db}/test_mixed.c)
add_test(NAME db_mixed COMMAND test_mixed)
rowlock_db_test(db_mixed TIMEOUT 300)

rowlock_db_program(test_client ${_db}/test_client.c)
target_link_libraries(test_client PRIVATE Threads::Threads)
add_test(NAME db_client COMMAND test_client)
rowlock_db_test(db_client TIMEOUT 300)

# The demo tool doubles as an end-to-end check (its exit code says whether
# the tokens it saw were strictly increasing in grant order).
if(TARGET tool_rowlock_demo)
  foreach(s ${ROWLOCK_TEST_STRATEGIES})
    string(REPLACE "-" "_" sid ${s})
    add_test(NAME db_demo_${sid} COMMAND tool_rowlock_demo --procs 3 --rounds 4
             --strategy ${s} --table t_demo_${sid})
    rowlock_db_test(db_demo_${sid} TIMEOUT 300)
  endforeach()
endif()

# The lease keeper (rowlock_keep), once per strategy.
rowlock_db_program(test_keeper ${_db}/test_keeper.c)
target_link_libraries(test_keeper PRIVATE Threads::Threads)
foreach(s ${ROWLOCK_TEST_STRATEGIES})
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_keeper_${sid} COMMAND test_keeper ${s})
  rowlock_db_test(db_keeper_${sid} TIMEOUT 300)
endforeach()

# TLS modes and option files: a private server started with
# `rowlock-sandbox start --tls` (its own CA and certificate, generated with openssl).
rowlock_db_program(test_tls ${_db}/test_tls.c)
add_test(NAME db_tls COMMAND test_tls)
rowlock_db_test(db_tls TIMEOUT 300 LABELS fault)

# The logging hook: events an application receives, with injected errors
# (the seam) for retries and reconnects (against the shared server).
rowlock_inject_program(test_log ${_db}/test_log.c)
add_test(NAME db_log_hook COMMAND test_log)
rowlock_db_test(db_log_hook TIMEOUT 300)
# ---- shared locks and semaphores (per strategy with a shared mode)
rowlock_db_program(test_modes ${_db}/test_modes.c)
foreach(s insert for-update)
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_modes_${sid} COMMAND test_modes ${s})
  rowlock_db_test(db_modes_${sid} TIMEOUT 300)
endforeach()
# The same suite under the cluster lease rule on one server (the seam build
# reads ROWLOCK_LEASE_RULE=cluster): holders-table entries judged by
# watching (src/holders.c), not by expires_at; own table t_modes_cl.
rowlock_inject_program(test_modes_inject ${_db}/test_modes.c)
add_test(NAME db_modes_insert_cluster_rule COMMAND test_modes_inject insert)
rowlock_db_test(db_modes_insert_cluster_rule TIMEOUT 300)
set_property(TEST db_modes_insert_cluster_rule APPEND PROPERTY ENVIRONMENT "ROWLOCK_LEASE_RULE=cluster")
# Readers and writers again under sql_mode SIMULTANEOUS_ASSIGNMENT (the
# token draw that opens a name to joining readers must store the new token
# either way); own table t_modes_sa.
add_test(NAME db_modes_insert_simultaneous_assignment COMMAND test_modes insert "*shared*")
rowlock_db_test(db_modes_insert_simultaneous_assignment TIMEOUT 300)
set_tests_properties(db_modes_insert_simultaneous_assignment PROPERTIES
  ENVIRONMENT "ROWLOCK_DEFAULTS_FILE=${ROWLOCK_SA_DEFAULTS_FILE};ROWLOCK_SANDBOX=${ROWLOCK_SANDBOX_SCRIPT};ROWLOCK_SANDBOX_DIR=${ROWLOCK_SANDBOX_DIR};ROWLOCK_TEST_SQL_MODE=SIMULTANEOUS_ASSIGNMENT"
  FIXTURES_REQUIRED "sandbox;sandbox_sa")
# rowlock_downgrade: exclusive to shared without letting go (insert; the
# other strategies' refusals too).
rowlock_db_program(test_downgrade ${_db}/test_downgrade.c)
add_test(NAME db_downgrade COMMAND test_downgrade)
rowlock_db_test(db_downgrade TIMEOUT 300)
# The behaviour suite with every insert handle a semaphore of one permit: the
# holders-table protocol must be the exclusive lock the suite describes.
add_test(NAME db_behaviour_insert_semaphore1 COMMAND test_behaviour insert)
rowlock_db_test(db_behaviour_insert_semaphore1 TIMEOUT 900)
set_property(TEST db_behaviour_insert_semaphore1 APPEND PROPERTY ENVIRONMENT "ROWLOCK_TEST_LOCK_MODE=semaphore1")

# ---- the Python binding (python/rowlock, ctypes) against the
# shared server, loading the library just built. Not in sanitizer builds: an
# ASan library cannot be loaded into a python3 that was not started with the
# ASan runtime.
find_program(ROWLOCK_PYTHON3 python3)
if(ROWLOCK_PYTHON3 AND NOT ROWLOCK_SANITIZE AND NOT ROWLOCK_FUZZ)
  add_test(NAME db_python COMMAND ${ROWLOCK_PYTHON3} ${_db}/test_python.py)
  rowlock_db_test(db_python TIMEOUT 300)
  set_property(TEST db_python APPEND PROPERTY ENVIRONMENT
    "ROWLOCK_LIBRARY=$<TARGET_FILE:rowlock>" "PYTHONPATH=${PROJECT_SOURCE_DIR}/python"
    "PYTHONDONTWRITEBYTECODE=1")
elseif(NOT ROWLOCK_PYTHON3)
  message(WARNING "rowlock: python3 not found, the Python binding's test (db_python) is not added")
endif()
# Fenced writes (rowlock_fence, CALL `<table>_fence`): per lease strategy.
rowlock_db_program(test_fence ${_db}/test_fence.c)
target_link_libraries(test_fence PRIVATE PkgConfig::MYSQLCLIENT)
foreach(p insert optimistic)
  add_test(NAME db_fence_${p} COMMAND test_fence ${p})
  rowlock_db_test(db_fence_${p} TIMEOUT 300)
endforeach()
# Several names at once (rowlock_acquire_many), once per strategy.
rowlock_db_program(test_many ${_db}/test_many.c)
foreach(s ${ROWLOCK_TEST_STRATEGIES})
  string(REPLACE "-" "_" sid ${s})
  add_test(NAME db_many_${sid} COMMAND test_many ${s})
  rowlock_db_test(db_many_${sid} TIMEOUT 600)
endforeach()

unset(_db)

