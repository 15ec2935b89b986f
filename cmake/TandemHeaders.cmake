# Per-target include directories (DESIGN.md "Layout": each target declares
# its include directories; no global include path).
#
# Every header is included by its path from the repository root
# ("engine/kv/block_pool.h"). tandem_headers(TARGET DIR dir [PRIVATE] [ONLY h...]
# [EXCLUDE h...]) links the headers (*.h, and *.cuh for CUDA sources)
# directly in `dir` (not its subfolders;
# ONLY / EXCLUDE pick among them) into an include tree of the target's own,
# build/include/TARGET/dir/, and puts that tree on the target's PUBLIC include
# path. A target therefore reaches only its own headers and those of the
# targets it links: including a header across an undeclared dependency fails
# to compile. With PRIVATE the tree is on the target's private include path
# only (a target that is installed and exported keeps build paths out of its
# interface).
# A header added to a folder appears at the next configure
# (CONFIGURE_DEPENDS re-runs it when a folder's headers change).

function(tandem_headers target)
  cmake_parse_arguments(H "PRIVATE" "DIR" "ONLY;EXCLUDE" ${ARGN})
  set(root "${CMAKE_BINARY_DIR}/include/${target}")
  file(GLOB headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}/${H_DIR}"
       "${PROJECT_SOURCE_DIR}/${H_DIR}/*.h" "${PROJECT_SOURCE_DIR}/${H_DIR}/*.cuh")
  if(H_ONLY)
    set(headers ${H_ONLY})
  endif()
  if(H_EXCLUDE)
    list(REMOVE_ITEM headers ${H_EXCLUDE})
  endif()
  file(MAKE_DIRECTORY "${root}/${H_DIR}")
  foreach(header ${headers})
    set(link "${root}/${H_DIR}/${header}")
    if(NOT EXISTS "${link}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${H_DIR}/${header}" "${link}" SYMBOLIC)
    endif()
  endforeach()
  if(H_PRIVATE)
    target_include_directories(${target} PRIVATE "${root}")
  else()
    target_include_directories(${target} PUBLIC "${root}")
  endif()
endfunction()
