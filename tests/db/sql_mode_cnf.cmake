# Write OUT: a copy of the option file IN, plus an init-command that adds
# MODE to every session's sql_mode (ctest sandbox_simultaneous_assignment).
file(READ "${IN}" text)
file(WRITE "${OUT}" "${text}\n[client]\ninit-command=SET SESSION sql_mode=CONCAT_WS(',', NULLIF(@@sql_mode, ''), '${MODE}')\n")
