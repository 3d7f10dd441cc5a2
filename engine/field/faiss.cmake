# The FAISS build's flags for this workspace.
#
# The `faiss-sys` crate (feature `static`) compiles the FAISS it vendors
# with CMake, in Release mode (-O3). `.cargo/config.toml` names this file
# in CMAKE_TOOLCHAIN_FILE, which the `cmake` crate passes on to CMake;
# CMake reads it when FAISS's CMakeLists.txt calls project().
#
# Two files of FAISS are compiled at -O1 instead of -O3: the fast-scan
# kernels (impl/pq4_fast_scan_search_qbs.cpp and _1.cpp), which serve
# FAISS's PQ fast-scan indexes. The field uses a flat inner-product index
# and never calls them, but at -O3 they cost 100 of FAISS's 266
# CPU-seconds of compile (20 at -O1), most of it on the first build's
# critical path. Everything the field runs stays at -O3: at -O2, GCC no
# longer vectorises FAISS's inner-product loop and a single query over
# 5,000 x 2,048 runs 4x slower. docs/BENCHMARKS.md ("The first build")
# has the measurements.
#
# Source properties must be set once FAISS's faiss/ directory has been
# read, so the project include below defers the call to the end of the
# top-level CMakeLists.txt.
set(CMAKE_PROJECT_faiss_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/faiss-project.cmake")
