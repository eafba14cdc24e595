// REQUIRES: nvcc
// `cnnc --emit lib -o libstep.so` builds the step as a shared library: the
// generated code ends with the C API's model accessor instead of main, all of
// libcnnrt's C API is linked in and exported (nothing else is), and without a
// GPU cnnrt_create returns NULL with a message instead of exiting.
// RUN: rm -rf %t && mkdir -p %t
// RUN: cnnc %S/Inputs/small_cnn.mlir --emit lib -o %t/libstep.so --arch sm_80 2>&1 | FileCheck %s --check-prefix=BUILD
// RUN: test -s %t/libstep.so && test -f %t/libstep.so.cnnw
// RUN: FileCheck %s --check-prefix=SRC < %t/libstep.so.cu
// RUN: nm -D --defined-only %t/libstep.so | FileCheck %s --check-prefix=SYMS
// RUN: nm -D --defined-only %t/libstep.so | not grep -v ' cnnrt_'
// RUN: env CUDA_VISIBLE_DEVICES= %python -c "import ctypes as C; l = C.CDLL('%t/libstep.so'); l.cnnrt_model_spec.restype = C.c_void_p; l.cnnrt_create.restype = C.c_void_p; l.cnnrt_create.argtypes = [C.c_void_p, C.c_char_p, C.c_int]; l.cnnrt_last_error.restype = C.c_char_p; s = l.cnnrt_create(l.cnnrt_model_spec(), None, 1); print(s, l.cnnrt_last_error().decode())" | FileCheck %s --check-prefix=NOGPU
// BUILD: cnnc: built '{{.*}}libstep.so' (weights '{{.*}}libstep.so.cnnw', source '{{.*}}libstep.so.cu')
// SRC-NOT: int main(
// SRC: extern "C" __attribute__((visibility("default"))) const void *
// SRC-NEXT: cnnrt_model_spec(void) { return &kModel; }
// SYMS-DAG: T cnnrt_create
// SYMS-DAG: T cnnrt_train_step
// SYMS-DAG: T cnnrt_eval_input
// SYMS-DAG: T cnnrt_read_state
// SYMS-DAG: T cnnrt_write_state
// SYMS-DAG: T cnnrt_model_spec
// NOGPU: None cnnrt: no CUDA GPU available
