// The translation unit that builds tests/pch/test_pch.h's precompiled header;
// the tests reuse it (tests/CMakeLists.txt).
