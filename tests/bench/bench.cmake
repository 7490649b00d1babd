# rowlock-bench smoke test: every scenario, every strategy, about half a second
# per measurement and small tables (--quick), against the shared test server.
# It checks the bench's own correctness checks (mutual exclusion, no lost
# updates, strictly increasing tokens, complete purge): exit 0 only if all
# held. The performance targets it prints are informational.
#
# tests/bench. Included by tests/CMakeLists.txt, which defines the `sandbox` fixture,
# ROWLOCK_TEST_DEFAULTS_FILE (the sandbox's my.cnf, or an external server's)
# and rowlock_db_test().
#
# RUN_SERIAL: 32-client runs on a 2-core box would disturb timing-sensitive
# tests running beside it, and the round-trip counts read the server's global
# Questions counter, which other tests' traffic would inflate.
if(TARGET tool_rowlock_bench)
  add_test(NAME bench_smoke
           COMMAND tool_rowlock_bench --quick --json
                   --defaults-file=${ROWLOCK_TEST_DEFAULTS_FILE} --table=t_bench_smoke)
  rowlock_db_test(bench_smoke TIMEOUT 600 LABELS bench)
  set_tests_properties(bench_smoke PROPERTIES RUN_SERIAL TRUE)

  # --waiters: a few idle waiters of every library kind, their cost sampled
  # briefly; exit 0 only if every waiter was granted and mutual exclusion held.
  add_test(NAME bench_waiters_smoke
           COMMAND tool_rowlock_bench --waiters 4 --seconds 0.5
                   --defaults-file=${ROWLOCK_TEST_DEFAULTS_FILE} --table=t_bench_waiters)
  rowlock_db_test(bench_waiters_smoke TIMEOUT 300 LABELS bench)
  set_tests_properties(bench_waiters_smoke PROPERTIES RUN_SERIAL TRUE
                       PASS_REGULAR_EXPRESSION "semaphore +[0-9.]+"
                       FAIL_REGULAR_EXPRESSION "FAILED")
  # --modes: every row briefly (exclusive on one and on separate names,
  # readers, the semaphore); exit 0 only if every client's acquires and
  # releases succeeded and no name had more holders at once than it allows.
  add_test(NAME bench_modes_smoke
           COMMAND tool_rowlock_bench --modes --seconds 0.5
                   --defaults-file=${ROWLOCK_TEST_DEFAULTS_FILE} --table=t_bench_modes)
  rowlock_db_test(bench_modes_smoke TIMEOUT 300 LABELS bench)
  set_tests_properties(bench_modes_smoke PROPERTIES RUN_SERIAL TRUE
                       PASS_REGULAR_EXPRESSION "semaphore hand-off p50 / exclusive hand-off p50: +[0-9.]+"
                       FAIL_REGULAR_EXPRESSION "FAILED")
  add_test(NAME bench_usage_waiters_bad COMMAND tool_rowlock_bench --waiters 0)
  set_tests_properties(bench_usage_waiters_bad PROPERTIES LABELS unit
                       PASS_REGULAR_EXPRESSION "--waiters: N must be 1-4096")

  # Option parsing, no server: --reaper-pause takes 'auto' or milliseconds.
  add_test(NAME bench_usage_reaper_pause_bad COMMAND tool_rowlock_bench --reaper-pause fast)
  set_tests_properties(bench_usage_reaper_pause_bad PROPERTIES LABELS unit
                       PASS_REGULAR_EXPRESSION "--reaper-pause: 'fast' is not 'auto' or a number of ms in 0-60000")
  add_test(NAME bench_usage_reaper_pause_auto COMMAND tool_rowlock_bench --reaper-pause auto --reaper-pause 250 --help)
  set_tests_properties(bench_usage_reaper_pause_auto PROPERTIES LABELS unit
                       PASS_REGULAR_EXPRESSION "--reaper-pause MS +pause between reaper DELETEs"
                       FAIL_REGULAR_EXPRESSION "is not 'auto'")
endif()
