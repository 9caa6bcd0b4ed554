/* A complete flashcheck plugin in plain C: fp32 online softmax on the CPU, one key at a time.
 *
 * It is the smallest thing that speaks include/flashcheck/plugin.h, meant to be copied: replace
 * forward() with a call into your kernel. Recipes fp32, fp16 and bf16 (inputs and output in that
 * format, all arithmetic in fp32); host buffers only; no tile choice (it behaves as a kernel with a
 * key tile of 1, and says so in its run plan). Masks: none, causal (both alignments), windows, key
 * lengths, a dense mask, GQA, LSE.
 *
 * Build: cc -shared -fPIC -O2 -I<flashcheck>/include cpu_reference_plugin.c -o libmyplugin.so -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashcheck/plugin.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- 16-bit formats <-> fp32 (fp32 holds every fp16 and bf16 value exactly) ---- */
static float bits_to_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }
static uint32_t f32_to_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }

static float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }
static uint16_t f32_to_bf16(float f) { /* round to nearest, ties to even */
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
static float f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}
static uint16_t f32_to_f16(float f) { /* round to nearest, ties to even */
  uint32_t x = f32_to_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);  /* NaN */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to inf */
  if (a < 0x38800000u) /* below 2^-14: subnormal, an integer multiple of 2^-24 */
    return (uint16_t)(sign | (uint32_t)nearbyintf(bits_to_f32(a) * 16777216.0f));
  uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a & 0x7FFFFFu) >> 13)), rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

/* Element (b, h, n, c) of a BHND view, as fp32. */
static float load(int recipe, const fc_tensor* t, int64_t b, int64_t h, int64_t n, int64_t c) {
  int64_t at = b * t->stride[0] + h * t->stride[1] + n * t->stride[2] + c * t->stride[3];
  if (recipe == FC_RECIPE_FP32) return ((const float*)t->data)[at];
  uint16_t bits = ((const uint16_t*)t->data)[at];
  return recipe == FC_RECIPE_FP16 ? f16_to_f32(bits) : bf16_to_f32(bits);
}
static void store(int recipe, const fc_tensor* t, int64_t b, int64_t h, int64_t n, int64_t c, float x) {
  int64_t at = b * t->stride[0] + h * t->stride[1] + n * t->stride[2] + c * t->stride[3];
  if (recipe == FC_RECIPE_FP32) ((float*)t->data)[at] = x;
  else ((uint16_t*)t->data)[at] = recipe == FC_RECIPE_FP16 ? f32_to_f16(x) : f32_to_bf16(x);
}

/* Which keys query i sees (plugin.h: windows, key lengths and the dense mask combine by AND). */
static int visible(const fc_problem* p, int64_t len, int64_t i, int64_t j) {
  if (j >= len) return 0;
  if (p->dense_mask && !p->dense_mask[i * p->n_k + j]) return 0;
  int64_t left = -1, right = -1, align = FC_ALIGN_TOP_LEFT;
  if (p->mask == FC_MASK_CAUSAL_TOP_LEFT || p->mask == FC_MASK_CAUSAL_BOTTOM_RIGHT) {
    right = 0;
    align = p->mask == FC_MASK_CAUSAL_TOP_LEFT ? FC_ALIGN_TOP_LEFT : FC_ALIGN_BOTTOM_RIGHT;
  } else if (p->mask == FC_MASK_WINDOW) {
    left = p->window_left, right = p->window_right, align = p->window_align;
  }
  int64_t diag = i + (align == FC_ALIGN_BOTTOM_RIGHT ? len - p->n_q : 0);
  if (left >= 0 && j < diag - left) return 0;
  if (right >= 0 && j > diag + right) return 0;
  return 1;
}

