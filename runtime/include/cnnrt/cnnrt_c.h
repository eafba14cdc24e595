/*===- cnnrt_c.h - C API for embedding a generated model ---------*- C -*-===*
 *
 * A generated model.cu defines a `cnnrt::ModelSpec kModel`; an embedder passes
 * its address (as `const void *`) to cnnrt_create. A shared library built by
 * `cnnc model.onnx --emit lib -o libstep.so` exports these functions (libcnnrt
 * linked in) and cnnrt_model_spec(), which returns that address; the Python
 * package (python/cnnc/api.py) loads it with ctypes. Functions return 0 on
 * success and -1 on an error: cnnrt_last_error() says why (the message the
 * standalone executable prints) and cnnrt_last_error_code() what failed
 * (CNNRT_ERROR_*). No failure ends the process: no GPU, out of GPU memory
 * and CUDA/cuDNN/cuBLASLt failures inside a step are errors like the rest.
 * After a CUDA error inside a step the session (and often the process's
 * CUDA context) is unusable: destroy it.
 *
 *===----------------------------------------------------------------------===*/
#ifndef CNNRT_CNNRT_C_H
#define CNNRT_CNNRT_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnrt_session cnnrt_session;

/* Defined by the generated code of `cnnc --emit lib`: the model's spec. */
const void *cnnrt_model_spec(void);

/* Defined instead by the generated code of `cnnc --emit lib --pipeline-stages
 * S [--gpus D]` (one library holding every stage's step): the number of
 * stages S, of data-parallel replicas D, and stage `stage`'s spec for
 * cnnrt_create (NULL outside [0, S)). A process of rank r in a world of S x D
 * (rank = replica x S + stage, torchrun's RANK) creates the session of stage
 * r % S with CNNC_PIPELINE_STAGES=S in its environment (the NCCL layer splits
 * the world into the replica's stages and the stage's replicas); its steps
 * exchange activations and gradients with the neighbouring stages through
 * NCCL, only the last stage has a loss (cnnrt_loss fails on the others),
 * and no state is broadcast before the first step (each stage holds its own
 * tensors). */
int cnnrt_pipeline_stages(void);
int cnnrt_pipeline_replicas(void);
const void *cnnrt_pipeline_stage_spec(int stage);

/* Creates the context, runs the model's prepare, loads `weights_path` (a .cnnw
 * file; NULL leaves the arena zeroed). use_graph != 0 captures the step into a
 * CUDA graph after two eager steps. Returns NULL on error (also when there
 * is no usable GPU). */
cnnrt_session *cnnrt_create(const void *model_spec, const char *weights_path,
                            int use_graph);
/* Loads Param/Buffer/OptState tensors from a .cnnw file (weights or
 * checkpoint; __step__ is restored when present). */
int cnnrt_load(cnnrt_session *s, const char *path);
/* Sets the next batch: images as bytes, batch*C*H*W in NCHW order
 * (x = byte/255 on the device), labels as int32 class indices. */
int cnnrt_set_batch(cnnrt_session *s, const uint8_t *images,
                    const int32_t *labels);
/* Enqueues one training step (asynchronous). */
int cnnrt_step(cnnrt_session *s, float lr);
/* Waits for the queued work and returns the loss of the last step. */
int cnnrt_loss(cnnrt_session *s, float *loss);
/* Runs the model's evalStep on a batch of images and copies the logits
 * (cnnrt_output_shape: batch*num_classes floats, or batch*C*H*W for a
 * dense model) to `logits`. */
int cnnrt_eval(cnnrt_session *s, const uint8_t *images, float *logits);
/* Writes a checkpoint (Param/Buffer/OptState + __step__) atomically. */
int cnnrt_save(cnnrt_session *s, const char *path);
/* Number of steps taken (including restored ones). */
int64_t cnnrt_step_count(const cnnrt_session *s);
/* --- float32 tensors from a framework (PyTorch) ---------------------------
 * `stream` is the caller's cudaStream_t (NULL: CUDA's legacy default stream,
 * PyTorch's default current stream; ordered explicitly, as the session's own
 * stream is non-blocking): the step waits for the
 * work queued on it so far, and work queued on it afterwards waits for the
 * step, so device pointers may be the caller's own tensors (no copy beyond
 * the conversion into the arena's input tensor). With on_device == 0 the
 * pointers are host memory, copied with one asynchronous copy each. */

