# CPACK_POST_BUILD_SCRIPTS (CMake 3.19+): CPack gives a package that ships a
# library in /usr/lib a postinst and postrm calling ldconfig unless the
# package brings its own; Debian wants the ldconfig trigger instead
# (cmake/deb/lib/triggers; lintian: maintscript-calls-ldconfig), and an empty
# script is a lintian warning too. So the library package is rebuilt here
# without the two scripts.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(name "${deb}" NAME)
  if(NOT name MATCHES "^${CPACK_ROWLOCK_LIB_PACKAGE}_.*\\.deb$")
    continue()
  endif()
  set(tree "${deb}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${tree}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -R ${deb} failed: ${rc}")
  endif()
  file(REMOVE "${tree}/DEBIAN/postinst" "${tree}/DEBIAN/postrm")
  execute_process(COMMAND dpkg-deb --root-owner-group -Zgzip -b "${tree}" "${deb}"
                  OUTPUT_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -b ${deb} failed: ${rc}")
  endif()
  file(REMOVE_RECURSE "${tree}")
endforeach()
