# The FAISS build's flags for this workspace.
#
# The `faiss-sys` crate (feature `static`) compiles the FAISS it vendors
# with CMake, at CMake's Release default of -O3. `.cargo/config.toml`
# names this file in CMAKE_TOOLCHAIN_FILE, which the `cmake` crate passes
# to CMake, and CMake reads it before FAISS's own CMakeLists.txt.
#
# -O2 instead of -O3: FAISS's compile takes 186 CPU-seconds instead of
# 266 on the machines this project is built on, because one file the
# field never uses (the fast-scan kernels, impl/pq4_fast_scan_search_qbs.cpp)
# takes 85 s at -O3 and 27 s at -O2. The field searches a flat
# inner-product index (a scalar inner-product loop, or BLAS for batches),
# re-scores every candidate in its own fixed-order kernel and ranks on
# that, so its results do not depend on these flags; docs/BENCHMARKS.md
# ("The first build") has the measurement and the checks.
#
# A cache entry, not CMAKE_CXX_FLAGS_RELEASE_INIT: CMake's GNU module
# appends its own -O3 to the _INIT value, and the last -O wins.
set(CMAKE_CXX_FLAGS_RELEASE "-O2 -DNDEBUG" CACHE STRING "FAISS's Release flags (see the comment at the top of this file)" FORCE)
set(CMAKE_C_FLAGS_RELEASE "-O2 -DNDEBUG" CACHE STRING "FAISS's Release flags (see the comment at the top of this file)" FORCE)
