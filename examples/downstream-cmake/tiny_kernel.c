/* The kernel under test: two-pass softmax attention in fp32 (max, then sum), fp32 recipe, no mask or
 * causal, with the LSE. Small on purpose: the point is the CMake around it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashcheck/plugin.h"

static fc_status caps(fc_capabilities* c, char* msg, size_t n) {
  memset(c, 0, sizeof *c);
  c->abi_version = FC_ABI_VERSION;
  c->name = "tiny-two-pass";
  c->recipes = 1u << FC_RECIPE_FP32;
  c->masks = (1u << FC_MASK_NONE) | (1u << FC_MASK_CAUSAL_TOP_LEFT) | (1u << FC_MASK_CAUSAL_BOTTOM_RIGHT);
  c->features = FC_CAP_LSE | FC_CAP_GQA;
  c->memory = FC_MEMORY_HOST;
  if (n) msg[0] = '\0';
  return FC_OK;
}

#define AT(t, b, h, n, c) ((const float*)(t).data)[(b) * (t).stride[0] + (h) * (t).stride[1] + (n) * (t).stride[2] + (c) * (t).stride[3]]

static fc_status forward(const fc_problem* p, const fc_buffers* x, char* msg, size_t n) {
  if (p->recipe != FC_RECIPE_FP32 || p->mask == FC_MASK_WINDOW || p->key_lengths || p->dense_mask || p->flags ||
      p->num_splits > 1 || p->tile_m || p->tile_n || x->memory != FC_MEMORY_HOST) {
    snprintf(msg, n, "tiny kernel: fp32, no mask or causal, host buffers only");
    return FC_ERR_UNSUPPORTED;
  }
  float* s = malloc(sizeof(float) * (size_t)p->n_k);
  if (!s) { snprintf(msg, n, "out of memory"); return FC_ERR_RUNTIME; }
  const int g = p->heads_q / p->heads_kv;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads_q; ++h)
      for (int64_t i = 0; i < p->n_q; ++i) {
        const int64_t off = p->mask == FC_MASK_CAUSAL_BOTTOM_RIGHT ? p->n_k - p->n_q : 0;
        const int64_t last = p->mask == FC_MASK_NONE ? p->n_k - 1 : (i + off < p->n_k - 1 ? i + off : p->n_k - 1);
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j <= last; ++j) {
          float dot = 0.0f;
          for (int c = 0; c < p->d; ++c) dot += AT(x->q, b, h, i, c) * AT(x->k, b, h / g, j, c);
          s[j] = dot * (float)p->scale;
          if (s[j] > m) m = s[j];
        }
        for (int64_t j = 0; j <= last; ++j) l += (s[j] = expf(s[j] - m));
        for (int c = 0; c < p->dv; ++c) {
          float a = 0.0f;
          for (int64_t j = 0; j <= last; ++j) a += s[j] * AT(x->v, b, h / g, j, c);
          float* o = (float*)x->o.data;
          o[b * x->o.stride[0] + h * x->o.stride[1] + i * x->o.stride[2] + c * x->o.stride[3]] = last >= 0 ? a / l : 0.0f;
        }
        if (x->lse) x->lse[((int64_t)b * p->heads_q + h) * p->n_q + i] = last >= 0 ? m + logf(l) : -INFINITY;
      }
  free(s);
  if (n) msg[0] = '\0';
  return FC_OK;
}

static const fc_plugin plugin = {FC_ABI_VERSION, caps, forward};
__attribute__((visibility("default"))) const fc_plugin* flashcheck_plugin_entry(void) { return &plugin; }
