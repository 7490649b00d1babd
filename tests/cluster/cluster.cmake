# tests/cluster: the cluster suite (label `cluster`): rowlock on a private 3-node
# MariaDB Galera cluster on 127.0.0.1, started by tools/rowlock-cluster in the
# fixture `cluster` and stopped (by pid) by its cleanup test, which ctest runs
# even when a test fails. Every test of the label holds the RESOURCE_LOCK
# rowlock_private_server, so no other private server starts while one runs.
# Needs galera-4, rsync and faketime (tools/install-deps); without the Galera
# provider the suite is left out with a configure warning (and .ci/run fails).
#
# The cluster lives under /tmp (user mysql must reach it when tests run as
# root), in a directory named after the build directory.

set(ROWLOCK_GALERA_PROVIDER /usr/lib/galera/libgalera_smm.so)
if(NOT EXISTS ${ROWLOCK_GALERA_PROVIDER})
  message(WARNING "rowlock tests: ${ROWLOCK_GALERA_PROVIDER} not found, the cluster suite is left out "
                  "(tools/install-deps installs galera-4; CI fails when a label has no tests)")
  return()
endif()

string(MD5 _cl_hash "${CMAKE_BINARY_DIR}")
string(SUBSTRING "${_cl_hash}" 0 10 _cl_hash)
set(ROWLOCK_CLUSTER_DIR /tmp/rowlock-cluster-${_cl_hash})
set(ROWLOCK_CLUSTER_SCRIPT ${PROJECT_SOURCE_DIR}/tools/rowlock-cluster)

add_test(NAME cluster_start COMMAND ${ROWLOCK_CLUSTER_SCRIPT} start ${ROWLOCK_CLUSTER_DIR})
add_test(NAME cluster_stop COMMAND ${ROWLOCK_CLUSTER_SCRIPT} stop ${ROWLOCK_CLUSTER_DIR})
set_tests_properties(cluster_start PROPERTIES FIXTURES_SETUP cluster TIMEOUT 300 LABELS "cluster"
                     RESOURCE_LOCK rowlock_private_server)
set_tests_properties(cluster_stop PROPERTIES FIXTURES_CLEANUP cluster TIMEOUT 180 LABELS "cluster"
                     RESOURCE_LOCK rowlock_private_server)

rowlock_db_program(test_cluster ${CMAKE_CURRENT_LIST_DIR}/test_cluster.c)
target_link_libraries(test_cluster PRIVATE PkgConfig::MYSQLCLIENT)
add_test(NAME cluster_main COMMAND test_cluster main)
set_tests_properties(cluster_main PROPERTIES
  LABELS "cluster"
  FIXTURES_REQUIRED cluster
  RESOURCE_LOCK rowlock_private_server
  TIMEOUT 600
  ENVIRONMENT "ROWLOCK_CLUSTER=${ROWLOCK_CLUSTER_SCRIPT};ROWLOCK_CLUSTER_DIR=${ROWLOCK_CLUSTER_DIR};ROWLOCK_DEFAULTS_FILE=${ROWLOCK_CLUSTER_DIR}/node1.cnf;ROWLOCK_CLI=$<TARGET_FILE:tool_rowlock>")

# Shared locks and semaphores on the cluster (issue 29 item 3): test_cluster's
# group "modes", apart so that it can run alone (`ctest -R cluster_modes`).
# It is the check that found Galera ending a grant's transaction without
# reporting it (holders.c, "On a Galera cluster"): before the fix, 3 runs in
# 14 had a semaphore over its permits or a reader among writers.
add_test(NAME cluster_modes COMMAND test_cluster modes)
set_tests_properties(cluster_modes PROPERTIES
  LABELS "cluster"
  FIXTURES_REQUIRED cluster
  RESOURCE_LOCK rowlock_private_server
  TIMEOUT 600
  ENVIRONMENT "ROWLOCK_CLUSTER=${ROWLOCK_CLUSTER_SCRIPT};ROWLOCK_CLUSTER_DIR=${ROWLOCK_CLUSTER_DIR};ROWLOCK_DEFAULTS_FILE=${ROWLOCK_CLUSTER_DIR}/node1.cnf;ROWLOCK_CLI=$<TARGET_FILE:tool_rowlock>")

# The one-shot reaper on the cluster (issue 29 item 4): test_cluster's group
# "reaper", apart so that it can run alone (`ctest -R cluster_reaper`).
add_test(NAME cluster_reaper COMMAND test_cluster reaper)
set_tests_properties(cluster_reaper PROPERTIES
  LABELS "cluster"
  FIXTURES_REQUIRED cluster
  RESOURCE_LOCK rowlock_private_server
  TIMEOUT 600
  ENVIRONMENT "ROWLOCK_CLUSTER=${ROWLOCK_CLUSTER_SCRIPT};ROWLOCK_CLUSTER_DIR=${ROWLOCK_CLUSTER_DIR};ROWLOCK_DEFAULTS_FILE=${ROWLOCK_CLUSTER_DIR}/node1.cnf;ROWLOCK_CLI=$<TARGET_FILE:tool_rowlock>;ROWLOCK_REAPER=$<TARGET_FILE:tool_rowlock_reaper>")
unset(_cl_hash)