static fc_status capabilities(fc_capabilities* out, char* message, size_t message_size) {
  memset(out, 0, sizeof *out);
  out->abi_version = FC_ABI_VERSION;
  out->name = "example-cpu-fp32";
  out->recipes = (1u << FC_RECIPE_FP32) | (1u << FC_RECIPE_FP16) | (1u << FC_RECIPE_BF16);
  out->masks = (1u << FC_MASK_NONE) | (1u << FC_MASK_CAUSAL_TOP_LEFT) | (1u << FC_MASK_CAUSAL_BOTTOM_RIGHT) |
               (1u << FC_MASK_WINDOW);
  out->features = FC_CAP_GQA | FC_CAP_KEY_LENGTHS | FC_CAP_DENSE_MASK | FC_CAP_LSE;
  out->memory = FC_MEMORY_HOST;
  if (message_size) message[0] = '\0';
  return FC_OK;
}

static fc_status forward(const fc_problem* p, const fc_buffers* buf, char* message, size_t message_size) {
  if (p->recipe != FC_RECIPE_FP32 && p->recipe != FC_RECIPE_FP16 && p->recipe != FC_RECIPE_BF16) {
    snprintf(message, message_size, "recipe %d: only fp32, fp16 and bf16", (int)p->recipe);
    return FC_ERR_UNSUPPORTED;
  }
  if (buf->memory != FC_MEMORY_HOST || p->flags != 0 || p->num_splits > 1 || p->tile_m || p->tile_n) {
    snprintf(message, message_size, "host buffers only; no flags, split-KV or tile choice");
    return FC_ERR_UNSUPPORTED;
  }
  if (p->heads_kv <= 0 || p->heads_q % p->heads_kv != 0 || p->dv != p->d) {
    snprintf(message, message_size, "heads_q must be a multiple of heads_kv and dv == d");
    return FC_ERR_INVALID;
  }
  float* acc = malloc(sizeof(float) * (size_t)p->dv);
  if (!acc) { snprintf(message, message_size, "out of memory"); return FC_ERR_RUNTIME; }
  const int group = p->heads_q / p->heads_kv;
  for (int b = 0; b < p->batch; ++b) {
    const int64_t len = p->key_lengths ? p->key_lengths[b] : p->n_k;
    for (int h = 0; h < p->heads_q; ++h) {
      for (int64_t i = 0; i < p->n_q; ++i) {
        float m = -INFINITY, l = 0.0f; /* running max and running sum of exp(s - m) */
        int64_t seen = 0;               /* visible keys (not l > 0: a NaN score makes l NaN) */
        for (int c = 0; c < p->dv; ++c) acc[c] = 0.0f;
        for (int64_t j = 0; j < p->n_k; ++j) {
          if (!visible(p, len, i, j)) continue;
          float s = 0.0f;
          for (int c = 0; c < p->d; ++c) s += load(p->recipe, &buf->q, b, h, i, c) * load(p->recipe, &buf->k, b, h / group, j, c);
          s *= (float)p->scale;
          const float m_new = s > m ? s : m;
          const float alpha = expf(m - m_new), e = expf(s - m_new); /* alpha = 1 unless the max grew */
          l = l * alpha + e;
          for (int c = 0; c < p->dv; ++c) acc[c] = acc[c] * alpha + e * load(p->recipe, &buf->v, b, h / group, j, c);
          m = m_new;
          ++seen;
        }
        /* A row with no visible key: O = 0, LSE = -inf (plugin.h). */
        for (int c = 0; c < p->dv; ++c) store(p->recipe, &buf->o, b, h, i, c, seen ? acc[c] / l : 0.0f);
        if (buf->lse) buf->lse[((int64_t)b * p->heads_q + h) * p->n_q + i] = seen ? m + logf(l) : -INFINITY;
      }
    }
  }
  free(acc);
  /* What ran (ABI v2): one key per online-softmax step, no split. P is never rounded and products are
   * multiplied and added separately, which neither l convention nor accumulation model names, so those
   * stay FC_L_UNKNOWN / FC_ACCUM_UNKNOWN and the budget covers either. */
  if (buf->plan) {
    buf->plan->step_n = 1;
    buf->plan->num_splits = 1;
  }
  if (message_size) message[0] = '\0';
  return FC_OK;
}

static const fc_plugin plugin = {FC_ABI_VERSION, capabilities, forward};

EXPORT const fc_plugin* flashcheck_plugin_entry(void) { return &plugin; }
