# The replica suite (label `replica`): tools/rowlock-replica on a private
# MariaDB primary and replica on 127.0.0.1 (GTID replication), once
# asynchronous (fixture `replica_async`) and once semi-synchronous (fixture
# `replica_semisync`). Each pair is started by its fixture's setup test and
# stopped (by pid) by its cleanup test, which ctest runs even when a test
# fails. tests/replica/test_replica.sh checks the tool: replication, a paused SQL
# thread, primary-kill, promote, and `rowlock run` with the host list
# primary,replica reaching the promoted server. Every test of the label holds
# the RESOURCE_LOCK rowlock_private_server, as the cluster's do.
#
# The pairs live under /tmp (user mysql must reach them when tests run as
# root), in directories named after the build directory.

if(NOT TARGET tool_rowlock)
  return()
endif()

string(MD5 _rp_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_rp_hash}" 0 10 _rp_hash)
set(ROWLOCK_REPLICA_SCRIPT ${PROJECT_SOURCE_DIR}/tools/rowlock-replica)

foreach(_rp_mode async semisync)
  if(_rp_mode STREQUAL "async")
    set(_rp_name replica_async)
    set(_rp_flags "")
  else()
    set(_rp_name replica_semisync)
    set(_rp_flags --semisync)
  endif()
  set(_rp_dir /tmp/rowlock-${_rp_name}-${_rp_hash})
  add_test(NAME ${_rp_name}_start COMMAND ${ROWLOCK_REPLICA_SCRIPT} start ${_rp_flags} ${_rp_dir})
  add_test(NAME ${_rp_name}_stop COMMAND ${ROWLOCK_REPLICA_SCRIPT} stop ${_rp_dir})
  set_tests_properties(${_rp_name}_start PROPERTIES FIXTURES_SETUP ${_rp_name} TIMEOUT 120 LABELS "replica"
                       RESOURCE_LOCK rowlock_private_server)
  set_tests_properties(${_rp_name}_stop PROPERTIES FIXTURES_CLEANUP ${_rp_name} TIMEOUT 90 LABELS "replica"
                       RESOURCE_LOCK rowlock_private_server)
  add_test(NAME ${_rp_name} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_replica.sh ${_rp_mode})
  set_tests_properties(${_rp_name} PROPERTIES
    LABELS "replica"
    FIXTURES_REQUIRED ${_rp_name}
    RESOURCE_LOCK rowlock_private_server
    TIMEOUT 120
    ENVIRONMENT "ROWLOCK_BIN_DIR=$<TARGET_FILE_DIR:tool_rowlock>;ROWLOCK_REPLICA=${ROWLOCK_REPLICA_SCRIPT};ROWLOCK_REPLICA_DIR=${_rp_dir}")
endforeach()
unset(_rp_hash)
unset(_rp_mode)
unset(_rp_name)
unset(_rp_flags)
unset(_rp_dir)
