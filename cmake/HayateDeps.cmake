# Finding the build's dependencies, each named with the Debian package that
# provides it, so a missing install step fails with what to install rather
# than a bare "Could NOT find". scripts/setup.sh installs every one of them;
# docs/dependencies.md lists them and why each is needed.

# hayate_find_package(<Name> DEBIAN <package> [find_package arguments...])
# A macro, so that what find_package sets (targets, <Name>_FOUND, flags) lands
# in the caller's scope.
macro(hayate_find_package name)
  cmake_parse_arguments(_hayate_dep "" "DEBIAN" "" ${ARGN})
  find_package(${name} ${_hayate_dep_UNPARSED_ARGUMENTS} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "hayate: ${name} was not found: install Debian's `${_hayate_dep_DEBIAN}` "
                        "(scripts/setup.sh installs it)")
  endif()
endmacro()

# hayate_pkg_check(<PREFIX> <pkg-config module> <Debian package>): an IMPORTED
# target PkgConfig::<PREFIX>. A macro, since pkg_check_modules (itself a macro)
# reads ARGN, which a function would hand it as its own arguments.
macro(hayate_pkg_check prefix module debian)
  hayate_find_package(PkgConfig DEBIAN pkg-config)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "hayate: pkg-config module ${module} was not found: install Debian's "
                        "`${debian}` (scripts/setup.sh installs it)")
  endif()
endmacro()
