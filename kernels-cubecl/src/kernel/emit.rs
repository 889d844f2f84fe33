//! CUDA C++ source of every CubeCL kernel of this crate, produced without a device (feature
//! `emit-cuda`): the attention forward, the backward's delta kernel and its main (dK, dV, dQ)
//! kernel at head dims 64 and 128, in f32 and bf16, with the tiles and launch settings
//! [`super::launch`] picks on an sm_80/sm_90 card ([`super::tiles::Tiles::choose`]: tensor cores
//! for bf16, the register-tiled fallback for f32). The project has no element-wise CubeCL kernels
//! of its own: on CUDA those are Burn's fusion kernels, generated at run time from the traced ops.
//!
//! A launchable kernel's `CubeKernel::define()` needs a live `ComputeClient` (it reads the device's
//! properties), which a machine without a GPU cannot make. So each definition here is built the
//! way `#[cube(launch)]`'s generated `define` builds it: a `KernelBuilder` with CUDA's target
//! properties and the device properties of an sm_80/sm_90 card (the only ones the kernels read:
//! plane size, limits, shared memory and the `cmma` shapes), the kernel's generic float registered as the requested dtype, its
//! tensors expanded as inputs and outputs in parameter order, then the macro-generated `expand`.
//! CubeCL's CUDA compiler (`cubecl::cuda::CudaCompiler`, the dialect of `cubecl-cpp` that
//! `burn-cuda` launches with) turns the definition into the source NVRTC compiles on a GPU. The
//! compilation options are those `cubecl-cuda` sets for sm_80 and newer (fast math, grid
//! constants); the sm_90-only options (clusters, elect.sync) change nothing in these kernels, so
//! one source serves both architectures.

use super::backward::{flash_backward, flash_backward_delta};
use super::forward::flash_forward;
use super::tiles::{PLANE, Pass, Tiles};
use cubecl::cuda::{CudaCompiler, CudaRuntime};
use cubecl::features::MmaConfig;
use cubecl::ir::{DeviceProperties, ElemType, FloatKind, HardwareProperties, MemoryDeviceProperties, StorageType, VectorSize};
use cubecl::prelude::*;
use cubecl::{Compiler, Runtime};

/// One emitted kernel: its CUDA source and the launch settings.
#[derive(Clone, Debug)]
pub struct EmittedKernel {
    /// File stem, e.g. `flash_forward_d128_bf16`.
    pub name: String,
    /// `"attention"` for the attention kernels (the spill check applies to them).
    pub kind: &'static str,
    /// Entry point in the source (`extern "C" __global__`).
    pub entrypoint: String,
    /// Head dim the kernel was specialised for.
    pub head_dim: usize,
    /// Element type of q, k, v and the outputs (`"f32"`, `"bf16"`).
    pub dtype: &'static str,
    /// Units per cube `(x, y, z)`.
    pub cube_dim: [u32; 3],
    /// Shared memory in bytes (CubeCL declares it as dynamic shared memory: the launch passes it).
    pub shared_memory_bytes: usize,
    /// Grid, as the host code computes it.
    pub grid: &'static str,
    /// Whether the kernel uses tensor cores (its PTX must then hold `mma`).
    pub tensor_cores: bool,
    /// CUDA C++ source.
    pub source: String,
}

/// Device properties of a CUDA card of compute capability 8.0 or newer, as `cubecl-cuda` reads
/// them from the driver (the values of an H100 where they differ by card).
fn device_properties() -> DeviceProperties {
    let hardware = HardwareProperties {
        load_width: 128,
        plane_size_min: 32,
        plane_size_max: 32,
        max_bindings: 1024,
        max_shared_memory_size: 227 * 1024,
        max_cube_count: (i32::MAX as u32, u16::MAX as u32, u16::MAX as u32),
        max_units_per_cube: 1024,
        max_cube_dim: (1024, 1024, 64),
        num_streaming_multiprocessors: Some(132),
        num_tensor_cores: Some(4),
        num_cpu_cores: None,
        min_tensor_cores_dim: Some(8),
        max_vector_size: VectorSize::MAX,
    };
    let memory = MemoryDeviceProperties { max_page_size: 20 << 30, alignment: 512 };
    let mut props = DeviceProperties::new(Default::default(), memory, hardware, cubecl::profile::TimingMethod::System);
    // The tensor-core shapes `cubecl-cuda` registers for sm_80+ that the kernels use.
    let f32 = StorageType::Scalar(ElemType::Float(FloatKind::F32));
    for kind in [FloatKind::F16, FloatKind::BF16] {
        let half = StorageType::Scalar(ElemType::Float(kind));
        props.features.matmul.cmma.insert(MmaConfig { a_type: half, b_type: half, cd_type: f32, m: 16, n: 16, k: 16 });
    }
    props
}

