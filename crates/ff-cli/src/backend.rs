//! Backends the binary runs on: Burn's Flex on the CPU (f32) always; NdArray (the library
//! tests' reference), CUDA (f32 or bf16) and wgpu behind the `ndarray`, `cuda` and `wgpu`
//! features. A `--devices` string (`cpu`, `ndarray`, `cuda:0,1,2,3`, `wgpu:0`) selects one
//! backend and its devices; [`dispatch`] runs a backend-generic task on it.

use anyhow::{Context, bail};
use ff_model::AttentionBackend;
use std::fmt;
use std::str::FromStr;

/// The default CPU backend: the library's ([`flashforward::Cpu`], Burn's Flex).
pub use flashforward::Cpu as CpuBackend;

/// [`CpuBackend`]'s name in device strings and tables.
pub const CPU_BACKEND: &str = "flex";

pub fn cpu_device() -> burn::backend::flex::FlexDevice {
    burn::backend::flex::FlexDevice
}

impl DeviceSpec {
    /// Name of device `index` (for messages).
    pub fn name(&self, index: usize) -> String {
        match self {
            Self::Cpu(_) | Self::NdArray => self.to_string(),
            Self::Cuda(ids) => format!("cuda:{}", ids[index]),
            Self::Wgpu(ids) => format!("wgpu:{}", ids[index]),
        }
    }
}

/// Which backend and devices to run on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// [`CpuBackend`], with this many data-parallel training workers (`cpu:0,1`: two workers that
    /// share the host's cores; the single-threaded parts of their steps then overlap).
    Cpu(usize),
    /// Burn's NdArray on the CPU (needs the `ndarray` feature).
    NdArray,
    Cuda(Vec<usize>),
    Wgpu(Vec<usize>),
}

impl fmt::Display for DeviceSpec {
    /// `cpu (flex)`, `ndarray`, `cuda:0,1`: the backend in use, for printed tables.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |ids: &[usize]| ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        match self {
            Self::Cpu(1) => write!(f, "cpu ({CPU_BACKEND})"),
            Self::Cpu(n) => write!(f, "cpu:{} ({CPU_BACKEND})", list(&(0..*n).collect::<Vec<_>>())),
            Self::NdArray => write!(f, "ndarray"),
            Self::Cuda(ids) => write!(f, "cuda:{}", list(ids)),
            Self::Wgpu(ids) => write!(f, "wgpu:{}", list(ids)),
        }
    }
}

/// Float precision: of the backend for inference (`generate --precision bf16` needs CUDA), of
/// the steps for training (`train --precision`, `bench train`: bf16 over f32 master weights,
/// on any backend with bf16).
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
            "cpu" if !s.contains(':') => Ok(Self::Cpu(1)),
            "cpu" => {
                let ids = ids()?;
                if ids != (0..ids.len()).collect::<Vec<_>>() {
                    bail!("'{s}': CPU workers are numbered 0,1,..,n-1 (one per training worker on this machine's CPU)");
                }
                Ok(Self::Cpu(ids.len()))
            }
            "ndarray" if !s.contains(':') => Ok(Self::NdArray),
            "cuda" => Ok(Self::Cuda(ids()?)),
            "wgpu" => Ok(Self::Wgpu(ids()?)),
            _ => bail!("unknown device '{s}': use cpu[:0,1,...], ndarray, cuda:0[,1,...] or wgpu:0[,1,...]"),
        }
    }
}

impl DeviceSpec {
    /// Devices of the selection (one per worker).
    pub fn count(&self) -> usize {
        match self {
            Self::Cpu(n) => *n,
            Self::NdArray => 1,
            Self::Cuda(d) | Self::Wgpu(d) => d.len(),
        }
    }

    /// Whether the devices are this machine's CPU (memory checks use its RAM).
    pub fn is_host(&self) -> bool {
        matches!(self, Self::Cpu(_) | Self::NdArray)
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
        (DeviceSpec::Cpu(n), Precision::F32) => task.run::<CpuBackend>(vec![cpu_device(); *n]),
        (DeviceSpec::NdArray, Precision::F32) => ndarray::dispatch(task),
        (DeviceSpec::Cpu(_) | DeviceSpec::NdArray, Precision::Bf16) => {
            bail!("--precision bf16 needs a CUDA device (the CPU backends run f32)")
        }
        (DeviceSpec::Cuda(ids), p) => cuda::dispatch(ids, p, task),
        (DeviceSpec::Wgpu(ids), p) => wgpu::dispatch(ids, p, task),
    }
}

#[cfg(feature = "ndarray")]
mod ndarray {
    use super::BackendTask;

    pub fn dispatch<T: BackendTask>(task: T) -> anyhow::Result<T::Output> {
        task.run::<burn::backend::NdArray>(vec![Default::default()])
    }
}

#[cfg(not(feature = "ndarray"))]
mod ndarray {
    use super::BackendTask;

    pub fn dispatch<T: BackendTask>(_: T) -> anyhow::Result<T::Output> {
        anyhow::bail!("--devices ndarray requested, but this binary was built without the `ndarray` feature")
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
        assert_eq!("cpu".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu(1));
        assert_eq!("cpu:0,1".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cpu(2));
        assert_eq!(DeviceSpec::Cpu(2).to_string(), format!("cpu:0,1 ({CPU_BACKEND})"));
        assert!("cpu:1".parse::<DeviceSpec>().unwrap_err().to_string().contains("numbered 0,1"));
        assert_eq!("ndarray".parse::<DeviceSpec>().unwrap(), DeviceSpec::NdArray);
        assert_eq!(DeviceSpec::Cpu(1).to_string(), format!("cpu ({CPU_BACKEND})"));
        assert_eq!(DeviceSpec::Cuda(vec![0, 2]).to_string(), "cuda:0,2");
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
