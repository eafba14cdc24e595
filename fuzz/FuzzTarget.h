//===- FuzzTarget.h - the fuzz targets' entry point -------------*- C++ -*-===//
//
// Every target defines LLVMFuzzerTestOneInput; built with
// -fsanitize=fuzzer it is a libFuzzer binary (scripts/fuzz.sh), built with
// RegressionMain.cpp it replays files (the ctest regressions).
//
//===----------------------------------------------------------------------===//
#ifndef CNNC_FUZZ_FUZZTARGET_H
#define CNNC_FUZZ_FUZZTARGET_H

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
