// The translation unit whose only job is to build the test programs' shared
// precompiled header (tests/CMakeLists.txt, frs_test_pch).
