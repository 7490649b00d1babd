# Debian packages with CPack:  cpack -G DEB  (in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, so the libdir is Debian's multiarch one and no
# RUNPATH is written; .ci/package.sh does exactly that).
#
# One package per install component (see the install() calls):
#   librowlock<SOVERSION>  lib    the shared library; its name follows the SOVERSION
#                                 so that two ABIs can be installed side by side
#   librowlock-dev         dev    headers, librowlock.so, librowlock.a, rowlock.pc,
#                                 the CMake package, librowlock(3)
#   rowlock                tools  rowlock, rowlock-reaper, man pages, bash completion,
#                                 systemd units, sql/, the bench and demo in
#                                 /usr/lib/rowlock (libexec)
# Split as Debian does for libraries: a program that links librowlock pulls in
# the small runtime package only, and a future librowlock<N+1> can be installed
# beside it while programs move over.
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "rowlock: CPack DEB packages install into /usr; configure with "
                 "-DCMAKE_INSTALL_PREFIX=/usr for Debian's library directory")
endif()

set(CPACK_PACKAGE_NAME rowlock)
# Licence: MIT (LICENSE). Each package ships it as Debian policy wants it,
# /usr/share/doc/<package>/copyright in the machine-readable format (the
# MIT licence is "Expat" there); a plain `make install` gets the same files.
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/deb/copyright
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/librowlock${ROWLOCK_SOVERSION} COMPONENT lib)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/deb/copyright
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/librowlock-dev COMPONENT dev)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/deb/copyright
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/rowlock COMPONENT tools)
set(CPACK_PACKAGE_VENDOR "rowlock")
set(CPACK_PACKAGE_CONTACT "rowlock maintainers <rowlock@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description: first line the summary, then the long text
# (CPack indents it as Debian wants).
set(_about "Named, leased locks whose state is a row in a database table, so
processes on many hosts that share one database exclude each other. Every
grant returns a strictly increasing fencing token.")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)          # NAME_VERSION-RELEASE_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)           # libmariadb3, libc6 from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)       # librowlockN's shlibs: librowlock N librowlockN (>= version)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)    # rowlock, -dev: Depends librowlockN (= version)
# The tools need librowlock.so.N from this build: found here, dependency from
# the component dependency above.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})

set(CPACK_DEBIAN_LIB_DESCRIPTION "distributed locks in a MariaDB/MySQL table - shared library
${_about}
.
This package has the shared library librowlock.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "distributed locks in a MariaDB/MySQL table - development files
${_about}
.
This package has the header rowlock.h, the static library, pkg-config and
CMake files, and librowlock(3).")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "distributed locks in a MariaDB/MySQL table - command-line tools
${_about}
.
This package has rowlock(1), which runs a command while holding a lock
(flock(1) for a whole cluster) and shows, lists and force-releases locks,
and rowlock-reaper(8), which purges crashed holders' rows, with a systemd
timer.")
set(CPACK_COMPONENT_DEV_DEPENDS lib)
set(CPACK_COMPONENT_TOOLS_DEPENDS lib)

set(CPACK_DEBIAN_LIB_PACKAGE_NAME librowlock${ROWLOCK_SOVERSION})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
# (CPack writes its postinst/postrm calling ldconfig.)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME librowlock-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# rowlock.pc has Requires.private: mysqlclient; librowlock.a needs libmariadb.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libmariadb-dev-compat, libmariadb-dev")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME rowlock)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "mariadb-client, bash-completion")
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
  ${CMAKE_CURRENT_LIST_DIR}/deb/tools/postinst ${CMAKE_CURRENT_LIST_DIR}/deb/tools/prerm
  ${CMAKE_CURRENT_LIST_DIR}/deb/tools/postrm)

include(CPack)
