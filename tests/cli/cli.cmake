# tests/cli: shell suites of the command-line tools (rowlock, rowlock-reaper)
# end to end, each sourcing tests/lib/tap.bash. Included from
# tests/CMakeLists.txt, which defines ROWLOCK_SANDBOX_SCRIPT,
# ROWLOCK_SANDBOX_DIR, ROWLOCK_TEST_DEFAULTS_FILE and the `sandbox` fixture.
set(_cli ${CMAKE_CURRENT_LIST_DIR})

# tests/cli/test_tools.sh runs the built binaries against the shared sandbox
# server (its own lock tables cli_*), and starts a private sandbox for the
# "server stopped" case.

if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  if(DEFINED ROWLOCK_TEST_DEFAULTS_FILE)
    set(_cli_defaults_file ${ROWLOCK_TEST_DEFAULTS_FILE})
  else()
    set(_cli_defaults_file ${ROWLOCK_SANDBOX_DIR}/my.cnf)
  endif()
  add_test(NAME cli_tools COMMAND bash ${_cli}/test_tools.sh)
  set_tests_properties(cli_tools PROPERTIES
    LABELS "db"
    FIXTURES_REQUIRED sandbox
    ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>;ROWLOCK_SANDBOX=${ROWLOCK_SANDBOX_SCRIPT};ROWLOCK_DEFAULTS_FILE=${_cli_defaults_file}"
    # It starts a private mariadbd for a while: one such test at a time.
    RESOURCE_LOCK rowlock_private_server
    TIMEOUT 900)
  unset(_cli_defaults_file)
endif()

# The main cases as the least-privilege account of sql/grants.sql,
# and a read-only account's refusal (uses the shared sandbox's root.cnf).
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper AND TARGET tool_rowlock_demo)
  add_test(NAME cli_privileges COMMAND bash ${_cli}/test_privileges.sh)
  set_tests_properties(cli_privileges PROPERTIES
    LABELS "db"
    FIXTURES_REQUIRED sandbox
    ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>;ROWLOCK_DEFAULTS_FILE=${ROWLOCK_TEST_DEFAULTS_FILE};ROWLOCK_SANDBOX_DIR=${ROWLOCK_SANDBOX_DIR};ROWLOCK_GRANTS=${PROJECT_SOURCE_DIR}/sql/grants.sql"
    TIMEOUT 600)
endif()

