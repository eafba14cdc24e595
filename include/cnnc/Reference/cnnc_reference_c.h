/*===- cnnc_reference_c.h - C API of the CPU reference interpreter -*- C -*-===*
 *
 * Runs a compiled training step (a .mlir file holding @train_step and
 * @forward, as written by `cnnc model.onnx --train --emit mlir -o step.mlir`)
 * on the CPU reference interpreter, in process: the Python package loads
 * libcnnc_reference.so with ctypes when there is no GPU. The calls mirror
 * the GPU runtime's C API (runtime/include/cnnrt/cnnrt_c.h).
 *
 * Functions return 0 on success and -1 on error; cnnref_last_error() says why.
 * Tensors cross the boundary as contiguous row-major float32 (labels int64).
 *
 *===----------------------------------------------------------------------===*/
#ifndef CNNC_REFERENCE_CNNC_REFERENCE_C_H
#define CNNC_REFERENCE_CNNC_REFERENCE_C_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnref_session cnnref_session;

/* Roles of the persistent tensors (cnnref_state_role). */
enum { CNNREF_PARAM = 0, CNNREF_BUFFER = 1, CNNREF_OPT_STATE = 2 };

/* Parses `mlir_path` and reads its weights (`weights_path`, or the module's
 * cnn.weights attribute when NULL). NULL on error. */
cnnref_session *cnnref_open(const char *mlir_path, const char *weights_path);
void cnnref_close(cnnref_session *s);
const char *cnnref_last_error(void);

/* The shape of the image input of @train_step (rank <= 8) and the number of
 * classes of the loss. */
int cnnref_input_shape(const cnnref_session *s, int64_t *dims, int *rank);
int64_t cnnref_num_classes(const cnnref_session *s);
/* The labels' shape: (N) for classification, (N, H, W) for per-pixel
 * labels; labels equal to the ignore index (PyTorch's ignore_index, default
 * -100) are left out of the loss. */
int cnnref_labels_shape(const cnnref_session *s, int64_t *dims, int *rank);
int64_t cnnref_ignore_index(const cnnref_session *s);
/* The shape of @forward's (main) output: (N, classes) or (N, classes, H, W). */
int cnnref_output_shape(const cnnref_session *s, int64_t *dims, int *rank);

/* One training step on images (the input shape) and int64 labels with
 * learning rate `lr`; the step counter advances; writes the loss. */
int cnnref_step(cnnref_session *s, const float *images, const int64_t *labels,
                float lr, float *loss);
/* Pipeline stages (docs/pipeline-parallel.md): `stages_path` holds the
 * session's step split by cnn-pipeline-partition, -split and -schedule
 * (one @stage<s>_step per stage; the session's @train_step must accumulate
 * over `micro_batches`). From then on a step takes micro_batches x the
 * step's batch (cnnref_input_shape and cnnref_labels_shape say so), runs
 * each stage on a thread of its own (reference::runScheduledPipelineStep),
 * micro-batch m of step k as micro-step (k - 1) x M + m + 1, and writes the
 * mean of the M losses; the step counter counts pipeline steps. */
int cnnref_set_pipeline(cnnref_session *s, const char *stages_path,
                        int micro_batches);
/* @forward (inference mode: BN running statistics) on images; writes its
 * output (cnnref_output_shape). */
int cnnref_eval(cnnref_session *s, const float *images, float *logits);

/* The persistent state: parameters, buffers (BN statistics), optimizer
 * state, in a fixed order. Names are the model's (ONNX initializer) names. */
int cnnref_num_state(const cnnref_session *s);
const char *cnnref_state_name(const cnnref_session *s, int i);
int cnnref_state_role(const cnnref_session *s, int i);
/* Writes the rank and up to 8 dims of state tensor i. */
int cnnref_state_shape(const cnnref_session *s, int i, int64_t *dims,
                       int *rank);
int cnnref_get_state(const cnnref_session *s, const char *name, float *out);
int cnnref_set_state(cnnref_session *s, const char *name, const float *in);

int64_t cnnref_step_count(const cnnref_session *s);
void cnnref_set_step_count(cnnref_session *s, int64_t step);

/* Forward trace for numerics comparison: runs @forward (inference mode) on
 * `images` and keeps the result of every op that carries a name location (its
 * ONNX node); cnnref_trace_* read them. Gradients: open a step built with
 * `--optimizer none` and read "<param>.grad" with cnnref_get_state. */
int cnnref_trace(cnnref_session *s, const float *images);
int cnnref_trace_count(const cnnref_session *s);
const char *cnnref_trace_name(const cnnref_session *s, int i);
const char *cnnref_trace_op(const cnnref_session *s, int i);
int cnnref_trace_shape(const cnnref_session *s, int i, int64_t *dims,
                       int *rank);
int cnnref_trace_get(const cnnref_session *s, int i, float *out);

#ifdef __cplusplus
}
#endif

#endif /* CNNC_REFERENCE_CNNC_REFERENCE_C_H */
