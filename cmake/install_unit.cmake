# Install-time half of the systemd unit install (see CMakeLists.txt): writes
# IN with @ROWLOCK_REAPER_PATH@ set to the reaper's path under the prefix the
# install really uses (`cmake --install --prefix` and CPack change it after
# configuration), then installs it into UNITDIR so it is in the manifest.
# Expects: IN, TMP (a scratch file), BINDIR, UNITDIR (relative or absolute).
if(IS_ABSOLUTE "${BINDIR}")
  set(ROWLOCK_REAPER_PATH "${BINDIR}/rowlock-reaper")
else()
  set(ROWLOCK_REAPER_PATH "${CMAKE_INSTALL_PREFIX}/${BINDIR}/rowlock-reaper")
endif()
configure_file("${IN}" "${TMP}" @ONLY)
if(IS_ABSOLUTE "${UNITDIR}")
  set(dest "${UNITDIR}")
else()
  set(dest "${CMAKE_INSTALL_PREFIX}/${UNITDIR}")
endif()
file(INSTALL DESTINATION "${dest}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  FILES "${TMP}")
