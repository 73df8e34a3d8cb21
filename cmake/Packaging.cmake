# Installation layout and the Debian package (CPack):
#   cmake --install BUILD [--prefix /usr/local]     installs the tree below under the prefix
#   cd BUILD && cpack -G DEB                        writes ptybox_<version>_amd64.deb (prefix /usr)
# The package holds /usr/bin/ptybox, /usr/libexec/ptybox/ptybox-init (ptybox finds it relative to
# its own binary: ../libexec/ptybox/), /etc/ptybox/policy.yaml (a conffile that sets nothing but
# `version: 1`, so the built-in defaults still apply), the docs under /usr/share/doc/ptybox (README.md, docs/, examples/) and
# the man page ptybox(1). Its Depends are computed by dpkg-shlibdeps from the binaries, plus
# bubblewrap. docs/container.md and README.md ("Install") describe both.
include(GNUInstallDirs)

# Docs and the man page go with every install; the example policy only into the package (a
# `cmake --install` to /usr/local must not write /etc). The docs keep the repository's layout
# (README.md, docs/, examples/, clients/, and the images/ files the docs name), so every relative link of
# the installed README and docs resolves (tests/docs/check_installed_docs.sh checks it).
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ptybox)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT ptybox
        FILES_MATCHING PATTERN "*.md" PATTERN "*.json")
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT ptybox)
# The typed clients' sources (docs/clients.md links their READMEs; examples/ uses them), without
# what building or installing them leaves in a clone.
install(DIRECTORY clients/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/clients COMPONENT ptybox
        PATTERN dist EXCLUDE PATTERN node_modules EXCLUDE PATTERN build EXCLUDE
        PATTERN *.egg-info EXCLUDE PATTERN __pycache__ EXCLUDE)
install(FILES images/Dockerfile images/policy.yaml images/runtime-packages.txt
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/images COMPONENT ptybox)
set(_ptybox_man ${CMAKE_CURRENT_BINARY_DIR}/ptybox.1.gz)
find_program(PTYBOX_GZIP gzip REQUIRED)
add_custom_command(OUTPUT ${_ptybox_man}
  COMMAND ${PTYBOX_GZIP} -9 -n -c ${CMAKE_CURRENT_SOURCE_DIR}/packaging/ptybox.1 > ${_ptybox_man}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/packaging/ptybox.1 VERBATIM)
add_custom_target(ptybox-man ALL DEPENDS ${_ptybox_man})
install(FILES ${_ptybox_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ptybox)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ptybox)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ptybox maintainers <ptybox@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "persistent, sandboxed, interactive shells for AI agents and CI jobs")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # ptybox_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE "")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libc6, libstdc++6, libyaml-cpp0.7, libseccomp2, ...
set(CPACK_DEBIAN_PACKAGE_DEPENDS "bubblewrap")
# CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY first; this is the long description.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "ptybox serves bash sessions in real pseudo-terminals over JSON-RPC (stdio or a Unix socket)\n\
and as an MCP server; every session is confined by bubblewrap (namespaces, seccomp, no\n\
capabilities, resource limits) under an operator policy. `ptybox doctor` checks the host.")
# The example operator policy is a conffile: dpkg keeps a local edit on upgrade.
# (CONTROL_EXTRA keeps the file's name, so it must be called "conffiles".)
set(_ptybox_conffiles ${CMAKE_CURRENT_BINARY_DIR}/debian/conffiles)
file(WRITE ${_ptybox_conffiles} "/etc/ptybox/policy.yaml\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${_ptybox_conffiles})
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# /etc is absolute: it stays /etc whatever the package prefix.
install(FILES packaging/policy.yaml DESTINATION /etc/ptybox COMPONENT ptybox-conf
        EXCLUDE_FROM_ALL)
# One package of every component (the binaries' rules have none: "Unspecified").
set(CPACK_COMPONENTS_ALL Unspecified ptybox ptybox-conf)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
include(CPack)
