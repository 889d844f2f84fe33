//! Single-threaded f32 GEMM on host slices (the `gemm` crate), for the tile products of the CPU
//! kernel. Threads come from the kernel's own split over heads × tiles, so every call here runs
//! with `Parallelism::None` and has one fixed summation order.

use rayon::prelude::*;
use std::ops::Range;

/// A strided read-only `rows × cols` matrix view: element `(r, c)` is `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> View<'a> {
    /// Row-major `rows × cols` with row stride `rs`.
    pub fn rows(data: &'a [f32], rows: usize, cols: usize, rs: usize) -> Self {
        Self { data, rows, cols, rs, cs: 1 }
    }

    /// Column-major `rows × cols` with column stride `cs`.
    pub fn cols(data: &'a [f32], rows: usize, cols: usize, cs: usize) -> Self {
        Self { data, rows, cols, rs: 1, cs }
    }

    /// The transpose (no copy).
    pub fn t(self) -> Self {
        Self { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    fn fits(&self) -> bool {
        self.rows == 0 || self.cols == 0 || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }
}

/// Each of the consecutive row-major `[tokens, d]` matrices (heads) of `x` with the rows of each
/// tile transposed in place: tile `r` becomes the column-major `r.len() × d` block at
/// `r.start · d` (column stride `r.len()`), which gemm reads as a left operand without repacking
/// it, and whose columns stay within the tile. `tiles` partition `0..tokens`.
pub fn transpose_tiles(x: &[f32], tokens: usize, d: usize, tiles: &[Range<usize>]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut((tokens * d).max(1)).zip(x.par_chunks((tokens * d).max(1))).for_each(|(out, x)| {
        for r in tiles {
            let (out, m) = (&mut out[r.start * d..r.end * d], r.len());
            for (i, row) in x[r.start * d..r.end * d].chunks_exact(d).enumerate() {
                row.iter().enumerate().for_each(|(c, &v)| out[c * m + i] = v);
            }
        }
    });
    out
}

/// `dst = beta · a · b` (`accumulate = false`) or `dst += beta · a · b`, with `dst` row-major
/// `a.rows × b.cols` of row stride `dst_rs`.
pub fn matmul(dst: &mut [f32], dst_rs: usize, a: View, b: View, beta: f32, accumulate: bool) {
    matmul_strided(dst, [dst_rs, 1], a, b, beta, accumulate)
}

/// [`matmul`] into `dst` with element `(r, c)` at `dst[r * rs + c * cs]`, `[rs, cs] = strides`.
pub fn matmul_strided(dst: &mut [f32], [dst_rs, dst_cs]: [usize; 2], a: View, b: View, beta: f32, accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k, "inner dimensions {k} and {} differ", b.rows);
    assert!(a.fits() && b.fits(), "a matrix view exceeds its slice");
    assert!(m == 0 || n == 0 || (m - 1) * dst_rs + (n - 1) * dst_cs < dst.len(), "the destination exceeds its slice");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            (0..m).for_each(|r| (0..n).for_each(|c| dst[r * dst_rs + c * dst_cs] = 0.0));
        }
        return;
    }
    // SAFETY: the asserts above keep every element the strides reach inside the slices; `dst`
    // is borrowed mutably, so it does not alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            dst_cs as isize,
            dst_rs as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            beta,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}
