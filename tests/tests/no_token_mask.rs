//! No code path builds a token-level attention mask.
//!
//! * Memory: the packed forward of the tiny DiT over 24 frames × 256 tokens under frame-level
//!   rules (each frame sees frame 0, its predecessor and itself) must peak far below n² bytes; a
//!   dense boolean mask alone is n² bytes, dense f32 scores 8·n² per layer (2 heads). This test
//!   binary counts every heap allocation.
//! * Structure: no library source names a rank-4 boolean tensor (the shape of an attention mask).

use burn::backend::NdArray;
use burn::tensor::{Distribution, Tensor};
use ff_model::dit::{DitConfig, FrameLayout, Role, SegmentMask};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn packed_forward_memory_stays_far_below_a_dense_mask() {
    let device = Default::default();
    let model = DitConfig::tiny().init::<NdArray>(&device);
    let text = model.text_context(Tensor::random([1, 6, model.config().text_dim], Distribution::Normal(0.0, 1.0), &device));
    let (frames, side) = (24, 32); // 16×16 patches: 256 tokens per frame
    let n = frames * (side / 2) * (side / 2);
    let latents = Tensor::<NdArray, 5>::random([1, 16, frames, side, side], Distribution::Normal(0.0, 1.0), &device);
    let rules = (1..frames).fold(SegmentMask::new(frames).allow([0], [0]), |m, f| m.allow([f], [0, f - 1, f]));
    let layout = FrameLayout::chunk(0, frames, Role::Base);
    let timesteps = [vec![500.0; frames]];

    let before = CURRENT.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let out = model.forward_packed(latents, &timesteps, &layout, &text, &rules).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - before;
    assert_eq!(out.dims(), [1, 16, frames, side, side]);
    assert!(peak < n * n / 2, "peak {peak} bytes during the packed forward; a dense {n}×{n} mask is {} bytes", n * n);
}

/// Library sources (not tests) of the workspace.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.file_stem().is_some_and(|s| s.to_string_lossy().contains("tests")) {
            out.push(path);
        }
    }
}

#[test]
fn no_library_source_names_a_rank_4_boolean_tensor() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["kernels-cubecl/src", "crates"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.iter().any(|f| f.ends_with("dit/attention.rs")), "the scan reaches the DiT");
    for f in files.iter().filter(|f| f.components().any(|c| c.as_os_str() == "src")) {
        let text: String = std::fs::read_to_string(f).unwrap().split_whitespace().collect();
        for pattern in [",4,Bool>", "to_tokens("] {
            assert!(!text.contains(pattern), "{} builds a token-level mask ({pattern})", f.display());
        }
    }
}