# rowlock lock / unlock (tests/cli/test_lock.sh): a lock held across shell
# commands by a supervisor; released by unlock and by the shell's exit.
if(TARGET tool_rowlock)
  add_test(NAME cli_lock COMMAND bash ${_cli}/test_lock.sh)
  rowlock_db_test(cli_lock TIMEOUT 300)
  set_property(TEST cli_lock APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# rowlock unlock --downgrade (tests/cli/test_downgrade.sh): a held lock becomes
# shared without letting go; readers get in, writers wait.
if(TARGET tool_rowlock)
  add_test(NAME cli_downgrade COMMAND bash ${_cli}/test_downgrade.sh)
  rowlock_db_test(cli_downgrade TIMEOUT 300)
  set_property(TEST cli_downgrade APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# Several names at once (tests/cli/test_many.sh): run -N A -N B, lock -N,
# unlock releases all, one lost name loses the run, no deadlock.
if(TARGET tool_rowlock)
  add_test(NAME cli_many COMMAND bash ${_cli}/test_many.sh)
  rowlock_db_test(cli_many TIMEOUT 300)
  set_property(TEST cli_many APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# What a local attacker or an unusual shell must not get (tests/cli/test_trust.sh):
# option files others can write, a forged answer on unlock's
# socket, a lock given up under eval "$(... | cat)", a false busy for run -n.
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME cli_trust COMMAND bash ${_cli}/test_trust.sh)
  rowlock_db_test(cli_trust TIMEOUT 300)
  set_property(TEST cli_trust APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# Machine output (tests/cli/test_json.sh): --json on every command that prints
# a result; flags that do not apply are refused (64).
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME cli_json COMMAND bash ${_cli}/test_json.sh)
  rowlock_db_test(cli_json TIMEOUT 120)
  set_property(TEST cli_json APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# rowlock-reaper's report on one server (tests/cli/test_reaper.sh): a dry
# run counts what the real run purges, "more remain" only when rows are
# left, --max-seconds a budget (the cluster side: tests/cluster, cluster_reaper).
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME cli_reaper COMMAND bash ${_cli}/test_reaper.sh)
  rowlock_db_test(cli_reaper TIMEOUT 120)
  set_property(TEST cli_reaper APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()

# --verbose prints the library's events (tests/cli/test_log.sh).
if(TARGET tool_rowlock AND TARGET tool_rowlock_reaper)
  add_test(NAME cli_log COMMAND bash ${_cli}/test_log.sh)
  rowlock_db_test(cli_log TIMEOUT 120)
  set_property(TEST cli_log APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()
# rowlock run speaks flock(1) (tests/cli/test_flock.sh): util-linux's
# flock scenarios with a lock name, every flock option and exit status,
# shared locks and semaphores from the command line.
if(TARGET tool_rowlock)
  add_test(NAME cli_flock COMMAND bash ${_cli}/test_flock.sh)
  rowlock_db_test(cli_flock TIMEOUT 300)
  set_property(TEST cli_flock APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
endif()
# Server states (tests/cli/test_ops.sh), on a private server (it sets
# read_only and max_connections and drops tables): transient server states
# are waited out, migrate repairs dropped objects, one table of exit codes.
if(TARGET tool_rowlock)
  # The test build of librowlock (the fault seam's objects, never installed)
  # is the only one that reads ROWLOCK_LEASE_RULE: the script runs the tool
  # with it (LD_LIBRARY_PATH, ahead of the tool's RUNPATH) where it forces
  # the cluster lease rule on this single server.
  add_library(rowlock_testlib SHARED $<TARGET_OBJECTS:rowlock_fault_objects>)
  target_link_libraries(rowlock_testlib PRIVATE PkgConfig::MYSQLCLIENT Threads::Threads)
  set_target_properties(rowlock_testlib PROPERTIES OUTPUT_NAME rowlock VERSION ${PROJECT_VERSION}
    SOVERSION ${ROWLOCK_SOVERSION} LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/testlib)
  add_test(NAME cli_ops COMMAND bash ${_cli}/test_ops.sh)
  set_tests_properties(cli_ops PROPERTIES
    LABELS "db"
    ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>;ROWLOCK_SANDBOX=${ROWLOCK_SANDBOX_SCRIPT};ROWLOCK_TESTLIB_DIR=$<TARGET_FILE_DIR:rowlock_testlib>"
    RESOURCE_LOCK rowlock_private_server
    TIMEOUT 300)
endif()

# The bash completion: commands, options and values without a server (and
# quietly no lock names when the database does not answer); lock names from
# a live server in cli_completion_db.
if(TARGET tool_rowlock)
  add_test(NAME cli_completion COMMAND bash ${_cli}/test_completion.sh
           ${PROJECT_SOURCE_DIR}/completion/rowlock.bash $<TARGET_FILE_DIR:tool_rowlock>)
  set_tests_properties(cli_completion PROPERTIES LABELS "unit" TIMEOUT 60)
  add_test(NAME cli_completion_db COMMAND bash ${_cli}/test_completion.sh
           ${PROJECT_SOURCE_DIR}/completion/rowlock.bash $<TARGET_FILE_DIR:tool_rowlock> db)
  rowlock_db_test(cli_completion_db TIMEOUT 120)
endif()

# `rowlock run` with the keeper, on a private server: for-update session
# drops (SIGTERM bound), server SIGKILL + restart with waiters, a paused run.
add_test(NAME cli_keeper COMMAND bash ${_cli}/test_keeper.sh)
rowlock_db_test(cli_keeper TIMEOUT 600 LABELS fault)
set_property(TEST cli_keeper APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
# `rowlock run` stops COMMAND before its lease could end, however slowly it
# stops, and also when only the supervisor is stopped.
add_test(NAME cli_stop COMMAND bash ${_cli}/test_stop.sh)
rowlock_db_test(cli_stop TIMEOUT 300 LABELS fault)
set_property(TEST cli_stop APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")

# A server wait_timeout shorter than the hold: held locks do
# not die of their own idleness, and releases say nothing.
add_test(NAME cli_idle COMMAND bash ${_cli}/test_idle.sh)
rowlock_db_test(cli_idle TIMEOUT 180 LABELS fault)
set_property(TEST cli_idle APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
# One server connection per CLI holder (run, lock): renewals on it, loss
# still reported, more waiters than max_connections waste no grant.
add_test(NAME cli_connections COMMAND bash ${_cli}/test_connections.sh)
rowlock_db_test(cli_connections TIMEOUT 300 LABELS fault)
set_property(TEST cli_connections APPEND PROPERTY ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>")
unset(_cli)
