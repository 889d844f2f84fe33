//! Backends the binary runs on: NdArray (CPU, f32) always; CUDA (f32 or bf16) and wgpu behind
//! the `cuda` and `wgpu` features. A `--devices` string (`cpu`, `cuda:0,1,2,3`, `wgpu:0`) selects
//! one backend and its devices; [`dispatch`] runs a backend-generic task on it.

use anyhow::{Context, bail};
use ff_model::AttentionBackend;
use std::str::FromStr;

pub type CpuBackend = burn::backend::NdArray;

pub fn cpu_device() -> burn::backend::ndarray::NdArrayDevice {
    Default::default()
}

/// Which backend and devices to run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    Cpu,
    Cuda(Vec<usize>),
    Wgpu(Vec<usize>),
}

/// Float precision of the weights and activations (bf16 needs CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    F32,
    Bf16,
}

impl FromStr for DeviceSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (kind, list) = s.split_once(':').unwrap_or((s, "0"));
        let ids = || -> anyhow::Result<Vec<usize>> {
            list.split(',').map(|i| i.trim().parse::<usize>().with_context(|| format!("device index '{i}' in '{s}'"))).collect()
        };
        match kind {
            "cpu" if !s.contains(':') => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(ids()?)),
            "wgpu" => Ok(Self::Wgpu(ids()?)),
            _ => bail!("unknown device '{s}': use cpu, cuda:0[,1,...] or wgpu:0[,1,...]"),
        }
    }
}

impl DeviceSpec {
    /// Devices of the selection (one per worker).
    pub fn count(&self) -> usize {
        match self {
            Self::Cpu => 1,
            Self::Cuda(d) | Self::Wgpu(d) => d.len(),
        }
    }
}

/// A computation generic over the backend, run by [`dispatch`] on the selected devices.
pub trait BackendTask {
    type Output;
    fn run<B: AttentionBackend>(self, devices: Vec<B::Device>) -> anyhow::Result<Self::Output>;
}

/// Runs `task` on the backend and devices of `spec` in `precision`; a backend this binary was
/// not built with, or a missing driver, is an error.
pub fn dispatch<T: BackendTask>(spec: &DeviceSpec, precision: Precision, task: T) -> anyhow::Result<T::Output> {
    match (spec, precision) {
        (DeviceSpec::Cpu, Precision::F32) => task.run::<CpuBackend>(vec![cpu_device()]),
        (DeviceSpec::Cpu, Precision::Bf16) => bail!("--precision bf16 needs a CUDA device (NdArray is f32 only)"),
        (DeviceSpec::Cuda(ids), p) => cuda::dispatch(ids, p, task),
        (DeviceSpec::Wgpu(ids), p) => wgpu::dispatch(ids, p, task),
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::{BackendTask, Precision};
    use burn::backend::Cuda;
    use burn::backend::cuda::CudaDevice;

    pub fn dispatch<T: BackendTask>(ids: &[usize], precision: Precision, task: T) -> anyhow::Result<T::Output> {
        // A missing driver is a panic inside Burn's device thread: probe for it first.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            anyhow::bail!("no CUDA driver (libcuda) found on this machine; use --devices cpu");
        }
        let devices: Vec<CudaDevice> = ids.iter().map(|&i| CudaDevice::new(i)).collect();
        match precision {
            Precision::F32 => task.run::<Cuda<f32>>(devices),
            Precision::Bf16 => task.run::<Cuda<half::bf16>>(devices),
        }
    }
}

#[cfg(not(feature = "cuda"))]
mod cuda {
    use super::{BackendTask, Precision};

    pub fn dispatch<T: BackendTask>(ids: &[usize], _: Precision, _: T) -> anyhow::Result<T::Output> {
        anyhow::bail!(
            "cuda:{ids:?} requested, but this binary was built without the `cuda` feature (cargo build --release --features cuda)"
        )
    }
}

#[cfg(feature = "wgpu")]
mod wgpu {
    use super::{BackendTask, Precision};
    use burn::backend::Wgpu;
    use burn::backend::wgpu::WgpuDevice;

    pub fn dispatch<T: BackendTask>(ids: &[usize], precision: Precision, task: T) -> anyhow::Result<T::Output> {
        if precision == Precision::Bf16 {
            anyhow::bail!("--precision bf16 is not supported by the wgpu backend");
        }
        // wgpu:0 is the default adapter (a discrete GPU if any, else e.g. Mesa's lavapipe on the CPU).
        task.run::<Wgpu>(ids.iter().map(|&i| if i == 0 { WgpuDevice::DefaultDevice } else { WgpuDevice::DiscreteGpu(i) }).collect())
    }
}

#[cfg(not(feature = "wgpu"))]
mod wgpu {
    use super::{BackendTask, Precision};

    pub fn dispatch<T: BackendTask>(ids: &[usize], _: Precision, _: T) -> anyhow::Result<T::Output> {
        anyhow::bail!("wgpu:{ids:?} requested, but this binary was built without the `wgpu` feature")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_strings() {
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu);
        assert_eq!("cuda:0,1,2,3".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(vec![0, 1, 2, 3]));
        assert_eq!("cuda".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(vec![0]));
        assert!("tpu:0".parse::<DeviceSpec>().unwrap_err().to_string().contains("tpu:0"));
        assert!("cuda:x".parse::<DeviceSpec>().unwrap_err().to_string().contains("'x'"));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_is_a_clear_error() {
        struct Nothing;
        impl BackendTask for Nothing {
            type Output = ();
            fn run<B: AttentionBackend>(self, _: Vec<B::Device>) -> anyhow::Result<()> {
                Ok(())
            }
        }
        let err = dispatch(&DeviceSpec::Cuda(vec![0]), Precision::F32, Nothing).unwrap_err();
        assert!(err.to_string().contains("`cuda` feature"), "{err}");
    }
}