/// A fresh builder with CUDA's target and device properties and the kernel's float as `dtype`.
fn builder<M: 'static>(dtype: StorageType) -> KernelBuilder {
    let mut builder = KernelBuilder::default();
    builder.runtime_properties(CudaRuntime::target_properties());
    builder.device_properties(&device_properties());
    builder.scope.register_type::<DynamicScalar<M>>(dtype);
    AddressType::U32.register(&mut builder.scope);
    builder
}

fn input<C: CubePrimitive>(builder: &mut KernelBuilder) -> NativeExpand<Tensor<C>> {
    <Tensor<C> as LaunchArg>::expand(&TensorCompilationArg { inplace: None }, builder)
}

fn output<C: CubePrimitive>(builder: &mut KernelBuilder) -> NativeExpand<Tensor<C>> {
    <Tensor<C> as LaunchArg>::expand_output(&TensorCompilationArg { inplace: None }, builder)
}

/// Compiles `definition` with CubeCL's CUDA compiler (sm_80+ options, unchecked like
/// [`super::launch`]'s `launch_unchecked`).
fn compile(definition: KernelDefinition) -> Result<(String, usize, [u32; 3]), String> {
    let mut options = <CudaCompiler as Compiler>::CompilationOptions::default();
    options.supports_features.fast_math = true;
    options.supports_features.grid_constants = true;
    let kernel = CudaCompiler::default()
        .compile(definition, &options, ExecutionMode::Unchecked, AddressType::U32.unsigned_type())
        .map_err(|e| format!("{e:?}"))?;
    let cube = kernel.cube_dim;
    Ok((kernel.to_string(), kernel.shared_memory_size(), [cube.x, cube.y, cube.z]))
}

fn settings(name: &str, cube: CubeDim) -> KernelSettings {
    KernelSettings::default().cube_dim(cube).address_type(AddressType::U32).kernel_name(name)
}

/// A kernel definition and whether it runs on tensor cores.
type Defined = (KernelDefinition, bool);

fn forward(dim: usize, dtype: StorageType, name: &str) -> Defined {
    type F = DynamicScalar<flash_forward::_F>;
    let t = Tiles::choose(&device_properties(), Pass::Forward, dtype, dim);
    let mut b = builder::<flash_forward::_F>(dtype);
    let (q, k, v) = (input::<F>(&mut b), input::<F>(&mut b), input::<F>(&mut b));
    let (tiles, ranges) = (input::<u32>(&mut b), input::<u32>(&mut b));
    let (out, lse) = (output::<F>(&mut b), output::<f32>(&mut b));
    flash_forward::expand::<F>(&mut b.scope, q, k, v, tiles, ranges, out, lse, dim, t.planes, t.cols, t.cmma, dtype);
    (b.build(settings(name, CubeDim::new_2d(PLANE as u32, t.planes as u32))), t.cmma)
}

fn backward_delta(dim: usize, dtype: StorageType, name: &str) -> Defined {
    type F = DynamicScalar<flash_backward_delta::_F>;
    let mut b = builder::<flash_backward_delta::_F>(dtype);
    let (out, grad) = (input::<F>(&mut b), input::<F>(&mut b));
    let (delta, dq) = (output::<f32>(&mut b), output::<f32>(&mut b));
    flash_backward_delta::expand::<F>(&mut b.scope, out, grad, delta, dq, dim, dtype);
    (b.build(settings(name, CubeDim::new_1d(PLANE as u32))), false)
}

