# What `cmake --install` puts where (GNUInstallDirs; with --prefix /usr the
# configuration goes to /etc/frs and the store to /var/lib/frs), and the
# .deb that `cpack -G DEB` makes of it. Included from the top CMakeLists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Programs: the daemon and the admin CLI are system administration commands
# (section 8); frsbench sizes a store before it is deployed.
foreach(program frsd frsctl)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
  endif()
endforeach()
if(TARGET frsbench)
  install(TARGETS frsbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The library: one archive, the public headers, a CMake package and a .pc.
install(FILES ${FRS_ARCHIVE} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/frs DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
set(FRS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/frs)
file(RELATIVE_PATH FRS_RELATIVE_PREFIX "/${FRS_CMAKE_DIR}" "/")
configure_file(${CMAKE_CURRENT_LIST_DIR}/frsConfig.cmake.in ${PROJECT_BINARY_DIR}/frsConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/frsConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/frsConfig.cmake ${PROJECT_BINARY_DIR}/frsConfigVersion.cmake
        DESTINATION ${FRS_CMAKE_DIR})
# Relative to the .pc itself, so the files work under any --prefix.
file(RELATIVE_PATH FRS_PC_RELATIVE_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${CMAKE_CURRENT_LIST_DIR}/frs.pc.in ${PROJECT_BINARY_DIR}/frs.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/frs.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Configuration files. GNUInstallDirs puts etc/ of the prefixes / and /usr
# at /etc; the rule runs at install time so that `cmake --install --prefix
# /usr` (and cpack, which installs with prefix /usr) of a tree configured
# with the default prefix still gives /etc/frs. /etc/frs/*.xml are conffiles
# of the .deb.
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR CMAKE_INSTALL_PREFIX STREQUAL \"/\")
    set(_frs_etc /etc)
  else()
    set(_frs_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  endif()
  file(INSTALL DESTINATION \"\${_frs_etc}/frs\" TYPE FILE
       FILES \"${PROJECT_SOURCE_DIR}/conf/installed/srv.xml\" \"${PROJECT_SOURCE_DIR}/conf/installed/map.xml\")
  file(INSTALL DESTINATION \"\${_frs_etc}/logrotate.d\" TYPE FILE FILES \"${PROJECT_SOURCE_DIR}/conf/logrotate/frsd\")
")
set(FRS_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING "where frsd.service goes, under the prefix")
# The unit names the installed frsd and srv.xml, wherever the prefix put
# them: conf/systemd/frsd.service says /usr/sbin/frsd and /etc/frs/srv.xml
# (the prefix /usr), and is rewritten at install time for any other (an
# install into /opt/frs started /usr/sbin/frsd).
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR CMAKE_INSTALL_PREFIX STREQUAL \"/\")
    set(_frs_etc /etc)
  else()
    set(_frs_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  endif()
  file(READ \"${PROJECT_SOURCE_DIR}/conf/systemd/frsd.service\" _frs_unit)
  string(REPLACE \"/usr/sbin/frsd\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}/frsd\" _frs_unit \"\${_frs_unit}\")
  string(REPLACE \"/etc/frs/srv.xml\" \"\${_frs_etc}/frs/srv.xml\" _frs_unit \"\${_frs_unit}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/unit/frsd.service\" \"\${_frs_unit}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${FRS_SYSTEMD_UNIT_DIR}\" TYPE FILE
       FILES \"${PROJECT_BINARY_DIR}/unit/frsd.service\")
")
# Man pages go in compressed (gzip -n: no name or time stamp inside, so the
# same page gives the same bytes), as Debian's policy asks.
find_program(FRS_GZIP gzip REQUIRED)
set(FRS_MAN_GZ)
foreach(page frsd.8 frsctl.8)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man/${page}.gz
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
                     COMMAND ${FRS_GZIP} -9nc ${PROJECT_SOURCE_DIR}/docs/man/${page} > ${PROJECT_BINARY_DIR}/man/${page}.gz
                     DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/${page} VERBATIM)
  list(APPEND FRS_MAN_GZ ${PROJECT_BINARY_DIR}/man/${page}.gz)
endforeach()
# The changelogs: the project's own (CHANGELOG.md), and the Debian-format
# one a native package carries as changelog.gz, which points to it.
configure_file(${CMAKE_CURRENT_LIST_DIR}/deb/changelog.in ${PROJECT_BINARY_DIR}/man/changelog @ONLY)
foreach(log changelog CHANGELOG.md)
  if(log STREQUAL "changelog")
    set(_frs_log_src ${PROJECT_BINARY_DIR}/man/changelog)
  else()
    set(_frs_log_src ${PROJECT_SOURCE_DIR}/CHANGELOG.md)
  endif()
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/man/${log}.gz
                     COMMAND ${FRS_GZIP} -9nc ${_frs_log_src} > ${PROJECT_BINARY_DIR}/man/${log}.gz
                     DEPENDS ${_frs_log_src} VERBATIM)
endforeach()
add_custom_target(frs_compressed_docs ALL
                  DEPENDS ${FRS_MAN_GZ} ${PROJECT_BINARY_DIR}/man/changelog.gz ${PROJECT_BINARY_DIR}/man/CHANGELOG.md.gz)
install(FILES ${FRS_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_BINARY_DIR}/man/changelog.gz ${PROJECT_BINARY_DIR}/man/CHANGELOG.md.gz
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/conf/monitoring/ DESTINATION ${CMAKE_INSTALL_DATADIR}/frs)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Debian's machine-readable copyright file, where Debian looks for it.
install(FILES ${PROJECT_SOURCE_DIR}/tools/package/deb/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The .deb: `cpack -G DEB` in the build directory (docs/install.md).
set(CPACK_PACKAGE_NAME frs)
set(CPACK_PACKAGE_VENDOR "FRS")
set(CPACK_PACKAGE_CONTACT "FRS maintainers <maintainers@frs-project.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "frequency restrict service: may this key use this business now?")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)       # Depends from the programs' shared libraries
# Stripped programs, their debug information in a frs-dbgsym package beside.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, tzdata, init-system-helpers (>= 1.52)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nginx | haproxy, prometheus")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "FRS answers, before a web service, CGI script or ad server serves:\n may this key use this business now? A pre-forked HTTP/XML server\n over counters kept in memory-mapped files that survive restarts,\n with an admin CLI and a linkable library.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/package/deb/conffiles
    ${PROJECT_SOURCE_DIR}/tools/package/deb/postinst
    ${PROJECT_SOURCE_DIR}/tools/package/deb/prerm
    ${PROJECT_SOURCE_DIR}/tools/package/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_GENERATOR DEB)
include(CPack)
