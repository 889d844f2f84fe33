//! [`AttentionBackend::checkpoint`] on `Autodiff<B>`: activation checkpointing of one region.
//!
//! Why by hand: Burn's checkpoint strategies (`BalancedCheckpointing`) recompute only the ops
//! Burn marks memory-bound and always keep the inputs of compute-bound ones (every matmul), which
//! are most of a transformer block's activations; nothing in Burn 0.21 recomputes a whole region.
//!
//! Forward: the region runs on untracked copies of its inputs (no graph, no saved activations);
//! one node with the inputs as parents stands for it. Backward: the region runs again on fresh
//! leaves made from the saved inputs (a separate graph, so that nothing locks the outer one),
//! is differentiated against the incoming output gradient, and the leaves' gradients are
//! registered for the parents. The recomputation runs the same ops on the same inputs, so the
//! forward values are the same; the gradients of a parameter used inside one region are summed in
//! the region's own order.
//!
//! Burn's backward ops take a fixed number of parents: the inputs are padded to
//! [`CHECKPOINT_INPUTS`] with an untracked node (no gradient goes to it).

use super::{AttentionBackend, CHECKPOINT_INPUTS, Region};
use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::{base::Checkpointer, strategy::CheckpointStrategy};
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use std::fmt;
use std::marker::PhantomData;

/// The region and its inputs on the inner backend.
struct Saved<B: AttentionBackend, C: CheckpointStrategy> {
    inputs: Vec<FloatTensor<B>>,
    region: Region<Autodiff<B, C>>,
}

impl<B: AttentionBackend, C: CheckpointStrategy> Clone for Saved<B, C> {
    fn clone(&self) -> Self {
        Self { inputs: self.inputs.clone(), region: self.region.clone() }
    }
}

impl<B: AttentionBackend, C: CheckpointStrategy> fmt::Debug for Saved<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "checkpointed region of {} inputs", self.inputs.len())
    }
}

#[derive(Debug)]
struct RegionBackward<C>(PhantomData<C>);

impl<B: AttentionBackend, C: CheckpointStrategy> Backward<B, CHECKPOINT_INPUTS> for RegionBackward<C> {
    type State = Saved<B, C>;

    fn backward(self, ops: Ops<Self::State, CHECKPOINT_INPUTS>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        type A<B, C> = Autodiff<B, C>;
        let grad = grads.consume::<B>(&ops.node);
        let Saved { inputs, region } = ops.state;
        let leaves: Vec<FloatTensor<A<B, C>>> = inputs
            .into_iter()
            .zip(&ops.parents)
            .map(|(x, parent)| A::<B, C>::float_set_require_grad(A::<B, C>::from_inner(x), parent.is_some()))
            .collect();
        let out = region(leaves.clone());
        let local = A::<B, C>::backward(A::<B, C>::float_mul(out, A::<B, C>::from_inner(grad)));
        for (leaf, parent) in leaves.iter().zip(ops.parents) {
            if let (Some(node), Some(g)) = (parent, A::<B, C>::grad(leaf, &local)) {
                grads.register::<B>(node.id, g);
            }
        }
    }
}

/// `region(inputs)` checkpointed on `Autodiff<B, C>` (see the module docs).
pub(super) fn checkpoint<B: AttentionBackend, C: CheckpointStrategy>(
    inputs: Vec<FloatTensor<Autodiff<B, C>>>,
    region: Region<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    assert!(
        !inputs.is_empty() && inputs.len() <= CHECKPOINT_INPUTS,
        "a checkpointed region takes 1 to {CHECKPOINT_INPUTS} inputs, not {}",
        inputs.len()
    );
    let untracked =
        |inputs: &[FloatTensor<Autodiff<B, C>>]| inputs.iter().map(|x| Autodiff::<B, C>::from_inner(x.primitive.clone())).collect();
    let pad = Autodiff::<B, C>::from_inner(inputs[0].primitive.clone()).node;
    let mut nodes: Vec<_> = inputs.iter().map(|x| x.node.clone()).collect();
    nodes.resize(CHECKPOINT_INPUTS, pad);
    let nodes = nodes.try_into().expect("padded to CHECKPOINT_INPUTS");
    match RegionBackward::<C>(PhantomData).prepare::<C>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let out = region(untracked(&inputs)).primitive;
            // `inputs` (their nodes' reference counts) outlive the registration of the step: freed
            // before it, their nodes could look unused to another thread's backward pass, which
            // frees the unused roots of every graph (vendor/burn-autodiff, `float_cat`).
            let saved = Saved { inputs: inputs.iter().map(|x| x.primitive.clone()).collect(), region };
            prep.finish(saved, out)
        }
        OpsKind::UnTracked(prep) => prep.finish(region(inputs).primitive),
    }
}

#[cfg(test)]
mod tests {
    use crate::{AttentionBackend, Region};
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Distribution, Tensor, TensorPrimitive, activation::gelu};
    use std::sync::Arc;

    type A = Autodiff<NdArray>;

    /// `gelu(x·w)·c` with `c` a captured constant.
    fn layer(x: Tensor<A, 2>, w: Tensor<A, 2>, c: &Tensor<A, 2>) -> Tensor<A, 2> {
        gelu(x.matmul(w)) * c.clone()
    }

    fn checkpointed(x: Tensor<A, 2>, w: Tensor<A, 2>, c: &Tensor<A, 2>) -> Tensor<A, 2> {
        let c = c.clone();
        let region: Region<A> = Arc::new(move |inputs| {
            let t = |p| Tensor::<A, 2>::from_primitive(TensorPrimitive::Float(p));
            let mut inputs = inputs.into_iter();
            let (x, w) = (t(inputs.next().unwrap()), t(inputs.next().unwrap()));
            layer(x, w, &c).into_primitive().tensor()
        });
        let prim = |x: Tensor<A, 2>| x.into_primitive().tensor();
        Tensor::from_primitive(TensorPrimitive::Float(A::checkpoint(vec![prim(x), prim(w)], region)))
    }

    #[test]
    fn a_checkpointed_chain_has_the_gradients_of_the_plain_one() {
        // Two regions in a chain sharing a weight, the input also used outside them: the
        // gradients of the input and the weight equal those of the plain graph bit for bit (the
        // same ops on the same values; each sum has two terms, and a + b = b + a).
        let dev = Default::default();
        let x0 = Tensor::<NdArray, 2>::random([4, 8], Distribution::Normal(0.0, 1.0), &dev);
        let w0 = Tensor::<NdArray, 2>::random([8, 8], Distribution::Normal(0.0, 0.5), &dev);
        let c = Tensor::<A, 2>::random([4, 8], Distribution::Normal(1.0, 0.1), &dev);
        let grads = |checkpoint: bool| {
            let x = Tensor::<A, 2>::from_inner(x0.clone()).require_grad();
            let w = Tensor::<A, 2>::from_inner(w0.clone()).require_grad();
            let run = |x, w| if checkpoint { checkpointed(x, w, &c) } else { layer(x, w, &c) };
            let y = run(run(x.clone(), w.clone()), w.clone());
            let g = ((y.clone() * y).sum() + x.clone().sum()).backward();
            (x.grad(&g).unwrap().into_data(), w.grad(&g).unwrap().into_data())
        };
        let (plain, checkpointed) = (grads(false), grads(true));
        assert_eq!(plain.0, checkpointed.0, "input gradient");
        assert_eq!(plain.1, checkpointed.1, "weight gradient");
    }
}
