# FindCHOLMOD: SuiteSparse's CHOLMOD (and SuiteSparse_config) as the imported target
# CHOLMOD::CHOLMOD. Debian's SuiteSparse 5.12 ships no usable CMake package, so search by hand.
find_path(CHOLMOD_INCLUDE_DIR suitesparse/cholmod.h)
find_library(CHOLMOD_LIBRARY cholmod)
find_library(CHOLMOD_CONFIG_LIBRARY suitesparseconfig)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CHOLMOD
  REQUIRED_VARS CHOLMOD_LIBRARY CHOLMOD_CONFIG_LIBRARY CHOLMOD_INCLUDE_DIR)
if(CHOLMOD_FOUND AND NOT TARGET CHOLMOD::CHOLMOD)
  add_library(CHOLMOD::CHOLMOD UNKNOWN IMPORTED)
  set_target_properties(CHOLMOD::CHOLMOD PROPERTIES
    IMPORTED_LOCATION "${CHOLMOD_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CHOLMOD_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CHOLMOD_CONFIG_LIBRARY}")
endif()
mark_as_advanced(CHOLMOD_INCLUDE_DIR CHOLMOD_LIBRARY CHOLMOD_CONFIG_LIBRARY)
