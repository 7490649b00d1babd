# Debian packages with CPack:  cpack -G DEB  (in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr, so the libdir is Debian's multiarch one and no
# RUNPATH is written; .ci/package.sh does exactly that).
#
# One package per install component (see the install() calls):
#   librowlock<SOVERSION>  lib    the shared library; its name follows the SOVERSION
#                                 so that two ABIs can be installed side by side
#   librowlock-dev         dev    headers, librowlock.so, librowlock.a, rowlock.pc,
#                                 the CMake package, librowlock(3)
#   rowlock                tools  rowlock, rowlock-reaper, man pages, bash and zsh completion,
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
# The Maintainer field (and the changelog's trailer): whoever builds the
# packages for others sets it, -DROWLOCK_MAINTAINER="Name <address>". The
# default is a placeholder in a reserved domain (RFC 2606), which lintian
# accepts as an address but nobody can write to.
set(ROWLOCK_MAINTAINER "rowlock authors <rowlock@example.org>" CACHE STRING
  "Maintainer of the Debian packages (cpack -G DEB): \"Full Name <address>\"")
if(NOT ROWLOCK_MAINTAINER MATCHES "^[^<>]+ <[^<>@ ]+@[^<>@ ]+\\.[^<>@ ]+>$")
  message(FATAL_ERROR "ROWLOCK_MAINTAINER must be \"Full Name <user@host.domain>\", not \"${ROWLOCK_MAINTAINER}\"")
endif()
if(ROWLOCK_MAINTAINER MATCHES "@example\\.org>$")
  message(STATUS "rowlock: Debian packages' maintainer is the placeholder ${ROWLOCK_MAINTAINER}; "
                 "set -DROWLOCK_MAINTAINER=\"Name <address>\" when you distribute them")
endif()
set(CPACK_PACKAGE_CONTACT "${ROWLOCK_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description: first line the summary, then the long text
# (CPack indents it as Debian wants).
set(_about "Named, leased locks whose state is a row in a database table, so
processes on many hosts that share one database exclude each other. Every
grant returns a strictly increasing fencing token. The server must be
MariaDB 10.6 or later; MySQL is not supported yet.")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)          # NAME_VERSION-RELEASE_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# Each package's /usr/share/doc/<package>/changelog.Debian.gz (a non-native
# version, NAME_VERSION-1, must have one): one entry for this version, dated
# SOURCE_DATE_EPOCH when set (reproducible), compressed as dh_compress does.
set(ROWLOCK_DEB_VERSION ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})
string(TIMESTAMP ROWLOCK_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/changelog.Debian.in
  ${CMAKE_BINARY_DIR}/deb/changelog.Debian @ONLY)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz
  COMMAND gzip -9 -n -c ${CMAKE_BINARY_DIR}/deb/changelog.Debian > ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz
  DEPENDS ${CMAKE_BINARY_DIR}/deb/changelog.Debian VERBATIM)
add_custom_target(rowlock_deb_changelog ALL DEPENDS ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz)
foreach(entry lib:librowlock${ROWLOCK_SOVERSION} dev:librowlock-dev tools:rowlock)
  string(REPLACE ":" ";" entry "${entry}")
  list(GET entry 0 comp)
  list(GET entry 1 pkg)
  # (EXCLUDE_FROM_ALL: in the packages, which install by component, not in a
  # plain `cmake --install`.)
  install(FILES ${CMAKE_BINARY_DIR}/deb/changelog.Debian.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg} COMPONENT ${comp} EXCLUDE_FROM_ALL)
  # lintian's initial-upload-closes-no-bugs asks the first upload to the
  # archive to close its ITP bug; these packages have none (the override
  # file says why).
  set(PKG ${pkg})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/lintian-overrides.in
    ${CMAKE_BINARY_DIR}/deb/lintian/${pkg} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/deb/lintian/${pkg}
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides COMPONENT ${comp} EXCLUDE_FROM_ALL)
endforeach()
# Strip as dh_strip does, and give the library package the ldconfig trigger
# instead of CPack's ldconfig scripts (see the two scripts; CMake 3.19+).
set(CPACK_ROWLOCK_STRIP "${CMAKE_STRIP}")
set(CPACK_ROWLOCK_LIB_PACKAGE librowlock${ROWLOCK_SOVERSION})
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/deb/strip.cmake)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/deb/repack.cmake)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)           # libmariadb3, libc6 from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)       # librowlockN's shlibs: librowlock N librowlockN (>= version)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)    # rowlock, -dev: Depends librowlockN (= version)
# The tools need librowlock.so.N from this build: found here, dependency from
# the component dependency above.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})

set(CPACK_DEBIAN_LIB_DESCRIPTION "distributed locks in a MariaDB table - shared library
${_about}
.
This package has the shared library librowlock.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "distributed locks in a MariaDB table - development files
${_about}
.
This package has the header rowlock.h, the static library, pkg-config and
CMake files, and librowlock(3).")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "distributed locks in a MariaDB table - command-line tools
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
# Its control files: the ldconfig trigger and the symbols file, which
# dpkg-shlibdeps prefers to shlibs: each exported function with the version
# that brought it, so a program that uses only old functions depends on an old
# librowlockN. A new function needs its line (with the new version) in
# cmake/deb/symbols.in; .ci/package.sh fails when the two differ.
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/symbols.in ${CMAKE_BINARY_DIR}/deb/lib/symbols @ONLY)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA
  ${CMAKE_CURRENT_LIST_DIR}/deb/lib/triggers ${CMAKE_BINARY_DIR}/deb/lib/symbols)

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
