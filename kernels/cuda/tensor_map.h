// Runner layer: the TMA descriptor (CUtensorMap) of one attention tensor for kernel v2. The tensor is
// seen as 4-D, (column, row, head, batch) innermost first, with the caller's strides; a box is `box_rows`
// rows by 64 columns (128 bytes of 16-bit elements), written into shared memory in the 128-byte swizzled
// layout that wgmma reads (wgmma.h, smem_descriptor_sw128). Rows past the tensor's end are filled with
// zeros by the copy engine.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace flashcheck::cuda {

// elem_bytes = 2. strides[0..2]: batch, head and row strides in elements (the column stride is 1).
// Returns an empty string on success, else why the tensor cannot be described (the caller repacks it or
// reports the reason).
std::string make_tile_map(CUtensorMap* out, const void* base, int elem_bytes, int d, long long rows, int heads,
                          int batch, const int64_t* strides, int box_rows);

}  // namespace flashcheck::cuda
