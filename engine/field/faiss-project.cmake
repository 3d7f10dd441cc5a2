# Included by CMake at the end of FAISS's project() call (faiss.cmake
# beside this file says why): the fast-scan kernels, which the field never
# calls, compile at -O1. A per-source option comes after the Release
# flags on the compiler's command line, and the last -O wins.
function(sim_engine_faiss_kernels_o1)
  foreach(kernel pq4_fast_scan_search_qbs.cpp pq4_fast_scan_search_1.cpp)
    set(path "${PROJECT_SOURCE_DIR}/faiss/impl/${kernel}")
    if(NOT EXISTS "${path}")
      message(FATAL_ERROR "engine/field/faiss-project.cmake: ${path} is not in this FAISS; update the list")
    endif()
    set_source_files_properties("${path}" DIRECTORY "${PROJECT_SOURCE_DIR}/faiss" PROPERTIES COMPILE_OPTIONS "-O1")
  endforeach()
endfunction()
cmake_language(DEFER CALL sim_engine_faiss_kernels_o1)
