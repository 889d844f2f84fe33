//! Tile sizes of the attention kernels, chosen per runtime from its device properties.
//!
//! FlashAttention-2's work split: a cube owns `rows = 16 × planes` rows (query rows in the forward,
//! key rows in the backward), one plane of 32 units per 16 rows, and streams the other side's
//! tokens through shared memory `cols` at a time, in the input dtype. On a runtime whose
//! cooperative-matrix (`cmma`) feature has the 16×16×16 shape for the input dtype with f32
//! accumulators (CUDA tensor cores for f16/bf16), the products run through `cmma`; elsewhere (f32
//! inputs, lavapipe, WebGPU) each unit computes a register tile of them (the fallback). The
//! fallback's accumulators are per-unit register tiles of `16 × ⌈dim / 32⌉` f32 (64 at head dim
//! 128), never a row of `dim`; the `cmma` path accumulates O, dK and dV in shared memory (f32).
//!
//! The sizes are the first of a short list whose shared memory fits the device: CUDA cards get
//! 64-row tiles over 32 tokens (16 on the fallback past head dim 64, whose products' register
//! tile is `16 × cols / 32`); lavapipe's 32 KiB get 32- or 16-row tiles; WebGPU's 16 KiB floor
//! gets 16-row tiles over 8 tokens at head dim 128. Registers and spills per kernel on sm_80 and
//! sm_90: `scripts/check-cuda-kernels.sh`.

use cubecl::features::MmaConfig;
use cubecl::ir::{DeviceProperties, ElemType, FloatKind, StorageType};

/// Rows per plane, the `m` of a 16×16×16 `cmma`.
pub const GROUP_ROWS: usize = 16;
/// Units per plane (a CUDA warp); the fallback's register tiles assume it too.
pub const PLANE: usize = 32;

/// The comptime shape of one attention kernel (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tiles {
    /// Head dim.
    pub dim: usize,
    /// Planes per cube, each owning [`GROUP_ROWS`] rows.
    pub planes: usize,
    /// Tokens of the streamed side staged per step.
    pub cols: usize,
    /// Whether the products run through `cmma`.
    pub cmma: bool,
    /// Backward: whether dK accumulates in shared memory rather than in a second register tile
    /// (always with `cmma`, which keeps dV there too; on the fallback where shared memory is
    /// plentiful, since two register tiles spill at head dim 128 on CUDA).
    pub shared_dk: bool,
}

/// Shared memory from which the backward keeps dK there ([`Tiles::shared_dk`]).
const SHARED_DK_FROM: usize = 64 * 1024;

/// Which kernel the tiles are for (their shared memory differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Forward and its log-sum-exp.
    Forward,
    /// dK, dV and the dQ contributions (FlashAttention-2's main backward kernel).
    Backward,
}

fn bytes(dtype: StorageType) -> usize {
    dtype.size()
}

impl Tiles {
    /// Rows owned by one cube.
    pub fn rows(&self) -> usize {
        GROUP_ROWS * self.planes
    }

    /// Units per cube.
    pub fn units(&self) -> usize {
        PLANE * self.planes
    }

    /// Shared memory the kernel of `pass` allocates, in bytes, with inputs of `dtype`.
    pub fn shared_bytes(&self, pass: Pass, dtype: StorageType) -> usize {
        let (e, rows, cols, dim) = (bytes(dtype), self.rows(), self.cols, self.dim);
        let cm = usize::from(self.cmma);
        match pass {
            // K, V tiles (input dtype); scores; row statistics; with cmma also the query tile,
            // the probabilities (input dtype) and the P·V bounce buffer (f32).
            Pass::Forward => 2 * cols * dim * e + rows * cols * 4 + rows * 4 + cm * (rows * dim * e + rows * cols * e + rows * dim * 4),
            // Q, dO tiles (input dtype); lse, delta; P and dS (f32); maybe the dK accumulator; with
            // cmma also the K, V tile (input dtype), P and dS in the input dtype and the dV and dQ
            // bounce buffers.
            Pass::Backward => {
                2 * cols * dim * e
                    + 2 * cols * 4
                    + 2 * rows * cols * 4
                    + usize::from(self.shared_dk) * rows * dim * 4
                    + cm * (2 * rows * dim * e + 2 * rows * cols * e + rows * dim * 4 + cols * dim * 4)
            }
        }
    }

    /// The tiles of `pass` for inputs of `dtype` at head dim `dim` on a device with `props`.
    pub fn choose(props: &DeviceProperties, pass: Pass, dtype: StorageType, dim: usize) -> Self {
        let smem = props.hardware.max_shared_memory_size;
        let cmma = dim.is_multiple_of(GROUP_ROWS) && has_cmma(props, dtype);
        // The cmma backward adds its dK fragments into shared memory.
        let shared_dk = pass == Pass::Backward && (cmma || smem >= SHARED_DK_FROM);
        let candidates: &[(usize, usize)] = match (cmma, pass) {
            (true, Pass::Forward) => &[(4, 32), (2, 32), (1, 16)],
            (true, Pass::Backward) => &[(4, 32), (2, 32), (2, 16), (1, 16)],
            // Wider head dims take narrower steps: the scores' register tile is 16 × cols / 32.
            (false, _) if dim > 64 && smem >= SHARED_DK_FROM => &[(4, 16), (2, 16), (1, 16), (1, 8)],
            (false, _) => &[(4, 32), (2, 32), (2, 16), (1, 16), (1, 8)],
        };
        let fits = |t: &Tiles| t.shared_bytes(pass, dtype) <= smem && t.units() <= props.hardware.max_units_per_cube as usize;
        candidates.iter().map(|&(planes, cols)| Tiles { dim, planes, cols, cmma, shared_dk }).find(fits).unwrap_or(Tiles {
            dim,
            planes: 1,
            cols: 8,
            cmma: false,
            shared_dk: false,
        })
    }
}

/// Whether the runtime multiplies 16×16×16 tiles of `dtype` into f32 with `cmma`.
pub fn has_cmma(props: &DeviceProperties, dtype: StorageType) -> bool {
    let half = matches!(dtype, StorageType::Scalar(ElemType::Float(FloatKind::F16 | FloatKind::BF16)));
    let f32 = StorageType::Scalar(ElemType::Float(FloatKind::F32));
    half && props.features.matmul.cmma.contains(&MmaConfig { a_type: dtype, b_type: dtype, cd_type: f32, m: 16, n: 16, k: 16 })
}
