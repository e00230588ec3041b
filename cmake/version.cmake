# --version: the release (project VERSION) and the git commit the build was configured from, written
# to ${CMAKE_BINARY_DIR}/generated/slicetune_version.hpp. git is run directly (execute_process, no
# shell). CMake reconfigures when HEAD or the branch it names moves, so a commit is seen by the next
# build; configure_file rewrites the header only when its text changes, so only its includers rebuild.
set(SLICETUNE_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" RESULT_VARIABLE _st_rc OUTPUT_VARIABLE _st_commit
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_st_rc EQUAL 0 AND _st_commit MATCHES "^[0-9a-f]+$")
    set(SLICETUNE_GIT_COMMIT "${_st_commit}")
    # the files whose change means a new commit: HEAD, the branch it points to, packed-refs
    set(_st_watch)
    foreach(_st_ref HEAD packed-refs)
      execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --path-format=absolute --git-path ${_st_ref}
                      WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" OUTPUT_VARIABLE _st_path OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      list(APPEND _st_watch "${_st_path}")
    endforeach()
    execute_process(COMMAND "${GIT_EXECUTABLE}" symbolic-ref -q HEAD
                    WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" RESULT_VARIABLE _st_rc OUTPUT_VARIABLE _st_branch
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_st_rc EQUAL 0)
      execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --path-format=absolute --git-path ${_st_branch}
                      WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}" OUTPUT_VARIABLE _st_path OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      list(APPEND _st_watch "${_st_path}")
    endif()
    foreach(_st_path ${_st_watch})
      if(EXISTS "${_st_path}")
        set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_st_path}")
      endif()
    endforeach()
  endif()
endif()
configure_file("${CMAKE_SOURCE_DIR}/cmake/slicetune_version.hpp.in" "${CMAKE_BINARY_DIR}/generated/slicetune_version.hpp" @ONLY)
