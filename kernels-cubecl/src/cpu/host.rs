//! Host f32 values of CPU backend tensors for the kernel: NdArray's and Flex's are read in place
//! when row-major (a shared K/V cache entry too); otherwise NdArray's are copied row by row and
//! Flex's go through `into_data`.

use burn::backend::NdArray;
use burn::backend::ndarray::{FloatNdArrayElement, IntNdArrayElement, NdArrayTensor, QuantElement, SharedArray};
use burn::tensor::{backend::Backend, ops::FloatTensor};
use std::borrow::Cow;

/// A backend whose f32 tensors the CPU kernel can read on the host.
pub trait HostValues: Backend {
    /// The row-major values of the rank-`N` tensor `t`, borrowed where its memory already is
    /// row-major; `None` unless `t` is f32.
    fn values<const N: usize>(t: &FloatTensor<Self>) -> Option<Cow<'_, [f32]>>;
}

/// Through `into_data` (one copy).
#[cfg(feature = "flex")]
fn copied<B: Backend, const N: usize>(t: &FloatTensor<B>) -> Option<Cow<'static, [f32]>> {
    use burn::tensor::{DType, Tensor, TensorMetadata, TensorPrimitive};
    if t.dtype() != DType::F32 {
        return None;
    }
    let data = Tensor::<B, N>::from_primitive(TensorPrimitive::Float(t.clone())).into_data();
    data.into_vec::<f32>().ok().map(Cow::Owned)
}

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> HostValues for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
    fn values<const N: usize>(t: &FloatTensor<Self>) -> Option<Cow<'_, [f32]>> {
        let NdArrayTensor::F32(storage) = t else { return None };
        let view = storage.view();
        if let Some(values) = view.to_slice() {
            return Some(Cow::Borrowed(values));
        }
        let mut out = Vec::with_capacity(view.len());
        for row in view.rows() {
            match row.as_slice() {
                Some(row) => out.extend_from_slice(row),
                None => out.extend(row.iter()),
            }
        }
        Some(Cow::Owned(out))
    }
}

#[cfg(feature = "flex")]
impl HostValues for burn::backend::Flex {
    fn values<const N: usize>(t: &FloatTensor<Self>) -> Option<Cow<'_, [f32]>> {
        match t.as_slice::<f32>() {
            Some(values) => Some(Cow::Borrowed(values)),
            None => copied::<Self, N>(t),
        }
    }
}
