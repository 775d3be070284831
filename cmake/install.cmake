# Install rules, the CMake package, the pkg-config files and the Debian package (docs/using.md).
# Installed tree (under the prefix):
#   include/allockit/                       the public headers
#   lib/liballockit-prefixed.so.*, .a       ak_ names only          allockit::allockit(-static)
#   lib/liballockit.so.*, liballockit.a     overrides malloc        allockit::override(-static)
#   lib/liballockit-secure.so.*, .a         the secure build        allockit::secure(-static)
#   lib/cmake/allockit/                     find_package(allockit)
#   lib/pkgconfig/allockit{,-override}.pc   pkg-config
#   bin/allockit, libexec/allockit/         the trace lab and its helpers
#   share/allockit/python/                  the report package
#   share/doc/allockit/                     README and docs
include(CMakePackageConfigHelpers)
set(AK_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/allockit)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/allockit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(_libs allockit_prefixed allockit_prefixed_static)
if(TARGET allockit_preload)
  list(APPEND _libs allockit_preload allockit_override allockit_secure_preload allockit_secure_override)
endif()
install(TARGETS ${_libs} EXPORT allockitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT allockitTargets NAMESPACE allockit:: DESTINATION ${AK_CMAKE_INSTALL_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/allockitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/allockitConfig.cmake
                              INSTALL_DESTINATION ${AK_CMAKE_INSTALL_DIR})
# 0.x: a minor release may break the ABI, so 0.2 accepts 0.2.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/allockitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/allockitConfig.cmake ${PROJECT_BINARY_DIR}/allockitConfigVersion.cmake
        DESTINATION ${AK_CMAKE_INSTALL_DIR})

# pkg-config files locate the prefix from their own folder, so an install moved elsewhere (or a
# .deb unpacked with dpkg -x) still works.
file(RELATIVE_PATH AK_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" AK_PC_TO_PREFIX "${AK_PC_TO_PREFIX}")
foreach(pc allockit allockit-override)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

if(TARGET allockit_cli)
  install(TARGETS allockit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(TARGETS allockit_record allockit_replay_worker
          LIBRARY DESTINATION ${AK_HELPER_INSTALL_DIR} RUNTIME DESTINATION ${AK_HELPER_INSTALL_DIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/report/allockit_report DESTINATION ${AK_PYTHON_INSTALL_DIR}
          PATTERN __pycache__ EXCLUDE)
  # The plotting library the report's pages embed (tools/report/allockit_report/assets.py), with
  # its licence; scripts/install-deps.sh fetches it from npm.
  set(_plotly ${PROJECT_SOURCE_DIR}/tools/report/node_modules/plotly.js-cartesian-dist-min)
  if(EXISTS ${_plotly}/plotly-cartesian.min.js)
    install(FILES ${_plotly}/plotly-cartesian.min.js DESTINATION ${AK_PYTHON_INSTALL_DIR}/allockit_report/vendor)
    install(FILES ${_plotly}/LICENSE DESTINATION ${AK_PYTHON_INSTALL_DIR}/allockit_report/vendor
            RENAME plotly-LICENSE)
  else()
    message(WARNING "the report's plotting library is missing (run scripts/install-deps.sh): "
                    "an install's `allockit report` will say so")
  endif()
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})

# `make package`: allockit_<version>_amd64.deb, one package with the libraries, headers and tools.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME allockit)
set(CPACK_PACKAGE_VENDOR allockit)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "memory pools, arenas, a drop-in malloc and an allocation trace lab")
set(CPACK_PACKAGE_CONTACT "allockit developers <allockit@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # libc6, libstdc++6, libzstd1, zlib1g from the binaries
# The report; libunwind, which the recorder opens at run time for call stacks (no NEEDED entry).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, python3-numpy, libunwind8")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, pkg-config")
include(CPack)
