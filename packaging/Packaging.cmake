# Packages for fleet operators: one .deb and one .rpm per program (CPack components named
# after the programs), with their systemd units, config files, man pages, completion and
# changelog. Included at the end of the top-level CMakeLists.txt.
#   cmake --build BUILD --target package     (or: cd BUILD && cpack -G DEB)
# The version is project(VERSION); the package release is SF_PACKAGE_RELEASE.

include(GNUInstallDirs)

set(SF_PACKAGE_RELEASE 1 CACHE STRING "The package release (the -N after the version)")
set(SF_PKG_SRC ${PROJECT_SOURCE_DIR}/packaging)
set(SF_PKG_OUT ${PROJECT_BINARY_DIR}/packaging)
set(SF_PACKAGES superfluid-headd superfluid-noded superfluid)
set(SF_MAINTAINER "superfluid maintainers <maintainers@users.noreply.a-seed-02ffad0c.example>")

# The programs print the same version: SF_VERSION, defined from PROJECT_VERSION in the
# top-level CMakeLists.txt (ctest proc.version checks their --version).

# --- The changelog: packaging/changelog (Debian format, newest first) is the Debian
# changelog as it stands, gzipped, and is rewritten into the rpm %changelog.
file(STRINGS ${SF_PKG_SRC}/changelog cl_lines)
set(rpm_changelog "")
set(cl_version "")
set(cl_items "")
foreach(l IN LISTS cl_lines)
  if(l MATCHES "^[a-z0-9.+-]+ \\(([^)]+)\\)")
    set(entry_version ${CMAKE_MATCH_1})
    if(NOT cl_version)
      set(cl_version ${entry_version})
    endif()
    set(cl_items "")
  elseif(l MATCHES "^  \\* (.*)$")
    string(APPEND cl_items "- ${CMAKE_MATCH_1}\n")
  elseif(l MATCHES "^    (.*)$")
    string(REGEX REPLACE "\n$" " ${CMAKE_MATCH_1}\n" cl_items "${cl_items}")
  elseif(l MATCHES "^ -- (.*>)  ([A-Za-z]+), ([0-9]+) ([A-Za-z]+) ([0-9]+) ")
    # " -- WHO  Thu, 03 Dec 2026 08:36:01 +0000" -> "* Thu Dec 03 2026 WHO - VERSION"
    string(APPEND rpm_changelog "* ${CMAKE_MATCH_2} ${CMAKE_MATCH_4} ${CMAKE_MATCH_3} "
      "${CMAKE_MATCH_5} ${CMAKE_MATCH_1} - ${entry_version}\n${cl_items}\n")
  endif()
endforeach()
file(WRITE ${SF_PKG_OUT}/rpm-changelog "${rpm_changelog}")
if(NOT cl_version STREQUAL "${PROJECT_VERSION}-${SF_PACKAGE_RELEASE}")
  message(WARNING "packaging/changelog: the newest entry is ${cl_version}, the packages are "
    "${PROJECT_VERSION}-${SF_PACKAGE_RELEASE}: add an entry for them")
endif()
add_custom_command(OUTPUT ${SF_PKG_OUT}/changelog.Debian.gz
  COMMAND ${CMAKE_COMMAND} -E copy ${SF_PKG_SRC}/changelog ${SF_PKG_OUT}/changelog.Debian
  COMMAND gzip -9nf ${SF_PKG_OUT}/changelog.Debian
  DEPENDS ${SF_PKG_SRC}/changelog VERBATIM)

# --- Man pages: docs/man/<page>.md (version filled in) through go-md2man, gzipped.
find_program(SF_GO_MD2MAN go-md2man)
set(sf_pkg_outputs ${SF_PKG_OUT}/changelog.Debian.gz)
set(sf_man_pages superfluid-headd.8 superfluid-noded.8 superfluid.1)
if(SF_GO_MD2MAN)
  foreach(page ${sf_man_pages})
    configure_file(${PROJECT_SOURCE_DIR}/docs/man/${page}.md ${SF_PKG_OUT}/man/${page}.md @ONLY)
    add_custom_command(OUTPUT ${SF_PKG_OUT}/man/${page}.gz
      COMMAND ${SF_GO_MD2MAN} -in ${SF_PKG_OUT}/man/${page}.md -out ${SF_PKG_OUT}/man/${page}
      COMMAND gzip -9nf ${SF_PKG_OUT}/man/${page}
      DEPENDS ${SF_PKG_OUT}/man/${page}.md VERBATIM)
    list(APPEND sf_pkg_outputs ${SF_PKG_OUT}/man/${page}.gz)
  endforeach()
else()
  message(STATUS "go-md2man not found: no man pages (apt-get install go-md2man)")
endif()
add_custom_target(packaging_files ALL DEPENDS ${sf_pkg_outputs})

