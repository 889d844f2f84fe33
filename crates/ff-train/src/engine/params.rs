//! Parameters by module path. The engine addresses every trainable parameter by its module path
//! (`blocks.0.self_attn.q.adapters.1.b`): the key of its gradient, optimizer state, EMA value and
//! checkpoint entry. Values are flattened to `[numel]` (every per-parameter rule of the engine is
//! elementwise), so one ordered map holds parameters of any rank, and sums over it run in the
//! same order on every worker and every run.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};
use std::collections::BTreeMap;

/// Flattened tensors by module path.
pub type ParamMap<B> = BTreeMap<String, Tensor<B, 1>>;

/// The module path under construction while a visitor or mapper walks a module.
#[derive(Default)]
struct PathStack(Vec<String>);

impl PathStack {
    fn enter(&mut self, name: &str) {
        self.0.push(name.to_string());
    }
    fn exit(&mut self) {
        self.0.pop();
    }
    fn path(&self) -> String {
        self.0.join(".")
    }
}

fn flat<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, 1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

/// The parameters of `module` whose path passes `keep`, flattened.
pub fn params<B: Backend, M: Module<B>>(module: &M, keep: impl Fn(&str) -> bool) -> ParamMap<B> {
    struct Collect<B: Backend, F> {
        stack: PathStack,
        keep: F,
        out: ParamMap<B>,
    }
    impl<B: Backend, F: Fn(&str) -> bool> ModuleVisitor<B> for Collect<B, F> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.stack.enter(name);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.stack.exit();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let path = self.stack.path();
            if (self.keep)(&path) {
                self.out.insert(path, flat(param.val()));
            }
        }
    }
    let mut visitor = Collect { stack: PathStack::default(), keep, out: BTreeMap::new() };
    module.visit(&mut visitor);
    visitor.out
}

/// The gradients of the parameters of `module` that require one and received one from `grads`.
pub fn gradients<B: AutodiffBackend, M: Module<B>>(module: &M, grads: &B::Gradients) -> ParamMap<B::InnerBackend> {
    struct Collect<'a, B: AutodiffBackend> {
        stack: PathStack,
        grads: &'a B::Gradients,
        out: ParamMap<B::InnerBackend>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.stack.enter(name);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.stack.exit();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let value = param.val();
            if let Some(g) = value.is_require_grad().then(|| value.grad(self.grads)).flatten() {
                self.out.insert(self.stack.path(), flat(g));
            }
        }
    }
    let mut visitor = Collect { stack: PathStack::default(), grads, out: BTreeMap::new() };
    module.visit(&mut visitor);
    visitor.out
}

/// `module` with the parameters named in `values` replaced (reshaped to each parameter's shape);
/// every parameter keeps its id and whether it requires a gradient.
pub fn assign<B: Backend, M: Module<B>>(module: M, values: ParamMap<B>) -> M {
    struct Assign<B: Backend> {
        stack: PathStack,
        values: ParamMap<B>,
    }
    impl<B: Backend> ModuleMapper<B> for Assign<B> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.stack.enter(name);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.stack.exit();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let tensor = match self.values.remove(&self.stack.path()) {
                Some(v) => {
                    let require_grad = tensor.is_require_grad();
                    v.reshape(tensor.shape()).set_require_grad(require_grad)
                }
                None => tensor,
            };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    module.map(&mut Assign { stack: PathStack::default(), values })
}

/// `module` with exactly the parameters whose path passes `trainable` requiring a gradient.
pub fn set_trainable<B: Backend, M: Module<B>>(module: M, trainable: impl Fn(&str) -> bool) -> M {
    struct Mark<F> {
        stack: PathStack,
        trainable: F,
    }
    impl<B: Backend, F: Fn(&str) -> bool> ModuleMapper<B> for Mark<F> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.stack.enter(name);
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.stack.exit();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let tensor = tensor.detach().set_require_grad((self.trainable)(&self.stack.path()));
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    module.map(&mut Mark { stack: PathStack::default(), trainable })
}

/// Elementwise `a + b` over the union of the keys (a key in one map only keeps its value).
pub fn add<B: Backend>(mut a: ParamMap<B>, b: ParamMap<B>) -> ParamMap<B> {
    for (path, g) in b {
        let sum = match a.remove(&path) {
            Some(x) => x + g,
            None => g,
        };
        a.insert(path, sum);
    }
    a
}

/// Every tensor of `map` on `device`.
pub fn to_device<B: Backend>(map: ParamMap<B>, device: &B::Device) -> ParamMap<B> {
    map.into_iter().map(|(k, v)| (k, v.to_device(device))).collect()
}
