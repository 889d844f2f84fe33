//! The config overlay, the loss curve, and the loop's cadence, stop and resume on a stand-in
//! run (no model: the loop only sees [`Steps`]).

use super::metrics::{LOSS_CURVE_FILE, METRICS_FILE, loss_svg};
use super::*;
use crate::TrainError;
use crate::checkpoint::folder_name;
use crate::engine::Trainable;
use crate::flow::FlowMatchConfig;
use std::sync::atomic::Ordering;

fn defaults() -> RunConfig<FlowMatchConfig> {
    RunConfig::defaults("sft", FlowMatchConfig::new())
}

#[test]
fn keys_override_defaults_section_by_section() {
    let text = "data = \"clips\"\ndevices = \"cuda:0,1\"\n[train]\nsteps = 7\ntrainable = \"all\"\nlr = 2e-5\nlora_shared = true\n[sft]\nshift = 3.0\n";
    let c = defaults().overlay(text, Path::new("sft.toml")).unwrap();
    assert_eq!(c.paths.data, Some(PathBuf::from("clips")));
    assert_eq!((c.paths.devices.as_str(), c.paths.out.is_none()), ("cuda:0,1", true));
    assert_eq!((c.train.steps, c.train.trainable, c.train.lr), (7, Trainable::All, 2e-5));
    assert!(c.train.lora_shared);
    assert_eq!(c.train.batch, 128, "untouched keys keep the paper's default");
    assert_eq!(c.objective.shift, 3.0);
    // The saved effective config reads back to the same config.
    let again = defaults().overlay(&c.to_toml().unwrap(), Path::new("effective.toml")).unwrap();
    assert_eq!(again, c);
}

#[test]
fn unknown_keys_and_bad_values_are_named() {
    let err = defaults().overlay("[train]\nstepz = 3\n", Path::new("a.toml")).unwrap_err().to_string();
    assert!(err.contains("a.toml") && err.contains("unknown key `train.stepz` in [train]") && err.contains("steps"), "{err}");
    let err = defaults().overlay("modeldir = \"x\"\n", Path::new("a.toml")).unwrap_err().to_string();
    assert!(err.contains("unknown key `modeldir` at the top level") && err.contains("model_dir"), "{err}");
    let err = defaults().overlay("[sft]\nshift = \"big\"\n", Path::new("a.toml")).unwrap_err().to_string();
    assert!(err.starts_with("a.toml: [sft]"), "{err}");
    let err = defaults().overlay("[train\n", Path::new("a.toml")).unwrap_err().to_string();
    assert!(err.contains("a.toml: invalid TOML"), "{err}");
    let err = defaults().overlay_file(Path::new("/nonexistent/ff-run.toml")).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/ff-run.toml"), "{err}");
}

#[test]
fn the_curve_spans_the_plot_and_labels_its_range() {
    let svg = loss_svg(&[(1, 1.0), (2, 0.1), (3, 0.01)]);
    assert!(svg.contains("log scale") && svg.contains(">1.0000<") && svg.contains(">0.0100<") && svg.contains("step 3"), "{svg}");
    // First point top-left, last bottom-right of the plot area.
    assert!(svg.contains("points=\"56.0,56.0 320.0,180.0 584.0,304.0\""), "{svg}");
    assert!(loss_svg(&[]).ends_with("</svg>\n"));
    assert!(!loss_svg(&[(1, -1.0), (2, 1.0)]).contains("log scale"));
}

/// A run whose step `n` has loss `1/n`, whose checkpoints hold an empty state, and which sets
/// `stop` during step `stop_at`.
struct Counter<'a> {
    done: usize,
    stop: &'a AtomicBool,
    stop_at: usize,
}

impl Steps<()> for Counter<'_> {
    fn done(&self) -> usize {
        self.done
    }
    fn step(&mut self, _: &()) -> Result<StepReport> {
        self.done += 1;
        if self.done == self.stop_at {
            self.stop.store(true, Ordering::SeqCst);
        }
        let loss = 1.0 / self.done as f64;
        Ok(StepReport { step: self.done, lr: 1e-3, loss, parts: vec![("part", 2.0 * loss)], grad_norm: 0.5, clips: 2 })
    }
    fn save(&self, run: &Path) -> Result<PathBuf> {
        let state =
            |dir: &Path| std::fs::write(dir.join(crate::checkpoint::STATE_FILE), "{}").map_err(|e| TrainError::Worker(e.to_string()));
        crate::checkpoint::save_folder(run, self.done, 10, state)
    }
    fn restore(&mut self, dir: &Path) -> Result<()> {
        self.done = dir.file_name().unwrap().to_str().unwrap().trim_start_matches("step-").parse().unwrap();
        Ok(())
    }
}

#[test]
fn the_loop_checkpoints_on_its_cadence_stops_on_the_flag_and_resumes() {
    let dir = std::env::temp_dir().join(format!("ff-runner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stop = AtomicBool::new(false);
    let plan = Plan { run: &dir, steps: 7, checkpoint_every: 3, resume: None, writes: true };
    let mut events = Vec::new();
    let mut run = Counter { done: 0, stop: &stop, stop_at: 4 };
    let outcome = drive(&plan, &(), &mut run, &stop, &mut |e| events.push(e)).unwrap();
    assert_eq!(outcome, Outcome::Stopped { step: 4 });
    let checkpoints: Vec<usize> =
        events.iter().filter_map(|e| if let Progress::Checkpoint { step, .. } = e { Some(*step) } else { None }).collect();
    assert_eq!(checkpoints, [3, 4], "every 3 steps, and the step the flag was set in");
    assert_eq!(events.first(), Some(&Progress::Started { done: 0, total: 7 }));
    assert_eq!(events.last(), Some(&Progress::Stopped { step: 4 }));
    assert!(dir.join(LOSS_CURVE_FILE).is_file());

    // Resumed from step 4: the log keeps steps 1..=4, the loop runs 5..=7 and checkpoints 6 and 7.
    stop.store(false, Ordering::SeqCst);
    let newest = latest(&dir).unwrap().unwrap();
    assert!(newest.ends_with(folder_name(4)));
    let plan = Plan { resume: Some(&newest), ..plan };
    let mut events = Vec::new();
    let mut run = Counter { done: 0, stop: &stop, stop_at: 0 };
    let outcome = drive(&plan, &(), &mut run, &stop, &mut |e| events.push(e)).unwrap();
    let last = dir.join(folder_name(7));
    assert_eq!(outcome, Outcome::Finished { checkpoint: Some(last.clone()) });
    assert_eq!(events[0], Progress::Resumed { dir: newest, step: 4 });
    assert_eq!(events[1], Progress::Started { done: 4, total: 7 });
    assert_eq!(events.last(), Some(&Progress::Finished { checkpoint: Some(last) }));
    let log = std::fs::read_to_string(dir.join(METRICS_FILE)).unwrap();
    let steps: Vec<u64> = log.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6, 7]);
    assert!(log.lines().all(|l| l.contains("\"part\":")), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}
