//! Checkpoint round trips on a tiny role model: bit-exact resume, atomic saves, pruning, the
//! DiT loader reading the crate's own keys, and the inference loader.

use super::*;
use crate::engine::params::ParamMap;
use crate::engine::tests::{B, clips, config, objective, tiny_model};
use crate::engine::{Trainable, Trainer};
use burn::backend::NdArray;
use burn::module::AutodiffModule;
use ff_model::{LoraConfig, WanDit};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ff-train-checkpoint-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn bits(map: &ParamMap<NdArray>) -> BTreeMap<String, Vec<u32>> {
    map.iter().map(|(k, v)| (k.clone(), v.clone().into_data().to_vec::<f32>().unwrap().iter().map(|x| x.to_bits()).collect())).collect()
}

fn all_params(model: &WanDit<NdArray>) -> BTreeMap<String, Vec<u32>> {
    bits(&params(model, |_| true))
}

fn trainer(model: &WanDit<B>, config: TrainConfig) -> Trainer<B> {
    Trainer::new(config, model.clone(), vec![Default::default()], 4).unwrap()
}

fn resume_is_bit_identical(trainable: Trainable) {
    let scratch = Scratch::new(&format!("resume-{trainable:?}"));
    let (model, data, config) = (tiny_model(), clips(4), config().with_trainable(trainable));
    let mut straight = trainer(&model, config.clone());
    let losses: Vec<f64> = (0..6).map(|_| straight.step(&objective(), &data).unwrap().loss).collect();

    let mut first = trainer(&model, config.clone());
    (0..3).for_each(|_| drop(first.step(&objective(), &data).unwrap()));
    let dir = save(&scratch.0, &first, None).unwrap();
    drop(first);
    let mut resumed = trainer(&model, config);
    restore(&mut resumed, &dir).unwrap();
    assert_eq!(resumed.step_count(), 3);
    let resumed_losses: Vec<f64> = (0..3).map(|_| resumed.step(&objective(), &data).unwrap().loss).collect();

    assert_eq!(resumed_losses, losses[3..], "{trainable:?}: losses of steps 4..6");
    assert_eq!(bits(&resumed.trainable_values()), bits(&straight.trainable_values()), "{trainable:?}: weights");
    assert_eq!(bits(resumed.ema_values()), bits(straight.ema_values()), "{trainable:?}: EMA");
    assert_eq!(all_params(&resumed.model().valid()), all_params(&straight.model().valid()));
}

#[test]
fn resume_after_three_of_six_steps_is_bit_identical() {
    resume_is_bit_identical(Trainable::Lora);
    resume_is_bit_identical(Trainable::All);
}

#[test]
fn an_interrupted_save_leaves_the_previous_checkpoint_loadable() {
    let scratch = Scratch::new("interrupted");
    let (model, data) = (tiny_model(), clips(4));
    let mut t = trainer(&model, config());
    t.step(&objective(), &data).unwrap();
    let saved = save(&scratch.0, &t, None).unwrap();
    let weights = bits(&t.trainable_values());
    // A save killed half-way: its temp folder holds a partial weight file and no state.
    let partial = scratch.0.join(".step-000002.tmp");
    fs::create_dir_all(&partial).unwrap();
    fs::write(partial.join(MODEL_FILE), b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":").unwrap();
    fs::write(saved.join(".model.safetensors.tmp"), b"junk").unwrap();
    assert_eq!(latest(&scratch.0).unwrap(), Some(saved.clone()));
    let mut resumed = trainer(&model, config());
    restore(&mut resumed, &saved).unwrap();
    assert_eq!(bits(&resumed.trainable_values()), weights);
    // The next save replaces the leftover.
    t.step(&objective(), &data).unwrap();
    assert_eq!(save(&scratch.0, &t, None).unwrap(), scratch.0.join("step-000002"));
    assert!(!partial.exists());
}

#[test]
fn saves_keep_the_newest_checkpoints() {
    let scratch = Scratch::new("prune");
    let (model, data) = (tiny_model(), clips(4));
    let mut t = trainer(&model, config().with_keep_checkpoints(2));
    for _ in 0..3 {
        t.step(&objective(), &data).unwrap();
        save(&scratch.0, &t, None).unwrap();
    }
    let steps: Vec<usize> = list(&scratch.0).unwrap().into_iter().map(|(s, _)| s).collect();
    assert_eq!(steps, vec![2, 3]);
}

