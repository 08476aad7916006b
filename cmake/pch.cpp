// Compiled only to produce the precompiled header that every target reuses
// (CUBEPLANE_PCH in CMakeLists.txt).
