// The C++ twin of ptx/src/vector_add.rs, for examples/vector_add.rs (--cpp-ptx).
// On a machine with CUDA:  nvcc -arch=sm_90 -ptx vector_add.cu -o vector_add.ptx
// (the GPU bundle's run.sh does this, then runs bin/vector_add --cpp-ptx vector_add.ptx).
//
// c[i] = a[i] + b[i] for i < n, one thread per element: thread i reads a[i] and b[i],
// writes c[i], and touches nothing else (the example's SAFETY comment relies on this).
extern "C" __global__ void vector_add(const float *a, const float *b, float *c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