#[test]
fn resume_refuses_a_different_model_or_dataset() {
    let scratch = Scratch::new("mismatch");
    let (model, data) = (tiny_model(), clips(4));
    let mut t = trainer(&model, config());
    t.step(&objective(), &data).unwrap();
    let dir = save(&scratch.0, &t, None).unwrap();
    let mut other = Trainer::new(config().with_lora_rank(8), model.clone(), vec![Default::default()], 4).unwrap();
    let err = restore(&mut other, &dir).unwrap_err().to_string();
    assert!(err.contains("rank 4") && err.contains("state.json"), "{err}");
    let mut shared = Trainer::new(config().with_lora_shared(true), model.clone(), vec![Default::default()], 4).unwrap();
    let err = restore(&mut shared, &dir).unwrap_err().to_string();
    assert!(err.contains("shared false") && err.contains("shared true"), "{err}");
    let mut fewer = Trainer::new(config(), model, vec![Default::default()], 3).unwrap();
    assert!(restore(&mut fewer, &dir).unwrap_err().to_string().contains("made over 4 clips"));
}

#[test]
fn the_dit_loader_reads_the_crates_own_role_weights() {
    let scratch = Scratch::new("roles");
    let model = tiny_model().valid();
    let path = scratch.0.join("roles.safetensors");
    write_tensors(&path, model.file_tensors(|_| true).unwrap(), HashMap::new()).unwrap();
    let mut fresh = model.config().init::<NdArray>(&Default::default()).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    fresh.load_weights(&path).unwrap();
    assert_eq!(all_params(&fresh), all_params(&model));
}

/// Half-precision weight files: the DiT loader reads them back as f32 within f16's rounding
/// (relative 2^-11) and at half the size; a value f16 cannot hold is refused by name.
#[test]
fn f16_weight_files_load_within_half_rounding() {
    let scratch = Scratch::new("f16");
    let model = tiny_model().valid();
    let (full, half) = (scratch.0.join("f32.safetensors"), scratch.0.join("f16.safetensors"));
    write_tensors(&full, model.file_tensors(|_| true).unwrap(), HashMap::new()).unwrap();
    write_tensors_as(&half, model.file_tensors(|_| true).unwrap(), HashMap::new(), Stored::F16).unwrap();
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len() as f64;
    assert!(size(&half) < 0.55 * size(&full), "{} vs {} bytes", size(&half), size(&full));
    let mut fresh = model.config().init::<NdArray>(&Default::default()).with_roles(&LoraConfig::new(4).with_alpha(4.0));
    fresh.load_weights(&half).unwrap();
    let (want, got) = (params(&model, |_| true), params(&fresh, |_| true));
    assert_eq!(want.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>());
    for (key, w) in &want {
        let (w, g) = (w.to_data().to_vec::<f32>().unwrap(), got[key].to_data().to_vec::<f32>().unwrap());
        let bad = w.iter().zip(&g).find(|(w, g)| (*w - *g).abs() > w.abs() * 4.9e-4 + 6e-8);
        assert!(bad.is_none(), "{key}: {bad:?}");
    }
    let huge = vec![("blocks.0.huge".to_string(), TensorData::new(vec![1.0f32, 7e4], [2]))];
    let err = write_tensors_as(&half, huge, HashMap::new(), Stored::F16).unwrap_err().to_string();
    assert!(err.contains("blocks.0.huge") && err.contains("f16"), "{err}");
}

#[test]
fn generate_loads_a_run_as_base_plus_ema_roles() {
    let scratch = Scratch::new("generate");
    let (model, data) = (tiny_model(), clips(4));
    let base = scratch.0.join("base.safetensors");
    write_tensors(&base, model.valid().file_tensors(|p| !Trainable::Lora.contains(p)).unwrap(), HashMap::new()).unwrap();
    let run = scratch.0.join("run");
    let mut t = trainer(&model, config().with_ema_decay(0.5));
    for _ in 0..2 {
        t.step(&objective(), &data).unwrap();
    }
    save(&run, &t, Some(&base)).unwrap();
    let loaded = load_dit::<NdArray>(model.config(), &run, &Default::default()).unwrap();
    let expected = t.ema_model();
    assert_eq!(all_params(&loaded), all_params(&expected));
    assert_ne!(all_params(&expected), all_params(&t.model().valid()), "the EMA differs from the current weights");
    let other = model.config().clone().with_rope_theta(500.0);
    let err = load_dit::<NdArray>(&other, &run, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("state.json") && err.contains("config"), "{err}");
}

#[test]
fn an_exported_student_serves_its_roles_merged() {
    use burn::module::Param;
    use burn::tensor::{Distribution, Tensor};
    use ff_model::dit::Role;
    let scratch = Scratch::new("export-roles");
    let mut model = tiny_model().valid();
    let dims = model.role_embedding.as_ref().unwrap().dims();
    model.role_embedding = Some(Param::from_tensor(Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())));
    export_roles(&model, &scratch.0).unwrap();
    let served = ff_sched::student::load_roles::<NdArray>(model.config(), &scratch.0, &Default::default()).unwrap();
    let Some([planner, renderer]) = served else { panic!("an exported student loads as its two role models") };
    assert_eq!(all_params(&planner), all_params(&model.merge(Role::Planner)));
    assert_eq!(all_params(&renderer), all_params(&model.merge(Role::Renderer)));
    assert_ne!(all_params(&planner), all_params(&renderer), "the roles differ by their role vectors");

    fs::remove_file(scratch.0.join("renderer").join(ff_sched::student::ROLE_WEIGHTS)).unwrap();
    let err = ff_sched::student::load_roles::<NdArray>(model.config(), &scratch.0, &Default::default()).err().unwrap().to_string();
    assert!(err.contains("both role folders") && err.contains("renderer"), "{err}");
    let err = export_roles(&model.merge(Role::Planner), &scratch.0.join("plain")).unwrap_err().to_string();
    assert!(err.contains("no planner/renderer roles"), "{err}");
}