/* The image input's shape (rank 4: N, C, H, W) and the number of classes. */
int cnnrt_input_shape(const cnnrt_session *s, int64_t *dims, int *rank);
/* The labels a step takes: (N) one class per image, or (N, H, W) one per
 * pixel of a dense model's N x C x H x W output. */
int cnnrt_labels_shape(const cnnrt_session *s, int64_t *dims, int *rank);
/* The logits cnnrt_eval and cnnrt_eval_input write: (N, C), or (N, C, H, W)
 * per pixel for a dense model. */
int cnnrt_output_shape(const cnnrt_session *s, int64_t *dims, int *rank);
int64_t cnnrt_num_classes(const cnnrt_session *s);
/* Enqueues one step on float32 NCHW images and int64 labels (batch*C*H*W and
 * batch elements) with learning rate lr. The labels must be class indices in
 * [0, num_classes); they are not checked on the device. */
int cnnrt_train_step(cnnrt_session *s, const float *images,
                     const int64_t *labels, int on_device, float lr,
                     void *stream);
/* Enqueues a copy of the last step's loss, as one float32, into device
 * memory `dst`, ordered after the step and before later work on `stream`
 * (the caller's CUDA stream): reading the loss this way does not make the
 * host wait for the step. */
int cnnrt_loss_to_device(cnnrt_session *s, float *dst, void *stream);
/* Inference-mode forward (evalStep) on float32 NCHW images; writes
 * float32 logits (cnnrt_output_shape) to `logits` (device memory when
 * logits_on_device, else host memory, and then the call waits for them). */
int cnnrt_eval_input(cnnrt_session *s, const float *images, int on_device,
                     float *logits, int logits_on_device, void *stream);

/* The persistent tensors (parameters, buffers, optimizer state, loss scale)
 * by index, in the spec's order, and by name as float32 host arrays (f16
 * tensors converted). Reads and writes wait for the session's queued work. */
enum {
  CNNRT_STATE_PARAM = 0,
  CNNRT_STATE_BUFFER = 1,
  CNNRT_STATE_OPT = 2,
  CNNRT_STATE_LOSS_SCALE = 3
};
int cnnrt_num_state(const cnnrt_session *s);
const char *cnnrt_state_name(const cnnrt_session *s, int i);
int cnnrt_state_role(const cnnrt_session *s, int i);
int cnnrt_state_shape(const cnnrt_session *s, int i, int64_t *dims, int *rank);
int cnnrt_read_state(cnnrt_session *s, const char *name, float *out);
int cnnrt_write_state(cnnrt_session *s, const char *name, const float *in);
/* Sets the one-element f32/f16 state tensor `name` (a param group's learning
 * rate) to `value` on the session's stream, without waiting: the write is
 * ordered before the next step's work and the caller's value is passed by
 * copy (cnnrt_write_state synchronizes twice, which a per-step scheduler
 * paid every step). Non-zero with cnnrt_last_error() if `name` is not such a
 * tensor. */
int cnnrt_set_scalar_state(cnnrt_session *s, const char *name, float value);
/* Makes `device` the CUDA device of the calling thread for this library's
 * CUDA runtime (a library built by --emit lib links its own copy: set it to
 * the framework's device before cnnrt_create and before each call). */
int cnnrt_set_device(int device);
/* Sets the step counter (the next step is step + 1: Adam's bias correction). */
void cnnrt_set_step_count(cnnrt_session *s, int64_t step);

/* Message of the last error of this thread ("" if none). */
const char *cnnrt_last_error(void);
/* What the last error of this thread was (0 if none). */
enum {
  CNNRT_ERROR_INVALID = 1,       /* bad argument, file, model or call */
  CNNRT_ERROR_NO_GPU = 2,        /* no usable GPU */
  CNNRT_ERROR_OUT_OF_MEMORY = 3, /* a GPU (or host) allocation failed */
  CNNRT_ERROR_CUDA = 4,          /* a CUDA call or kernel failed */
  CNNRT_ERROR_CUDNN = 5,         /* a cuDNN call failed */
  CNNRT_ERROR_CUBLAS = 6,        /* a cuBLASLt call failed */
  CNNRT_ERROR_CONFIG = 7,        /* a CNNRT_* setting cannot be honoured */
  CNNRT_ERROR_DATA_PARALLEL = 8  /* NCCL, the rendezvous or a peer failed */
};
int cnnrt_last_error_code(void);
void cnnrt_destroy(cnnrt_session *s);

#ifdef __cplusplus
}
#endif

#endif /* CNNRT_CNNRT_C_H */
