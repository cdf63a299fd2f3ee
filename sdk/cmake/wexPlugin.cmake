# wex_add_plugin(<target>
#     NAME <name> KIND engine|policy|transport
#     MANIFEST <manifest.json.in>
#     SOURCES <src>...
#     [LINK_LIBRARIES <lib>...]
#     [OUTPUT_DIRECTORY <dir>] [INSTALL_DESTINATION <dir>] [NO_INSTALL])
#
# Builds a wex plugin exactly as the host expects it:
#  - a MODULE library named libwex-<kind>-<name>.so, position independent;
#  - every symbol hidden except the one WEX_PLUGIN_EXPORT marks;
#  - linked with -z defs, so a plugin that leans on host symbols fails to
#    link instead of failing to load inside someone else's process;
#  - its manifest configured from MANIFEST (@WEX_PLUGIN_LIBRARY@ becomes the
#    library's file name, @WEX_PLUGIN_NAME@ the name) into <kind>-<name>.json
#    beside the library, and both installed together.
function(wex_add_plugin target)
  cmake_parse_arguments(P "NO_INSTALL" "NAME;KIND;MANIFEST;OUTPUT_DIRECTORY;INSTALL_DESTINATION"
                        "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT P_NAME OR NOT P_KIND OR NOT P_MANIFEST OR NOT P_SOURCES)
    message(FATAL_ERROR "wex_add_plugin(${target}): NAME, KIND, MANIFEST and SOURCES are required")
  endif()
  if(NOT P_KIND MATCHES "^(engine|policy|transport)$")
    message(FATAL_ERROR "wex_add_plugin(${target}): KIND must be engine, policy or transport, not '${P_KIND}'")
  endif()
  if(NOT P_OUTPUT_DIRECTORY)
    if(DEFINED WEX_PLUGIN_OUTPUT_DIR)
      set(P_OUTPUT_DIRECTORY "${WEX_PLUGIN_OUTPUT_DIR}")
    else()
      set(P_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endif()
  if(NOT P_INSTALL_DESTINATION)
    include(GNUInstallDirs)
    set(P_INSTALL_DESTINATION "${CMAKE_INSTALL_LIBDIR}/wex/plugins")
  endif()

  add_library(${target} MODULE ${P_SOURCES})
  set(libname "wex-${P_KIND}-${P_NAME}")
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "${libname}"
    LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIRECTORY}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(TARGET wex::sdk)
    target_link_libraries(${target} PRIVATE wex::sdk)
  endif()
  if(P_LINK_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${P_LINK_LIBRARIES})
  endif()
  target_link_options(${target} PRIVATE "-Wl,-z,defs")

  set(WEX_PLUGIN_NAME "${P_NAME}")
  set(WEX_PLUGIN_KIND "${P_KIND}")
  set(WEX_PLUGIN_LIBRARY "lib${libname}.so")
  get_filename_component(manifest_in "${P_MANIFEST}" ABSOLUTE)
  set(manifest_out "${P_OUTPUT_DIRECTORY}/${P_KIND}-${P_NAME}.json")
  configure_file("${manifest_in}" "${manifest_out}" @ONLY)
  set_target_properties(${target} PROPERTIES WEX_MANIFEST "${manifest_out}")

  if(NOT P_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION "${P_INSTALL_DESTINATION}")
    install(FILES "${manifest_out}" DESTINATION "${P_INSTALL_DESTINATION}")
  endif()
endfunction()
