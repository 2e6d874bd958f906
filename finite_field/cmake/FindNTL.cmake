# FindNTL: NTL (and the GMP it is built on) as the imported target NTL::NTL.
find_path(NTL_INCLUDE_DIR NTL/ZZ.h)
find_library(NTL_LIBRARY ntl)
find_library(NTL_GMP_LIBRARY gmp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NTL REQUIRED_VARS NTL_LIBRARY NTL_GMP_LIBRARY NTL_INCLUDE_DIR)
if(NTL_FOUND AND NOT TARGET NTL::NTL)
  find_package(Threads REQUIRED)
  add_library(NTL::NTL UNKNOWN IMPORTED)
  set_target_properties(NTL::NTL PROPERTIES
    IMPORTED_LOCATION "${NTL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NTL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${NTL_GMP_LIBRARY};Threads::Threads")
endif()
mark_as_advanced(NTL_INCLUDE_DIR NTL_LIBRARY NTL_GMP_LIBRARY)
