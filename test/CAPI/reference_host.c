/*===- reference_host.c - a C host program of the reference C API --------===*
 *
 * What an embedder of libcnnc_reference.so does (cnnc_reference_c.h), in
 * plain C: open a compiled training step, train it on a fixed batch, read
 * and write its state by name, run inference, and get a message (never a
 * crash) for bad paths and bad names. Each check prints "PASS: ..." or
 * "FAIL: ..."; the exit code is the number of failures. Driven by
 * test/CAPI/reference-host.test.
 *
 *   cnnc-capi-host STEP.mlir
 *
 *===----------------------------------------------------------------------===*/
#include "cnnc/Reference/cnnc_reference_c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) {
    ++failures;
    const char *e = cnnref_last_error();
    if (e && *e)
      printf("  last error: %s\n", e);
  }
}

static int allFinite(const float *v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!isfinite(v[i]))
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cnnc-capi-host STEP.mlir\n");
    return 2;
  }

  /* Bad inputs are errors with a message, not crashes. */
  cnnref_session *bad = cnnref_open("/nonexistent/step.mlir", NULL);
  check(bad == NULL && strstr(cnnref_last_error(), "/nonexistent/step.mlir"),
        "a missing step file gives NULL and names the file");

  cnnref_session *s = cnnref_open(argv[1], NULL);
  check(s != NULL, "opens the step");
  if (!s)
    return failures;

  int64_t dims[8];
  int rank = 0;
  check(cnnref_input_shape(s, dims, &rank) == 0 && rank == 4,
        "the image input is 4-D");
  size_t perImage = (size_t)(dims[1] * dims[2] * dims[3]);
  size_t batch = (size_t)dims[0];
  int64_t classes = cnnref_num_classes(s);
  check(classes > 1, "the loss has classes");

  /* A fixed batch: images in [-1, 1), labels cycling through the classes. */
  float *images = malloc(batch * perImage * sizeof(float));
  int64_t *labels = malloc(batch * sizeof(int64_t));
  unsigned seed = 12345;
  for (size_t i = 0; i < batch * perImage; ++i) {
    seed = seed * 1103515245u + 12345u;
    images[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  for (size_t i = 0; i < batch; ++i)
    labels[i] = (int64_t)(i % (size_t)classes);

  float losses[6];
  int stepsOk = 1;
  for (int k = 0; k < 6; ++k)
    stepsOk &= cnnref_step(s, images, labels, 0.05f, &losses[k]) == 0;
  check(stepsOk && allFinite(losses, 6), "six steps give finite losses");
  check(losses[5] < losses[0], "training on one batch lowers its loss");
  printf("  loss %.5f -> %.5f\n", losses[0], losses[5]);
  check(cnnref_step_count(s) == 6, "the step counter counts the steps");

  /* Inference is deterministic and finite. */
  float *logits = malloc(batch * (size_t)classes * sizeof(float));
  float *logits2 = malloc(batch * (size_t)classes * sizeof(float));
  check(cnnref_eval(s, images, logits) == 0 &&
            allFinite(logits, batch * (size_t)classes),
        "eval gives finite logits");
  check(cnnref_eval(s, images, logits2) == 0 &&
            memcmp(logits, logits2, batch * (size_t)classes * sizeof(float)) ==
                0,
        "eval is deterministic");

  /* The state by name: copy all of it into a second session opened from the
   * same (untrained) file; its inference must then equal the first's. */
  int n = cnnref_num_state(s);
  check(n > 0, "the step has persistent state");
  cnnref_session *t = cnnref_open(argv[1], NULL);
  int copied = t != NULL, params = 0;
  for (int i = 0; copied && i < n; ++i) {
    const char *name = cnnref_state_name(s, i);
    int r = 0;
    int64_t d[8];
    copied &= name != NULL && cnnref_state_shape(s, i, d, &r) == 0;
    size_t count = 1;
    for (int j = 0; j < r; ++j)
      count *= (size_t)d[j];
    float *buf = malloc(count * sizeof(float));
    copied &= cnnref_get_state(s, name, buf) == 0 &&
              cnnref_set_state(t, name, buf) == 0;
    params += cnnref_state_role(s, i) == CNNREF_PARAM;
    free(buf);
  }
  check(copied && params > 0, "every state tensor copies by name");
  check(t && cnnref_eval(t, images, logits2) == 0 &&
            memcmp(logits, logits2, batch * (size_t)classes * sizeof(float)) ==
                0,
        "the copied state reproduces the trained logits");

  /* A name that does not exist is an error that names it. */
  float dummy[1];
  check(cnnref_get_state(s, "no.such.tensor", dummy) == -1 &&
            strstr(cnnref_last_error(), "no.such.tensor"),
        "an unknown state name is an error naming it");

  cnnref_close(t);
  cnnref_close(s);
  free(images);
  free(labels);
  free(logits);
  free(logits2);
  printf("%d failure(s)\n", failures);
  return failures;
}
