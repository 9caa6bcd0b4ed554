/* Deliberately broken plugins for tests/plugin, one shared library per BROKEN_* mode:
 *   BROKEN_ABI_FUTURE    declares ABI version 99 (and garbage behind it: nothing else may be read)
 *   BROKEN_ABI_V1        an ABI v1 plugin that writes into fc_buffers.plan anyway (v1 plugins never see
 *                        that field, so whatever it holds afterwards must be ignored)
 *   BROKEN_WRONG_PLAN    reports 3 split-KV chunks where 1 was asked
 *   BROKEN_FAIL_MIDRUN   the first forward succeeds, every later one returns FC_ERR_RUNTIME
 *   BROKEN_OVERRUN       writes one element past the end of O
 *   BROKEN_UNDERRUN      writes one element before the start of O
 *   BROKEN_SILENT        returns FC_OK without writing O
 *   BROKEN_REFUSES       declines every problem (FC_ERR_UNSUPPORTED): nothing can be checked
 * The modes that write O write zeros (not attention): the tests look at how the failure is reported.
 * Three modes are the example plugin (correct attention) except on the one case whose n_q is 13:
 *   BROKEN_SEGV_ON_CASE  writes through a null pointer (a segfault that takes its process down)
 *   BROKEN_HANG_ON_CASE  never returns
 *   BROKEN_STICKY_ON_CASE returns FC_ERR_STICKY (as our CUDA plugin does for an illegal address), and
 *                        fails every later call in the same process, as a poisoned CUDA context does */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "flashcheck/plugin.h"

#if defined(BROKEN_SEGV_ON_CASE) || defined(BROKEN_HANG_ON_CASE) || defined(BROKEN_STICKY_ON_CASE)
#include <unistd.h>

#define flashcheck_plugin_entry example_plugin_entry
#include "../../examples/plugins/cpu_reference_plugin.c"
#undef flashcheck_plugin_entry

#define BROKEN_TRIGGER_N_Q 13

static int poisoned = 0;

static fc_status broken_forward(const fc_problem* p, const fc_buffers* b, char* message, size_t message_size) {
  if (poisoned) {
    snprintf(message, message_size, "the process is poisoned by an earlier sticky error");
    return FC_ERR_RUNTIME;
  }
  if (p->n_q == BROKEN_TRIGGER_N_Q) {
#ifdef BROKEN_SEGV_ON_CASE
    volatile float* nowhere = NULL;
    *nowhere = 1.0f;
#endif
#ifdef BROKEN_HANG_ON_CASE
    for (;;) sleep(1);
#endif
#ifdef BROKEN_STICKY_ON_CASE
    poisoned = 1;
    snprintf(message, message_size, "simulated illegal memory access: the context is unusable");
    return FC_ERR_STICKY;
#endif
  }
  return forward(p, b, message, message_size);
}

static const fc_plugin broken = {FC_ABI_VERSION, capabilities, broken_forward};

__attribute__((visibility("default"))) const fc_plugin* flashcheck_plugin_entry(void) { return &broken; }

#else

#ifdef BROKEN_ABI_V1
#define BROKEN_VERSION 1u
#else
#define BROKEN_VERSION FC_ABI_VERSION
#endif

__attribute__((unused)) static fc_status capabilities(fc_capabilities* out, char* message, size_t message_size) {
  memset(out, 0, sizeof *out);
  out->abi_version = BROKEN_VERSION;
  out->name = "broken-" BROKEN_NAME;
  out->recipes = 1u << FC_RECIPE_FP32;
  out->masks = 1u << FC_MASK_NONE;
  out->features = FC_CAP_LSE;
  out->memory = FC_MEMORY_HOST;
  if (message_size) message[0] = '\0';
  return FC_OK;
}

static int calls = 0;

__attribute__((unused)) static fc_status forward(const fc_problem* p, const fc_buffers* b, char* message, size_t message_size) {
  ++calls;
  if (message_size) message[0] = '\0';
#ifdef BROKEN_FAIL_MIDRUN
  if (calls > 1) {
    snprintf(message, message_size, "simulated device fault in call %d (illegal memory access)", calls);
    return FC_ERR_RUNTIME;
  }
#endif
#ifdef BROKEN_REFUSES
  (void)p, (void)b;
  snprintf(message, message_size, "declines every problem");
  return FC_ERR_UNSUPPORTED;
#elif defined(BROKEN_SILENT)
  (void)p, (void)b;
  return FC_OK;
#else
#if defined(BROKEN_ABI_V1) || defined(BROKEN_WRONG_PLAN)
  if (b->plan) {
    b->plan->num_splits = 3;
    b->plan->step_n = 1;
    b->plan->l_convention = FC_L_FP32_P;
  }
#endif
  /* A contiguous fp32 O: element (bh, i, c) at index ((bh * n_q) + i) * dv + c. */
  float* o = (float*)b->o.data;
  const int64_t n = (int64_t)p->batch * p->heads_q * p->n_q * p->dv;
  for (int64_t x = 0; x < n; ++x) o[x] = 0.0f;
  for (int64_t r = 0; r < (int64_t)p->batch * p->heads_q * p->n_q; ++r)
    if (b->lse) b->lse[r] = 0.0f;
#ifdef BROKEN_OVERRUN
  o[n] = 1.0f; /* one past the end */
#endif
#ifdef BROKEN_UNDERRUN
  o[-1] = 1.0f;
#endif
  return FC_OK;
#endif
}

#ifdef BROKEN_ABI_FUTURE
static const fc_plugin plugin = {99u, NULL, NULL}; /* nothing behind the version may be read */
#else
static const fc_plugin plugin = {BROKEN_VERSION, capabilities, forward};
#endif

__attribute__((visibility("default"))) const fc_plugin* flashcheck_plugin_entry(void) { return &plugin; }

#endif