/// Largest absolute difference between the parameters of two models of one structure.
fn largest_difference(a: &WanDit<NdArray>, b: &WanDit<NdArray>) -> f32 {
    let (a, b) = (params(a, |_| true), params(b, |_| true));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    a.iter().map(|(k, v)| (v.clone() - b[k].clone()).abs().max().into_scalar()).fold(0.0, f32::max)
}

#[test]
fn an_exported_student_unmerges_into_roles_that_merge_back() {
    use burn::module::Param;
    use burn::tensor::{Distribution, Tensor};
    use ff_model::dit::Role;
    let dir = Path::new("export");
    let mut model = tiny_model().valid();
    let dims = model.role_embedding.as_ref().unwrap().dims();
    model.role_embedding = Some(Param::from_tensor(Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())));
    let (planner, renderer) = (model.merge(Role::Planner), model.merge(Role::Renderer));

    // The tiny model's adapters are rank 4: the roles differ by rank 8.
    let roles = unmerge_roles(&planner, renderer.clone(), &LoraConfig::new(8).with_alpha(8.0), dir).unwrap();
    assert_eq!(all_params(&roles.merge(Role::Renderer)), all_params(&renderer), "the renderer is the backbone, bit for bit");
    let error = largest_difference(&roles.merge(Role::Planner), &planner);
    assert!(error < 1e-5, "the planner merges back to within {error}");
    assert!(largest_difference(&planner, &renderer) > 1e-2, "the roles differ");

    let err = unmerge_roles(&planner, renderer.clone(), &LoraConfig::new(4).with_alpha(4.0), dir).unwrap_err().to_string();
    assert!(err.contains("export") && err.contains(".base.weight") && err.contains("more than rank 4"), "{err}");
    let err = unmerge_roles(&planner, renderer.clone(), &LoraConfig::new(8).with_shared(true), dir).unwrap_err().to_string();
    assert!(err.contains("shared adapter"), "{err}");

    let key = params(&planner, |p| p.starts_with("blocks.0.ffn")).into_keys().next().unwrap();
    let bumped = params(&planner, |p| p == key).into_iter().map(|(k, v)| (k, v + 1e-3)).collect();
    let planner = crate::engine::params::assign(planner, bumped);
    let err = unmerge_roles(&planner, renderer, &LoraConfig::new(8).with_alpha(8.0), dir).unwrap_err().to_string();
    assert!(err.contains(&key) && err.contains("not adapted"), "{err}");
}

/// Writes the frozen tensors of `model` (the first value plus `bump`) as `dir/name/model.safetensors`.
fn write_base(dir: &Path, name: &str, model: &WanDit<NdArray>, bump: f32) -> PathBuf {
    let mut tensors = model.file_tensors(|p| !Trainable::Lora.contains(p)).unwrap();
    let (_, first) = &mut tensors[0];
    let mut values = first.to_vec::<f32>().unwrap();
    values[0] += bump;
    *first = TensorData::new(values, first.shape.clone());
    let file = dir.join(name).join("model.safetensors");
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    write_tensors(&file, tensors, HashMap::new()).unwrap();
    file
}

#[test]
fn resume_refuses_another_base_model_naming_both() {
    use crate::runner::{Engine, Steps};
    let scratch = Scratch::new("base-identity");
    let (model, data, objective) = (tiny_model(), clips(4), objective());
    let base = write_base(&scratch.0, "model-a", &model.valid(), 0.0);
    let other = write_base(&scratch.0, "model-b", &model.valid(), 1.0);
    let moved = write_base(&scratch.0, "model-a-moved", &model.valid(), 0.0);
    let mut engine = Engine { trainer: trainer(&model, config()), objective: &objective, base: Some(&base) };
    engine.trainer.step(&objective, &data).unwrap();
    let dir = engine.save(&scratch.0.join("run")).unwrap();

    let mut resumed = Engine { trainer: trainer(&model, config()), objective: &objective, base: Some(&other) };
    let err = resumed.restore(&dir).unwrap_err().to_string();
    assert!(err.contains("model-a") && err.contains("model-b") && err.contains("state.json"), "{err}");
    // The same weights at another path are the same base (a moved model directory).
    let mut resumed = Engine { trainer: trainer(&model, config()), objective: &objective, base: Some(&moved) };
    resumed.restore(&dir).unwrap();
    assert_eq!(resumed.done(), 1);
}
