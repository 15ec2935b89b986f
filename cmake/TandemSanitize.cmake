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
  set(tandem_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(TANDEM_SANITIZE)
  message(FATAL_ERROR "TANDEM_SANITIZE='${TANDEM_SANITIZE}': expected thread, address or empty")
endif()

if(tandem_sanitize_flags)
  # -O1: the sanitizers' recommended level (readable stacks, still cheap to
  # run); with -g1 a sanitizer build compiles in about half the time of -O2 -g.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1")
  add_compile_options(${tandem_sanitize_flags} -fno-omit-frame-pointer)
  add_link_options(${tandem_sanitize_flags})
endif()
