// transpose.cuh: out = in^T in fp32, in row-major rows x cols, out cols x rows, any sizes.
//
// transpose_tiled_kernel<TILE, ROWS, PAD>: a block moves one TILE x TILE tile of
//   `in` through shared memory, so that both the read of `in` and the write of
//   `out` are along rows (coalesced): a plain transpose reads or writes with a
//   stride of a whole row. The block is TILE x ROWS threads, each copying
//   TILE/ROWS elements of a column of the tile (fewer threads than elements keep
//   more loads in flight per thread). The tile's rows are TILE + PAD floats long:
//   with PAD = 1 the column read of the write phase hits 32 different banks, with
//   PAD = 0 a TILE that is a multiple of 32 puts a whole column in one bank.
//   Edges are guarded, so no size has to be a multiple of TILE.
//
// Launch sizes come only from the macros below, which conf.cuh (found first on
// the include path, through -I$(CONF_DIR)) may set; the static_asserts say what
// is legal, so an illegal combination fails to compile with a message that names
// the rule, and a sweep records it as skipped. On purpose two things are left to
// others, so that a sweep of this program meets every kind of refusal:
//   - the 48 KB limit of static shared memory (TILE*(TILE+PAD)*4 bytes) is not a
//     static_assert: ptxas refuses a TILE of 128 ("uses too much shared data"),
//     which a sweep records as skipped (a resource limit);
//   - HOST_HEAVY_UNSAFE=1 drops the rule that ROWS divides TILE. The copy loop
//     takes TILE/ROWS steps (integer division), so the last TILE % ROWS rows of
//     every tile are never read from `in` (their columns of `out` get whatever
//     shared memory held) and the last TILE % ROWS rows of its transpose are never
//     written: the program's own check finds them (exit 1, a sweep's verify_failed).
#pragma once

#if defined(__has_include)
#if __has_include("conf.cuh")
#include "conf.cuh"
#endif
#endif

#include "cuda_check.cuh"

#ifndef HH_TILE
#define HH_TILE 32             // side of the square tile one block transposes
#endif
#ifndef HH_ROWS
#define HH_ROWS 8              // thread rows per block: a block is HH_TILE x HH_ROWS threads
#endif
#ifndef HH_PAD
#define HH_PAD 1               // 0 or 1: floats of padding after each shared-memory row of the tile
#endif
#ifndef HOST_HEAVY_UNSAFE
#define HOST_HEAVY_UNSAFE 0    // 0 or 1: 1 lets HH_ROWS not divide HH_TILE, which computes wrong results
#endif

// Threads per block of the tiled kernel.
#define HH_THREADS (HH_TILE * HH_ROWS)
// Static shared memory of the tiled kernel: one padded tile (ptxas checks the 48 KB, see above).
#define HH_SMEM_BYTES (HH_TILE * (HH_TILE + HH_PAD) * 4)

static_assert(HH_TILE >= 1 && HH_ROWS >= 1, "HH_TILE and HH_ROWS must be positive");
static_assert(HH_PAD == 0 || HH_PAD == 1, "HH_PAD must be 0 or 1 (floats of padding per shared-memory row)");
static_assert(HOST_HEAVY_UNSAFE == 0 || HOST_HEAVY_UNSAFE == 1, "HOST_HEAVY_UNSAFE must be 0 or 1");
static_assert(HH_ROWS <= HH_TILE, "HH_ROWS must be <= HH_TILE (each thread copies HH_TILE/HH_ROWS >= 1 elements)");
static_assert(HOST_HEAVY_UNSAFE || HH_TILE % HH_ROWS == 0,
              "HH_TILE must be a multiple of HH_ROWS (every thread copies as many rows of the tile)");
static_assert(HH_THREADS % 32 == 0, "HH_TILE*HH_ROWS threads must be a multiple of 32 (whole warps)");
static_assert(HH_THREADS <= 1024, "HH_TILE*HH_ROWS threads must be <= 1024 (a block's limit)");

// ---------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------

template <int TILE, int ROWS, int PAD>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_tiled_kernel(int rows, int cols, const float* in, float* out) {
    // Rows of the tile each thread copies. Only when ROWS divides TILE do the
    // steps cover the tile (HOST_HEAVY_UNSAFE: see the header comment).
    constexpr int STEPS = TILE / ROWS;
    __shared__ float tile[TILE][TILE + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    // Read: consecutive threads read consecutive columns of one row of `in`.
    const int in_col = blockIdx.x * TILE + tx, in_row0 = blockIdx.y * TILE + ty;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        int r = in_row0 + s * ROWS;
        if (r < rows && in_col < cols) tile[ty + s * ROWS][tx] = in[(size_t)r * cols + in_col];
    }
    __syncthreads();
    // Write: consecutive threads write consecutive columns of one row of `out`
    // (a column of the tile: the read that PAD keeps free of bank conflicts).
    const int out_col = blockIdx.y * TILE + tx, out_row0 = blockIdx.x * TILE + ty;
#pragma unroll
    for (int s = 0; s < STEPS; ++s) {
        int r = out_row0 + s * ROWS;
        if (r < cols && out_col < rows) out[(size_t)r * rows + out_col] = tile[tx][ty + s * ROWS];
    }
}

// ---------------------------------------------------------------------------
// Launcher: it owns the grid arithmetic and checks the launch at once.
// ---------------------------------------------------------------------------

inline dim3 transpose_grid(int rows, int cols) { return dim3(CEIL_DIV(cols, HH_TILE), CEIL_DIV(rows, HH_TILE)); }

inline bool transpose_tiled(int rows, int cols, const float* in, float* out, cudaStream_t stream = 0) {
    dim3 block(HH_TILE, HH_ROWS);
    transpose_tiled_kernel<HH_TILE, HH_ROWS, HH_PAD><<<transpose_grid(rows, cols), block, 0, stream>>>(rows, cols, in, out);
    return cudaCheck(cudaGetLastError());
}
