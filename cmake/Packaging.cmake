# Installation and the Debian package (docs/install.md):
#   cmake --build build --target package      (or: cd build && cpack -G DEB)
# installs the programs, the systemd units, example settings and the docs.
include(GNUInstallDirs)

install(TARGETS gatos gatosd gatos-worker gatos-supervise gatos-scan
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES packaging/systemd/gatosd.service packaging/systemd/gatos-worker.service
        DESTINATION lib/systemd/system)
install(FILES packaging/config/gatosd.yaml packaging/config/worker.yaml packaging/systemd/nats-server-gatos.conf
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES README.md docs/deployment.md docs/install.md docs/operations.md docs/auditor-guide.md
              docs/protocol.md docs/keys.md docs/limits.md docs/threat-model.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME "gatos")
set(CPACK_PACKAGE_VENDOR "GATOS")
set(CPACK_PACKAGE_CONTACT "GATOS maintainers <gatos@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Git-native job plane: ledger daemon, workers, CLI and auditor")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Git-native job plane: ledger daemon, workers, CLI and auditor\n GATOS runs jobs recorded in a git ledger: gatosd keeps the ledger and serves\n workers over NATS JetStream, gatos-worker runs jobs in a sandbox and signs\n their results, and gatos submits, waits for and verifies them offline.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "git (>= 1:2.34), adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "nats-server, bubblewrap, openssh-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postinst;${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/prerm;${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
