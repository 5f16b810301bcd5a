# What `cmake --install` puts where (GNUInstallDirs; with --prefix /usr the
# configuration goes to /etc/frs and the store to /var/lib/frs), and the
# .deb that `cpack -G DEB` makes of it. Included from the top CMakeLists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Programs: the daemon and the admin CLI are system administration commands
# (section 8); frsbench sizes a store before it is deployed.
install(TARGETS frsd frsctl RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT daemon)
install(TARGETS frsbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)

# The library: one archive, the public headers, a CMake package and a .pc.
install(FILES ${FRS_ARCHIVE} DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# But frs/envoy_map.h: its functions are in the Envoy and server modules,
# not in libfrs.a (they need yaml-cpp and protobuf); frsctl links them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/frs DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.h" PATTERN "envoy_map.h" EXCLUDE)
set(FRS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/frs)
file(RELATIVE_PATH FRS_RELATIVE_PREFIX "/${FRS_CMAKE_DIR}" "/")
configure_file(${CMAKE_CURRENT_LIST_DIR}/frsConfig.cmake.in ${PROJECT_BINARY_DIR}/frsConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/frsConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/frsConfig.cmake ${PROJECT_BINARY_DIR}/frsConfigVersion.cmake
        DESTINATION ${FRS_CMAKE_DIR} COMPONENT dev)
# Relative to the .pc itself, so the files work under any --prefix.
file(RELATIVE_PATH FRS_PC_RELATIVE_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${CMAKE_CURRENT_LIST_DIR}/frs.pc.in ${PROJECT_BINARY_DIR}/frs.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/frs.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

set(FRS_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING "where frsd.service goes, under the prefix")
# At install time, from the prefix the install is given (cpack installs
# with /usr whatever the tree was configured with):
# - the configuration files: GNUInstallDirs puts etc/ of the prefixes / and
#   /usr at /etc, PREFIX/etc otherwise (/etc/frs/*.xml are conffiles);
# - the unit, which names the installed frsd and srv.xml:
#   conf/systemd/frsd.service says /usr/sbin/frsd and /etc/frs/srv.xml (the
#   prefix /usr) and is rewritten for any other (an install into /opt/frs
#   started /usr/sbin/frsd).
install(CODE "
  if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" OR CMAKE_INSTALL_PREFIX STREQUAL \"/\")
    set(_frs_etc /etc)
  else()
    set(_frs_etc \"\${CMAKE_INSTALL_PREFIX}/etc\")
  endif()
  file(INSTALL DESTINATION \"\${_frs_etc}/frs\" TYPE FILE
       FILES \"${PROJECT_SOURCE_DIR}/conf/installed/srv.xml\" \"${PROJECT_SOURCE_DIR}/conf/installed/map.xml\")
  file(INSTALL DESTINATION \"\${_frs_etc}/logrotate.d\" TYPE FILE FILES \"${PROJECT_SOURCE_DIR}/conf/logrotate/frsd\")
  file(READ \"${PROJECT_SOURCE_DIR}/conf/systemd/frsd.service\" _frs_unit)
  string(REPLACE \"/usr/sbin/frsd\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}/frsd\" _frs_unit \"\${_frs_unit}\")
  string(REPLACE \"/etc/frs/srv.xml\" \"\${_frs_etc}/frs/srv.xml\" _frs_unit \"\${_frs_unit}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/unit/frsd.service\" \"\${_frs_unit}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${FRS_SYSTEMD_UNIT_DIR}\" TYPE FILE
       FILES \"${PROJECT_BINARY_DIR}/unit/frsd.service\")
" COMPONENT daemon)
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
# The reference the man pages cite (docs/*.md), compressed the same way:
# /usr/share/doc/frsd/protocol.md.gz and its siblings.
file(GLOB FRS_DOC_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
set(FRS_DOC_GZ)
foreach(doc ${FRS_DOC_PAGES})
  get_filename_component(_frs_doc_name ${doc} NAME)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/doc/${_frs_doc_name}.gz
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/doc
                     COMMAND ${FRS_GZIP} -9nc ${doc} > ${PROJECT_BINARY_DIR}/doc/${_frs_doc_name}.gz
                     DEPENDS ${doc} VERBATIM)
  list(APPEND FRS_DOC_GZ ${PROJECT_BINARY_DIR}/doc/${_frs_doc_name}.gz)
endforeach()
add_custom_target(frs_compressed_docs ALL
                  DEPENDS ${FRS_MAN_GZ} ${FRS_DOC_GZ} ${PROJECT_BINARY_DIR}/man/changelog.gz
                          ${PROJECT_BINARY_DIR}/man/CHANGELOG.md.gz)
install(FILES ${FRS_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT daemon)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/conf/monitoring/ DESTINATION ${CMAKE_INSTALL_DATADIR}/frs COMPONENT daemon)
# The messages of the gRPC service frsd serves, for a client of one's own
# (docs/integrations.md): what protoc needs beside /usr/include.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/envoy/proto/ DESTINATION ${CMAKE_INSTALL_DATADIR}/frs/proto COMPONENT daemon)

# The Python client: the standard library's only, for every python3.
install(FILES ${PROJECT_SOURCE_DIR}/clients/python/frs_client.py DESTINATION lib/python3/dist-packages COMPONENT python)

# Each package's documents in /usr/share/doc/PACKAGE, as Debian has them:
# the license (Debian's machine-readable copyright file), both changelogs;
# the server's also the README and the examples (front doors, a cluster,
# CGI pages, a program linking the library).
foreach(pkg frsd libfrs-dev python3-frs-client)
  if(pkg STREQUAL "frsd")
    set(_frs_component daemon)
  elseif(pkg STREQUAL "libfrs-dev")
    set(_frs_component dev)
  else()
    set(_frs_component python)
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/tools/package/deb/copyright ${PROJECT_BINARY_DIR}/man/changelog.gz
                ${PROJECT_BINARY_DIR}/man/CHANGELOG.md.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${pkg} COMPONENT ${_frs_component})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${FRS_DOC_GZ}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/frsd COMPONENT daemon)
# With their modes: the CGI pages are run as they are (fcgiwrap refuses a
# script that is not executable).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/conf/frontdoor ${PROJECT_SOURCE_DIR}/conf/cluster
                  ${PROJECT_SOURCE_DIR}/conf/envoy ${PROJECT_SOURCE_DIR}/examples/cgi
                  ${PROJECT_SOURCE_DIR}/examples/inprocess
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/frsd/examples COMPONENT daemon USE_SOURCE_PERMISSIONS
        PATTERN "*-data" EXCLUDE PATTERN "data" EXCLUDE PATTERN "*.log" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/clients/python/README.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/python3-frs-client COMPONENT python)

# The .debs: `cpack -G DEB` in the build directory (docs/install.md), split
# as Debian splits a daemon: frsd (the server, frsctl, the unit, conffiles,
# man pages, monitoring, examples), libfrs-dev (the static library, headers,
# CMake and pkg-config files) and python3-frs-client (the Python client, for
# the programs that import it from python3's path).
set(CPACK_PACKAGE_NAME frs)
set(CPACK_PACKAGE_VENDOR "FRS")
set(CPACK_PACKAGE_CONTACT "FRS maintainers <maintainers@frs-project.org>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon dev python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Stripped programs. Their debug information stays in the build tree (the
# release preset builds RelWithDebInfo: build/src/server/frsd is the same
# program unstripped, for gdb or eu-unstrip), and -DFRS_DEB_STRIP=OFF ships
# it in the packages (the outside preset, CI's, has none to ship: package
# from the release preset for that). CPack 3.25's dbgsym package is not used: its md5sums
# name the build's absolute paths, which lintian and dpkg refuse.
option(FRS_DEB_STRIP "strip the programs in the .debs (OFF: ship them with their debug information)" ON)
set(CPACK_STRIP_FILES ${FRS_DEB_STRIP})

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME frsd)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)  # Depends from the programs' shared libraries
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "adduser, tzdata, init-system-helpers (>= 1.52)")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "nginx | haproxy, prometheus, python3-frs-client")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "frequency restrict service: may this key use this business now?\nFRS answers, before a web service, CGI script or ad server serves:\nmay this key use this business now? A pre-forked HTTP/XML server\nover counters kept in memory-mapped files that survive restarts,\nwith an admin CLI.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/package/deb/conffiles
    ${PROJECT_SOURCE_DIR}/tools/package/deb/postinst
    ${PROJECT_SOURCE_DIR}/tools/package/deb/prerm
    ${PROJECT_SOURCE_DIR}/tools/package/deb/postrm)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libfrs-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What a program linking libfrs.a needs: the libraries frs.pc names (no
# installed header includes Boost, which only the sources use), and
# pkg-config, which frsConfig.cmake calls.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libpugixml-dev, libxxhash-dev, libcctz-dev, pkgconf | pkg-config")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "frequency restrict service: the library for in-process decisions\nThe counter store and rule engine of FRS as a static library with its\nheaders, CMake package and pkg-config file: a program decides on the\nsame store files a running frsd uses.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-frs-client)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "frequency restrict service: the Python client\nOne module of the Python standard library only: asks frsd, or a\ncluster of them, whether a key may use a business now.")
set(CPACK_GENERATOR DEB)
include(CPack)
