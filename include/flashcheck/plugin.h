/* flashcheck subject ABI, version 2.
 *
 * Plain C so that a kernel written in any framework can be put under test: our own CUDA kernel, a
 * CPU example and external kernels all export the same entry point. A plugin is a shared library with
 *
 *     const fc_plugin* flashcheck_plugin_entry(void);
 *
 * flashcheck dlopens it, checks abi_version first (a mismatch is refused before any other field is
 * read), asks for capabilities, and runs forward passes. Every call returns an fc_status and, on error,
 * writes a NUL-terminated message into the caller's buffer: a plugin never aborts the host process.
 *
 * Tensors are described by pointer plus element strides in BHND order, so that non-contiguous views
 * (PyTorch's BNHD layout, say) can be tested without copies.
 *
 * Version 2 adds fc_buffers.plan: where forward() reports the plan it ran (tile, softmax step, splits,
 * l convention, accumulation), so that the error budget is derived for what ran rather than for the
 * conservative side of every choice. flashcheck still loads version 1 plugins (they never see the
 * field); their runs are budgeted conservatively. */
#ifndef FLASHCHECK_PLUGIN_H
#define FLASHCHECK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_ABI_VERSION 2u
#define FC_ABI_VERSION_MIN 1u /* the oldest plugin version flashcheck still loads */

typedef enum fc_status {
  FC_OK = 0,
  FC_ERR_UNSUPPORTED = 1, /* the problem is valid but outside the declared capabilities */
  FC_ERR_INVALID = 2,     /* the problem or buffers are malformed */
  FC_ERR_RUNTIME = 3,     /* the device or library failed (a CUDA error, ...) */
  /* Both below are optional refinements of FC_ERR_RUNTIME (a host that predates them reads them as a
   * failed run, as it would FC_ERR_RUNTIME). */
  FC_ERR_OUT_OF_MEMORY = 4, /* host or device memory ran out: a resource error, not a verdict */
  FC_ERR_STICKY = 5         /* the failure poisoned the process (a sticky CUDA error: an illegal address
                             * leaves the context unusable): the host calls forward() no more in this
                             * process; run in a worker (the default for plugins), the next case gets a
                             * fresh process */
} fc_status;

/* Precision recipes: input format and the arithmetic the kernel is expected to use. The output is in
 * the input format for fp32/fp16/bf16, fp32 for tf32 (inputs are fp32 values), and bf16 for fp8. */
typedef enum fc_recipe {
  FC_RECIPE_FP32 = 0,
  FC_RECIPE_TF32 = 1,
  FC_RECIPE_FP16 = 2,
  FC_RECIPE_BF16 = 3,
  FC_RECIPE_FP8_E4M3 = 4,
  FC_RECIPE_FP8_E5M2 = 5,
  FC_RECIPE_COUNT = 6
} fc_recipe;

/* Mask kinds; a window is [i + off - left, i + off + right] where off is 0 (top-left alignment) or
 * key_length - n_q (bottom-right). Causal is window(inf, 0). Key lengths and the dense mask combine with
 * any of these by logical AND. */
typedef enum fc_mask_kind {
  FC_MASK_NONE = 0,
  FC_MASK_CAUSAL_TOP_LEFT = 1,
  FC_MASK_CAUSAL_BOTTOM_RIGHT = 2,
  FC_MASK_WINDOW = 3
} fc_mask_kind;

typedef enum fc_align { FC_ALIGN_TOP_LEFT = 0, FC_ALIGN_BOTTOM_RIGHT = 1 } fc_align;

typedef enum fc_memory { FC_MEMORY_HOST = 1, FC_MEMORY_DEVICE = 2 } fc_memory;

/* Capability bits. */
#define FC_CAP_GQA (1u << 0)
#define FC_CAP_KEY_LENGTHS (1u << 1)
#define FC_CAP_DENSE_MASK (1u << 2)
#define FC_CAP_LSE (1u << 3)
#define FC_CAP_SPLIT_KV (1u << 4)
#define FC_CAP_TILE_SIZES (1u << 5)
#define FC_CAP_L_FROM_FP32_P (1u << 6)
#define FC_CAP_TWO_LEVEL_ACCUM (1u << 7)
#define FC_CAP_FA1_NORMALISATION (1u << 8)
/* The online softmax may rescale inside a key tile (steps narrower than tile_n, e.g. to fit registers).
 * A plugin that does not report its step (fc_run_plan.step_n) is then budgeted for any step: more steps
 * mean more running-max increases, and a budget for wider steps than the kernel took can be too small. */
#define FC_CAP_SUBTILE_STEPS (1u << 9)

/* Run flags (a plugin rejects with FC_ERR_UNSUPPORTED a flag whose capability it lacks). */
#define FC_FLAG_L_FROM_FP32_P (1u << 0)    /* FA-2 convention: l from fp32 P, not the rounded P */
#define FC_FLAG_TWO_LEVEL_ACCUM (1u << 1)  /* fp8: promote P.V partial sums to fp32 every tile */
#define FC_FLAG_FA1_NORMALISATION (1u << 2)

#define FC_MAX_TILES 16
#define FC_MAX_HEAD_DIMS 16

