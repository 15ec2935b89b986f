# TANDEM_SANITIZE=thread|address: a sanitizer build (whole build directory).
# `thread` is ThreadSanitizer; `address` is AddressSanitizer with
# UndefinedBehaviorSanitizer, both stopping at the first report.
# scripts/test-sanitizers.sh configures build-tsan/ and build-asan/ this way
# and builds there only the targets each job runs.
set(TANDEM_SANITIZE "" CACHE STRING "Sanitizer build: thread, address (ASan + UBSan), or empty")
set_property(CACHE TANDEM_SANITIZE PROPERTY STRINGS "" thread address)

if(TANDEM_SANITIZE STREQUAL "thread")
  set(tandem_sanitize_flags -fsanitize=thread)
elseif(TANDEM_SANITIZE STREQUAL "address")
  # UBSan's checks that ASan does not cover: arithmetic (signed overflow,
  # shifts, division by zero), array bounds, invalid bool / enum loads,
  # missing returns, unreachable, VLA bounds. Its pointer checks are off
  # here: ASan reports the memory errors behind null, object-size and
  # pointer-overflow, vptr and alignment guard type confusion and
  # misalignment that x86 tolerates, and together they were 40% of this
  # build's compile time (http_session.cc 92 -> 52 s; ASan alone 55 s). The
  # libFuzzer targets (tests/fuzz, clang) keep all of UBSan on the parsers
  # that untrusted bytes reach.
  set(tandem_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all
      -fno-sanitize=null,alignment,object-size,pointer-overflow,vptr,nonnull-attribute,returns-nonnull-attribute)
elseif(TANDEM_SANITIZE)
  message(FATAL_ERROR "TANDEM_SANITIZE='${TANDEM_SANITIZE}': expected thread, address or empty")
endif()

if(tandem_sanitize_flags)
  # -Og: GCC's level for debugging builds. Instrumented code is cheap enough
  # to run at it, and under ASan + UBSan a test compiles in ~55% of -O1's time
  # (step_executor_test.cc: 13.7 vs 24.8 s user; http_session.cc: 99 vs 155 s),
  # which is most of CI's sanitizer stages. -g1: line tables, so reports keep
  # file:line.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-Og -g1")
  add_compile_options(${tandem_sanitize_flags} -fno-omit-frame-pointer)
  add_link_options(${tandem_sanitize_flags})
endif()