# --- The licence: LICENSE (Apache-2.0) as /usr/share/doc/PKG/copyright, in Debian's
# machine-readable format with the full text, so it stands alone in the .rpms too.
file(READ ${PROJECT_SOURCE_DIR}/LICENSE sf_license)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE)
string(REGEX REPLACE "^\n+" "" sf_license "${sf_license}")
string(REGEX REPLACE "\n+$" "" sf_license "${sf_license}")
string(REGEX REPLACE "\n" "\n " sf_license " ${sf_license}")
string(REGEX REPLACE "\n[ \t]+\n" "\n .\n" sf_license "${sf_license}")
string(REGEX REPLACE "\n[ \t]+\n" "\n .\n" sf_license "${sf_license}") # adjacent blank lines
file(WRITE ${SF_PKG_OUT}/copyright
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: superfluid
Upstream-Contact: ${SF_MAINTAINER}

Files: *
Copyright: 2026 the superfluid authors
License: Apache-2.0

License: Apache-2.0
${sf_license}
")

# --- What each package installs (besides its program: the install() in CMakeLists.txt).
set(sf_units_superfluid-headd superfluid-headd.service)
set(sf_units_superfluid-noded superfluid-noded.service superfluid-noded@.service)
set(sf_conf_superfluid-headd headd.conf)
set(sf_conf_superfluid-noded noded.conf)
set(sf_man_superfluid-headd superfluid-headd.8)
set(sf_man_superfluid-noded superfluid-noded.8)
set(sf_man_superfluid superfluid.1)
foreach(p ${SF_PACKAGES})
  install(FILES ${SF_PKG_OUT}/changelog.Debian.gz ${SF_PKG_OUT}/copyright
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${p} COMPONENT ${p})
  if(SF_GO_MD2MAN)
    string(REGEX MATCH "[0-9]$" section ${sf_man_${p}})
    install(FILES ${SF_PKG_OUT}/man/${sf_man_${p}}.gz
      DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${p})
  endif()
endforeach()
foreach(p superfluid-headd superfluid-noded)
  foreach(u ${sf_units_${p}})
    install(FILES ${SF_PKG_SRC}/systemd/${u} DESTINATION lib/systemd/system COMPONENT ${p})
  endforeach()
  install(FILES ${SF_PKG_SRC}/sysusers/superfluid.conf DESTINATION lib/sysusers.d
    RENAME ${p}.conf COMPONENT ${p})
  install(FILES ${SF_PKG_SRC}/etc/${sf_conf_${p}} DESTINATION /etc/superfluid COMPONENT ${p})
  install(FILES ${PROJECT_SOURCE_DIR}/docs/OPERATIONS.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${p}
    COMPONENT ${p})
endforeach()
install(FILES ${SF_PKG_SRC}/completion/superfluid.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME superfluid
  COMPONENT superfluid)

# --- Maintainer scripts: the user and systemd (see packaging/scripts/).
file(READ ${SF_PKG_SRC}/scripts/adduser.sh sf_adduser_tmpl)
foreach(p superfluid-headd superfluid-noded)
  set(SF_PKG ${p})
  string(CONFIGURE "${sf_adduser_tmpl}" SF_ADDUSER @ONLY)
  list(JOIN sf_units_${p} " " SF_UNITS)
  string(REGEX REPLACE "([a-z-]+)@.service" "'\\1@*.service'" SF_UNITS "${SF_UNITS}") # a glob for systemctl
  list(GET sf_units_${p} 0 SF_ENABLE_UNITS)
  foreach(s postinst prerm postrm rpm-post rpm-preun rpm-postun)
    configure_file(${SF_PKG_SRC}/scripts/${s}.in ${SF_PKG_OUT}/${p}/${s} @ONLY
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
      WORLD_READ WORLD_EXECUTE)
  endforeach()
  file(WRITE ${SF_PKG_OUT}/${p}/conffiles "/etc/superfluid/${sf_conf_${p}}\n")
endforeach()

# --- CPack.
set(CPACK_PACKAGE_NAME superfluid)
set(CPACK_PACKAGE_VENDOR superfluid)
set(CPACK_PACKAGE_CONTACT "${SF_MAINTAINER}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_GENERATOR DEB)
find_program(SF_RPMBUILD rpmbuild)
if(SF_RPMBUILD)
  list(APPEND CPACK_GENERATOR RPM)
else()
  message(STATUS "rpmbuild not found: .deb packages only (apt-get install rpm)")
endif()
set(CPACK_COMPONENTS_ALL ${SF_PACKAGES})
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_RPM_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${SF_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# dpkg-shlibdeps reads each program's DT_NEEDED: liburing2, libsodium23, libssl3,
# libjemalloc2, libjansson4, libhttp-parser2.9 (and libcurl4 for the CLI), with versions.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE ${SF_PACKAGE_RELEASE})
set(CPACK_PACKAGE_RELOCATABLE OFF) # /etc cannot move with the prefix
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0") # SPDX; the text: LICENSE, /usr/share/doc/PKG/copyright
set(CPACK_RPM_PACKAGE_GROUP "System Environment/Daemons")
set(CPACK_RPM_CHANGELOG_FILE ${SF_PKG_OUT}/rpm-changelog)
# rpmbuild's own requirements on the libraries' sonames stay on (AutoReq); the package
# names below are the Fedora / RHEL ones of the same libraries.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
  /etc /usr/lib/systemd /usr/lib/systemd/system /usr/lib/sysusers.d /usr/share/bash-completion
  /usr/share/bash-completion/completions /usr/share/man /usr/share/man/man1 /usr/share/man/man8
  /usr/share/doc)

set(sf_summary_superfluid-headd "superfluid head: fleet placement and the OpenAI-compatible HTTP API")
set(sf_summary_superfluid-noded "superfluid inference node")
set(sf_summary_superfluid "superfluid command-line client and operator tool")
set(sf_desc_superfluid-headd "superfluid-headd keeps long-lived links to the fleet's nodes, places
conversation sessions on them and streams generated tokens to clients through an
OpenAI-compatible HTTP API. A hardened systemd unit (Type=notify, watchdog) runs it
as the user superfluid with /etc/superfluid/headd.conf.")
set(sf_desc_superfluid-noded "superfluid-noded runs on each inference machine next to an engine,
holding the conversations' contexts and the fleet links to its heads. Hardened
systemd units run one node (superfluid-noded.service) or several on one host
(superfluid-noded@NAME.service) as the user superfluid.")
set(sf_desc_superfluid "superfluid generates, chats, tokenizes and reads the fleet's status through
superfluid-headd's HTTP API or its admin socket.")
set(sf_rpm_requires_superfluid-headd "liburing, libsodium, openssl-libs, jemalloc, jansson, http-parser")
set(sf_rpm_requires_superfluid-noded "liburing, libsodium, jemalloc")
set(sf_rpm_requires_superfluid "jemalloc, jansson, libcurl")

foreach(p ${SF_PACKAGES})
  string(TOUPPER ${p} P)
  set(CPACK_COMPONENT_${P}_DESCRIPTION "${sf_summary_${p}}\n${sf_desc_${p}}")
  set(CPACK_DEBIAN_${P}_PACKAGE_NAME ${p})
  set(CPACK_RPM_${P}_PACKAGE_NAME ${p})
  set(CPACK_RPM_${P}_PACKAGE_SUMMARY "${sf_summary_${p}}")
  set(CPACK_RPM_${P}_PACKAGE_DESCRIPTION "${sf_desc_${p}}")
  set(CPACK_RPM_${P}_PACKAGE_REQUIRES "${sf_rpm_requires_${p}}")
  # The Debian changelog is for the .deb; the rpm has its %changelog.
  set(CPACK_RPM_${P}_USER_FILELIST "%exclude /usr/share/doc/${p}/changelog.Debian.gz")
endforeach()
foreach(p superfluid-headd superfluid-noded)
  string(TOUPPER ${p} P)
  set(d ${SF_PKG_OUT}/${p})
  set(CPACK_DEBIAN_${P}_PACKAGE_CONTROL_EXTRA ${d}/postinst ${d}/prerm ${d}/postrm ${d}/conffiles)
  set(CPACK_DEBIAN_${P}_PACKAGE_DEPENDS passwd) # useradd, where systemd-sysusers is not
  set(CPACK_RPM_${P}_POST_INSTALL_SCRIPT_FILE ${d}/rpm-post)
  set(CPACK_RPM_${P}_PRE_UNINSTALL_SCRIPT_FILE ${d}/rpm-preun)
  set(CPACK_RPM_${P}_POST_UNINSTALL_SCRIPT_FILE ${d}/rpm-postun)
  list(APPEND CPACK_RPM_${P}_USER_FILELIST
    "%config(noreplace) /etc/superfluid/${sf_conf_${p}}" "%dir /etc/superfluid")
endforeach()
set(CPACK_DEBIAN_SUPERFLUID-HEADD_PACKAGE_SUGGESTS superfluid)
set(CPACK_DEBIAN_SUPERFLUID-NODED_PACKAGE_SUGGESTS superfluid)

include(CPack)

# The shipped config files show every option of their daemon, and their values parse.
if(BUILD_TESTING AND TARGET superfluid-headd AND TARGET superfluid-noded)
  add_test(NAME packaging.conf COMMAND bash ${SF_PKG_SRC}/check-conf
    $<TARGET_FILE:superfluid-headd> ${SF_PKG_SRC}/etc/headd.conf
    $<TARGET_FILE:superfluid-noded> ${SF_PKG_SRC}/etc/noded.conf)
  set_tests_properties(packaging.conf PROPERTIES LABELS packages TIMEOUT 60)
endif()
# The packages built, installed on this machine, run, verified and removed again (about
# 25 s; needs root or passwordless sudo, else skipped). Not for sanitizer builds.
if(BUILD_TESTING AND NOT SF_SANITIZE AND NOT SF_FUZZ)
  add_test(NAME packaging.install
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/test-packages ${PROJECT_BINARY_DIR})
  set_tests_properties(packaging.install PROPERTIES LABELS packages TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