typedef struct fc_capabilities {
  uint32_t abi_version;
  const char* name;        /* short, stable identifier, e.g. "cuda-fa2" */
  uint32_t recipes;        /* bit (1u << fc_recipe) per supported recipe */
  uint32_t masks;          /* bit (1u << fc_mask_kind) per supported kind */
  uint32_t features;       /* FC_CAP_* */
  uint32_t memory;         /* FC_MEMORY_* bits the plugin accepts buffers in */
  int32_t n_head_dims;     /* 0 = any d >= 1 (with dv == d unless FC_CAP_... says otherwise) */
  int32_t head_dims[FC_MAX_HEAD_DIMS];
  int32_t n_tiles;         /* tile sizes selectable through fc_problem.tile_m/tile_n */
  int32_t tile_m[FC_MAX_TILES];
  int32_t tile_n[FC_MAX_TILES];
  uint32_t tile_recipes;   /* ABI v2: bit (1u << fc_recipe) per recipe the tile list applies to (0 = every
                              recipe); a recipe outside runs its one tiling and declines a tile request */
} fc_capabilities;

typedef struct fc_problem {
  int32_t batch, heads_q, heads_kv;
  int64_t n_q, n_k;
  int32_t d, dv;
  double scale;                /* applied to Q.K^T; the caller always sets it (1/sqrt(d) by default) */
  int32_t mask;                /* fc_mask_kind */
  int64_t window_left;         /* -1 = unbounded; FC_MASK_WINDOW only */
  int64_t window_right;        /* -1 = unbounded; FC_MASK_WINDOW only */
  int32_t window_align;        /* fc_align; FC_MASK_WINDOW only */
  const int32_t* key_lengths;  /* NULL, or [batch] in the buffers' memory space */
  const uint8_t* dense_mask;   /* NULL, or [n_q * n_k] row-major, 1 = attend; in the buffers' space */
  int32_t recipe;              /* fc_recipe */
  float q_descale, k_descale, v_descale; /* fp8: true value = stored value * descale; else 1 */
  uint32_t flags;              /* FC_FLAG_* */
  int32_t tile_m, tile_n;      /* 0 = the plugin's default policy */
  int32_t num_splits;          /* 0 = the plugin decides; 1 = no split-KV; n > 1 = n key chunks */
} fc_problem;

/* A rank-4 BHND view: element (b, h, n, c) lives at data + b*s[0] + h*s[1] + n*s[2] + c*s[3]
 * (strides in elements). Element types: fp32 for FP32/TF32, uint16 bit patterns for fp16/bf16,
 * uint8 bit patterns for fp8. */
typedef struct fc_tensor {
  void* data;
  int64_t stride[4];
} fc_tensor;

/* What a forward pass ran (ABI v2). flashcheck zeroes it before the call; a plugin fills what it knows
 * and leaves 0 (unknown) elsewhere. Every field the plugin leaves unknown is budgeted on its
 * conservative side, so reporting is optional but makes the bound tighter. A plugin must report what
 * it did, not what was asked: a wrong report can make the bound too small. */
typedef enum fc_l_convention { FC_L_UNKNOWN = 0, FC_L_ROUNDED_P = 1, FC_L_FP32_P = 2 } fc_l_convention;
typedef enum fc_accumulation {
  FC_ACCUM_UNKNOWN = 0,
  FC_ACCUM_SEQUENTIAL_FP32 = 1,  /* IEEE fp32 fma, one product at a time */
  FC_ACCUM_TENSOR_CORE = 2       /* the tensor cores' block FMA (one rounding per block of products) */
} fc_accumulation;
typedef enum fc_tristate { FC_UNKNOWN = 0, FC_NO = 1, FC_YES = 2 } fc_tristate;

typedef struct fc_run_plan {
  int32_t tile_m, tile_n;  /* the tile that ran */
  int32_t step_n;          /* keys per online-softmax step: the narrowest step taken, every step starting
                              on a multiple of it */
  int32_t num_splits;      /* split-KV chunks merged (1 = none) */
  int32_t l_convention;    /* fc_l_convention */
  int32_t accumulation;    /* fc_accumulation of S = Q.K^T and of P.V */
  int32_t two_level_accum; /* fc_tristate: fp8 P.V promoted to fp32 every tile */
} fc_run_plan;

typedef struct fc_buffers {
  int32_t memory;  /* fc_memory of every pointer below and in fc_problem */
  fc_tensor q, k, v;
  fc_tensor o;     /* output in the recipe's output format */
  float* lse;      /* NULL, or [batch, heads_q, n_q] contiguous, natural log; -inf for empty rows */
  void* stream;    /* cudaStream_t for device plugins; NULL = default stream */
  fc_run_plan* plan; /* ABI v2: NULL, or where forward() reports what it ran (host memory, always) */
} fc_buffers;

typedef struct fc_plugin {
  uint32_t abi_version; /* FC_ABI_VERSION the plugin was built against; checked before anything else
                           (flashcheck accepts FC_ABI_VERSION_MIN .. FC_ABI_VERSION) */
  fc_status (*capabilities)(fc_capabilities* out, char* message, size_t message_size);
  fc_status (*forward)(const fc_problem* problem, const fc_buffers* buffers, char* message,
                       size_t message_size);
} fc_plugin;

typedef const fc_plugin* (*fc_plugin_entry_fn)(void);
#define FC_PLUGIN_ENTRY_SYMBOL "flashcheck_plugin_entry"

#ifdef __cplusplus
}
#endif

#endif /* FLASHCHECK_PLUGIN_H */