fn backward(dim: usize, dtype: StorageType, name: &str) -> Defined {
    type F = DynamicScalar<flash_backward::_F>;
    let t = Tiles::choose(&device_properties(), Pass::Backward, dtype, dim);
    let mut b = builder::<flash_backward::_F>(dtype);
    let (q, k, v, grad) = (input::<F>(&mut b), input::<F>(&mut b), input::<F>(&mut b), input::<F>(&mut b));
    let (lse, delta, tiles, ranges) = (input::<f32>(&mut b), input::<f32>(&mut b), input::<u32>(&mut b), input::<u32>(&mut b));
    let (dk, dv, dq) = (output::<F>(&mut b), output::<F>(&mut b), output::<Atomic<f32>>(&mut b));
    flash_backward::expand::<F>(
        &mut b.scope,
        q,
        k,
        v,
        grad,
        lse,
        delta,
        tiles,
        ranges,
        dk,
        dv,
        dq,
        dim,
        t.planes,
        t.cols,
        t.cmma,
        t.shared_dk,
        dtype,
    );
    (b.build(settings(name, CubeDim::new_2d(PLANE as u32, t.planes as u32))), t.cmma)
}

/// Head dims the kernels are emitted for (Wan2.1: 128; the tiny configs: 64 and below).
pub const HEAD_DIMS: [usize; 2] = [64, 128];

/// Every kernel of the crate at [`HEAD_DIMS`] in f32 and bf16, as CUDA C++ (see the module docs).
/// `Err` names the kernel CubeCL's compiler rejected.
pub fn emit_cuda() -> Result<Vec<EmittedKernel>, String> {
    type Define = fn(usize, StorageType, &str) -> Defined;
    let kernels: [(&str, Define, &str); 3] = [
        ("flash_forward", forward, "(query tiles, batch × heads)"),
        ("flash_backward_delta", backward_delta, "(⌈q_tokens / 32⌉, batch × heads)"),
        ("flash_backward", backward, "(key tiles, batch × heads)"),
    ];
    let dtypes = [("f32", FloatKind::F32), ("bf16", FloatKind::BF16)];
    let mut out = Vec::new();
    for (base, define, grid) in kernels {
        for head_dim in HEAD_DIMS {
            for (dtype, kind) in dtypes {
                let name = format!("{base}_d{head_dim}_{dtype}");
                let storage = StorageType::Scalar(ElemType::Float(kind));
                let (definition, tensor_cores) = define(head_dim, storage, &name);
                let (source, shared_memory_bytes, cube_dim) = compile(definition).map_err(|e| format!("kernel {name}: {e}"))?;
                out.push(EmittedKernel {
                    entrypoint: name.clone(),
                    name,
                    kind: "attention",
                    head_dim,
                    dtype,
                    cube_dim,
                    shared_memory_bytes,
                    grid,
                    tensor_cores,
                    source,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twelve kernels, each a CUDA entry point of its own name with the shared memory its tiles
    /// need; the bf16 forward and main backward run on tensor cores (`wmma` in the source), the
    /// f32 ones on the fallback.
    #[test]
    fn every_kernel_compiles_to_cuda_source_with_its_entry_point() {
        let kernels = emit_cuda().expect("CubeCL's CUDA compiler accepts every kernel");
        assert_eq!(kernels.len(), 3 * HEAD_DIMS.len() * 2);
        for k in &kernels {
            assert!(k.source.contains(&format!("){} (", k.entrypoint)), "{}: no entry point in\n{}", k.name, k.source);
            assert!(k.source.contains("__global__"), "{}", k.name);
            let delta = k.name.starts_with("flash_backward_delta");
            assert_eq!(k.tensor_cores, k.dtype == "bf16" && !delta, "{}", k.name);
            assert_eq!(k.tensor_cores, k.source.contains("wmma"), "{}", k.name);
            if !delta {
                let dtype = StorageType::Scalar(ElemType::Float(if k.dtype == "bf16" { FloatKind::BF16 } else { FloatKind::F32 }));
                let pass = if k.name.starts_with("flash_forward") { Pass::Forward } else { Pass::Backward };
                let t = Tiles::choose(&device_properties(), pass, dtype, k.head_dim);
                assert_eq!(k.cube_dim, [PLANE as u32, t.planes as u32, 1], "{}", k.name);
                assert!(k.shared_memory_bytes >= t.shared_bytes(pass, dtype), "{}: {} bytes", k.name, k.shared_memory_bytes);
            }
        }
        let bf16 = kernels.iter().find(|k| k.dtype == "bf16").unwrap();
        assert!(bf16.source.contains("bfloat16"), "bf16 kernel reads bf16:\n{}", bf16.source);
    }
}
