//===- Error.h - the runtime's errors -------------------------*- C++ -*-===//
//
// A failure inside libcnnrt (no GPU, out of GPU memory, a CUDA, cuDNN or
// cuBLASLt error, a bad CNNRT_* setting, a misuse of the Context) is thrown
// as a cnnrt::Error rather than ending the process: an embedder (the C API,
// hence Python) must survive it. The boundaries turn it into what their
// caller expects: the C API (CApi.cu) returns -1 and keeps the message for
// cnnrt_last_error(); trainMain prints the message and exits with
// exitCode() (docs/runtime.md's exit codes).
//
//===----------------------------------------------------------------------===//
#ifndef CNNRT_ERROR_H
#define CNNRT_ERROR_H

#include <stdexcept>
#include <string>

namespace cnnrt {

/// Exit codes of the runtime.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitOutOfMemory = 2,
  kExitNoGPU = 3
};

/// What failed. The values are the C API's (cnnrt_c.h, CNNRT_ERROR_*).
enum class ErrorKind : int {
  Invalid = 1,     ///< a bad argument, file, model or use of the Context
  NoGPU = 2,       ///< no usable GPU (no device, driver too old, no cuDNN)
  OutOfMemory = 3, ///< a GPU allocation failed (the message has the plan)
  Cuda = 4,        ///< a CUDA runtime call or a kernel failed
  Cudnn = 5,       ///< a cuDNN call failed
  Cublas = 6,      ///< a cuBLASLt call failed
  Config = 7,      ///< a CNNRT_* environment setting cannot be honoured
  DataParallel = 8 ///< NCCL, the rendezvous or a peer rank failed
};

/// A runtime failure. what() is the whole message as trainMain prints it
/// (one or more lines starting "cnnrt: ", no final newline).
class Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string &message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  /// The standalone executable's exit status for this error.
  int exitCode() const {
    return kind_ == ErrorKind::NoGPU         ? kExitNoGPU
           : kind_ == ErrorKind::OutOfMemory ? kExitOutOfMemory
                                             : kExitError;
  }

private:
  ErrorKind kind_;
};

/// A failure that leaves work on the device that may never finish: a
/// collective of an aborted NCCL communicator (a peer died or hangs).
/// Afterwards Context teardown gives nothing back to CUDA (freeing
/// synchronizes, and would wait forever); the process should end soon.
void markDeviceStuck();
bool deviceStuck();
/// The standalone executable (trainMain) sets this: such a failure then
/// prints its message and ends the process at once (exit 1), as nothing on
/// the stack could be torn down without waiting on the device. A library
/// caller (the C API) gets the Error instead.
void setExitOnStuckDevice(bool exit);
bool exitOnStuckDevice();

} // namespace cnnrt

#endif // CNNRT_ERROR_H
