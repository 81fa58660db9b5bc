// The witness map on the device (launchers and DeviceCircuit in crates/groth16/src/kernels.rs):
// out = M·z for one matrix M of an R1CS in the compact CSR of crates/groth16/src/r1cs.rs (each
// entry a column and an index into its matrix's table of distinct coefficients), then the check
// a·b = c of every row. z and the outputs are Montgomery, as the host's R1cs::evaluate_into reads
// and writes them; field sums and products are fully reduced, so every value is bit-identical to
// the CPU's.
#include "ff/bls12_381.cuh"

using namespace cuzk;

// Σ coeffs[ids[k]] · z[cols[k]] over the entries k of one row.
__device__ __forceinline__ fr_t row_value(const uint32_t* __restrict__ row_ptr,
                                          const uint32_t* __restrict__ cols,
                                          const uint32_t* __restrict__ ids,
                                          const fr_t* __restrict__ coeffs, const fr_t* __restrict__ z,
                                          uint32_t row, uint32_t one, uint32_t minus_one)
{
    fr_t acc = fr_t::zero();
    const uint32_t end = row_ptr[row + 1];
    for (uint32_t k = row_ptr[row]; k < end; k++) {
        const uint32_t id = ids[k];
        const fr_t v = z[cols[k]];
        if (id == one)
            acc += v;
        else if (id == minus_one)
            acc -= v;
        else
            acc += coeffs[id] * v;
    }
    return acc;
}

// out[row] = the row's value for every row < rows of at most `short_len` entries, and zero for
// rows <= row < n (the domain's padding); longer rows are left to cuzk_r1cs_evaluate_long. One
// thread per row (a row's entries are contiguous); a coefficient of ±1, most entries of
// Filecoin's circuits, costs an addition, not a product. Rows of one warp then differ little in
// length: a 32-entry packing row among boolean rows would hold its warp 32 times as long.
// The host guarantees row_ptr[0..=rows] is monotone, every column < z's length and every id <
// the table's length (SparseMatrix's invariants), and n < 2^31.
extern "C" __global__ void __launch_bounds__(256)
cuzk_r1cs_evaluate(fr_t* __restrict__ out, const uint32_t* __restrict__ row_ptr,
                   const uint32_t* __restrict__ cols, const uint32_t* __restrict__ ids,
                   const fr_t* __restrict__ coeffs, const fr_t* __restrict__ z, uint32_t rows,
                   uint32_t n, uint32_t one, uint32_t minus_one, uint32_t short_len)
{
    for (uint32_t row = blockIdx.x * blockDim.x + threadIdx.x; row < n; row += gridDim.x * blockDim.x) {
        if (row >= rows)
            out[row] = fr_t::zero();
        else if (row_ptr[row + 1] - row_ptr[row] <= short_len)
            out[row] = row_value(row_ptr, cols, ids, coeffs, z, row, one, minus_one);
    }
}

// out[long_rows[i]] = that row's value for i < count: the rows cuzk_r1cs_evaluate leaves, one
// thread each, listed longest first so that a warp's rows are of about one length.
extern "C" __global__ void __launch_bounds__(256)
cuzk_r1cs_evaluate_long(fr_t* __restrict__ out, const uint32_t* __restrict__ long_rows, uint32_t count,
                        const uint32_t* __restrict__ row_ptr, const uint32_t* __restrict__ cols,
                        const uint32_t* __restrict__ ids, const fr_t* __restrict__ coeffs,
                        const fr_t* __restrict__ z, uint32_t one, uint32_t minus_one)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const uint32_t row = long_rows[i];
        out[row] = row_value(row_ptr, cols, ids, coeffs, z, row, one, minus_one);
    }
}

// *first_bad = min(*first_bad, the lowest row < rows with a·b != c); the host sets it to ~0 first.
extern "C" __global__ void __launch_bounds__(256)
cuzk_r1cs_check(uint32_t* __restrict__ first_bad, const fr_t* __restrict__ a,
                const fr_t* __restrict__ b, const fr_t* __restrict__ c, uint32_t rows)
{
    for (uint32_t row = blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += gridDim.x * blockDim.x)
        if (a[row] * b[row] != c[row]) atomicMin(first_bad, row);
}
