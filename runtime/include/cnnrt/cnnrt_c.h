/*===- cnnrt_c.h - C API for embedding a generated model ---------*- C -*-===*
 *
 * A generated model.cu defines a `cnnrt::ModelSpec kModel`; an embedder passes
 * its address (as `const void *`) to cnnrt_create. Functions return 0 on
 * success and -1 on a recoverable error (cnnrt_last_error() says why).
 * CUDA/cuDNN/cuBLAS failures inside a step still print
 * "cnnrt: error at <loc>: ..." and exit the process (as in trainMain).
 *
 *===----------------------------------------------------------------------===*/
#ifndef CNNRT_CNNRT_C_H
#define CNNRT_CNNRT_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnrt_session cnnrt_session;

/* Creates the context, runs the model's prepare, loads `weights_path` (a .cnnw
 * file; NULL leaves the arena zeroed). use_graph != 0 captures the step into a
 * CUDA graph after two eager steps. Returns NULL on error. Exits with code 3
 * when there is no GPU. */
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
 * (batch*num_classes floats) to `logits`. */
int cnnrt_eval(cnnrt_session *s, const uint8_t *images, float *logits);
/* Writes a checkpoint (Param/Buffer/OptState + __step__) atomically. */
int cnnrt_save(cnnrt_session *s, const char *path);
/* Number of steps taken (including restored ones). */
int64_t cnnrt_step_count(const cnnrt_session *s);
/* Message of the last error of this thread ("" if none). */
const char *cnnrt_last_error(void);
void cnnrt_destroy(cnnrt_session *s);

#ifdef __cplusplus
}
#endif

#endif /* CNNRT_CNNRT_C_H */
