# rlock_write_pc.cmake - write rlock.pc at INSTALL time.
#
# Included from the install script (install(CODE)) so that the prefix is the
# one actually installed to (cmake --install --prefix <p> overrides the
# configure-time CMAKE_INSTALL_PREFIX). Inputs, set by the caller:
#   RLOCK_PC_TEMPLATE   path of rlock.pc.in (copied into the build tree)
#   RLOCK_PC_OUT        path of the rlock.pc to write (in the build tree)
#   RLOCK_PC_VERSION    project version
#   RLOCK_PC_LIBDIR_IN  CMAKE_INSTALL_LIBDIR (relative or absolute)
#   RLOCK_PC_INCDIR_IN  CMAKE_INSTALL_INCLUDEDIR (relative or absolute)
#   CMAKE_INSTALL_PREFIX (provided by the install script)

set(RLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
if(IS_ABSOLUTE "${RLOCK_PC_LIBDIR_IN}")
  set(RLOCK_PC_LIBDIR "${RLOCK_PC_LIBDIR_IN}")
else()
  set(RLOCK_PC_LIBDIR "\${prefix}/${RLOCK_PC_LIBDIR_IN}")
endif()
if(IS_ABSOLUTE "${RLOCK_PC_INCDIR_IN}")
  set(RLOCK_PC_INCLUDEDIR "${RLOCK_PC_INCDIR_IN}")
else()
  set(RLOCK_PC_INCLUDEDIR "\${prefix}/${RLOCK_PC_INCDIR_IN}")
endif()
configure_file("${RLOCK_PC_TEMPLATE}" "${RLOCK_PC_OUT}" @ONLY)
