// FC_HOST_DEVICE marks a function that host and device code both call (the exact side's terms, which the
// GPU oracle in reference/cuda/ runs too; kernel v2's work-tile order, which its host tests check): one
// definition, compiled for the host by the C++ compiler and for both by nvcc, so that the CPU and the GPU
// cannot drift apart. Such functions use only scalars and <cmath>.
#pragma once

#if defined(__CUDACC__)
#define FC_HOST_DEVICE __host__ __device__
#else
#define FC_HOST_DEVICE
#endif
