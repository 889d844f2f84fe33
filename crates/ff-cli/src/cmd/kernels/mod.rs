//! `flashforward kernels`: the project's GPU kernels as source, for checks that need no GPU.

pub mod emit;

command_group! {
    /// Write the source of every CubeCL kernel (attention forward, dQ, dK/dV at head dims 64 and
    /// 128, f32 and bf16) with its launch settings.
    Emit => emit,
}
