# BLAKE3: the official C implementation, built from the sources Debian ships in
# librust-blake3-dev. The .c files are C (blake3_dispatch.c does not compile as
# C++); the x86-64 assembly gives SSE2/SSE4.1/AVX2/AVX-512 with runtime dispatch.
file(GLOB GATOS_BLAKE3_CANDIDATES LIST_DIRECTORIES true
     "/usr/share/cargo/registry/blake3-*/c")
set(BLAKE3_C_DIR "" CACHE PATH "Directory holding the official BLAKE3 C sources")
if(NOT BLAKE3_C_DIR)
  list(SORT GATOS_BLAKE3_CANDIDATES)
  list(REVERSE GATOS_BLAKE3_CANDIDATES)
  list(GET GATOS_BLAKE3_CANDIDATES 0 BLAKE3_C_DIR)
endif()
if(NOT EXISTS "${BLAKE3_C_DIR}/blake3.h")
  message(FATAL_ERROR "BLAKE3 C sources not found. Install librust-blake3-dev "
                      "(scripts/install-deps.sh does) or set BLAKE3_C_DIR.")
endif()
message(STATUS "BLAKE3 sources: ${BLAKE3_C_DIR}")

set(GATOS_BLAKE3_SOURCES
    ${BLAKE3_C_DIR}/blake3.c
    ${BLAKE3_C_DIR}/blake3_dispatch.c
    ${BLAKE3_C_DIR}/blake3_portable.c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  list(APPEND GATOS_BLAKE3_SOURCES
       ${BLAKE3_C_DIR}/blake3_sse2_x86-64_unix.S
       ${BLAKE3_C_DIR}/blake3_sse41_x86-64_unix.S
       ${BLAKE3_C_DIR}/blake3_avx2_x86-64_unix.S
       ${BLAKE3_C_DIR}/blake3_avx512_x86-64_unix.S)
  set(GATOS_BLAKE3_DEFS "")
else()
  set(GATOS_BLAKE3_DEFS BLAKE3_NO_SSE2 BLAKE3_NO_SSE41 BLAKE3_NO_AVX2 BLAKE3_NO_AVX512)
endif()
add_library(blake3 STATIC ${GATOS_BLAKE3_SOURCES})
target_include_directories(blake3 SYSTEM PUBLIC ${BLAKE3_C_DIR})
target_compile_definitions(blake3 PRIVATE ${GATOS_BLAKE3_DEFS})
set_target_properties(blake3 PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 99)
