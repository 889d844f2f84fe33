//! Self-Forcing-style `.pt` checkpoints: a torch zip pickle holding `{"generator": ...,
//! "generator_ema": {"model.<wan key>": tensor}}`. The file is written here with a minimal pickle
//! writer (protocol 2, the opcodes torch.save emits for tensors), so no torch is needed.

use burn::backend::NdArray;
use burn::tensor::TensorData;
use ff_model::dit::{DitConfig, WanDit};
use ff_model::fixture::{FixtureMeta, check_dit_model};
use ff_model::load::read_tensors;
use ff_tests::fixtures_dir;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

#[derive(Default)]
struct Pickle {
    out: Vec<u8>,
    storages: Vec<Vec<u8>>,
}

impl Pickle {
    fn str(&mut self, s: &str) {
        self.out.push(b'X');
        self.out.extend((s.len() as u32).to_le_bytes());
        self.out.extend(s.as_bytes());
    }
    fn int(&mut self, v: usize) {
        self.out.push(b'J');
        self.out.extend((v as i32).to_le_bytes());
    }
    fn global(&mut self, module: &str, name: &str) {
        self.out.push(b'c');
        self.out.extend(format!("{module}\n{name}\n").as_bytes());
    }
    fn tuple(&mut self, items: impl FnOnce(&mut Self)) {
        self.out.push(b'(');
        items(self);
        self.out.push(b't');
    }
    /// `torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())` over
    /// bf16 storage (as Self-Forcing's checkpoints hold).
    fn tensor(&mut self, data: &TensorData) {
        let values = data.to_vec::<f32>().unwrap();
        let key = self.storages.len().to_string();
        self.storages.push(values.iter().flat_map(|v| half::bf16::from_f32(*v).to_le_bytes()).collect());
        let shape: Vec<usize> = data.shape.to_vec();
        let stride: Vec<usize> = (0..shape.len()).map(|i| shape[i + 1..].iter().product()).collect();
        self.global("torch._utils", "_rebuild_tensor_v2");
        self.tuple(|p| {
            p.tuple(|p| {
                p.str("storage");
                p.global("torch", "BFloat16Storage");
                p.str(&key);
                p.str("cpu");
                p.int(values.len());
            });
            p.out.push(b'Q'); // BINPERSID
            p.int(0);
            p.tuple(|p| shape.iter().for_each(|d| p.int(*d)));
            p.tuple(|p| stride.iter().for_each(|d| p.int(*d)));
            p.out.push(0x89); // NEWFALSE
            p.global("collections", "OrderedDict");
            p.out.extend(b")R"); // EMPTY_TUPLE, REDUCE
        });
        self.out.push(b'R');
    }
    fn dict(&mut self, entries: impl FnOnce(&mut Self)) {
        self.out.extend(b"}(");
        entries(self);
        self.out.push(b'u');
    }
}

/// A `.pt` file holding one state dict (keys prefixed `model.`) under each top-level key.
fn write_pt(path: &Path, tops: &[(&str, &BTreeMap<String, TensorData>)]) {
    let mut p = Pickle::default();
    p.out.extend(b"\x80\x02");
    p.dict(|p| {
        for (top, state) in tops {
            p.str(top);
            p.dict(|p| {
                for (k, v) in state.iter() {
                    p.str(&format!("model.{k}"));
                    p.tensor(v);
                }
            });
        }
    });
    p.out.push(b'.');
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("archive/data.pkl", opts).unwrap();
    zip.write_all(&p.out).unwrap();
    for (i, s) in p.storages.iter().enumerate() {
        zip.start_file(format!("archive/data/{i}"), opts).unwrap();
        zip.write_all(s).unwrap();
    }
    zip.start_file("archive/version", opts).unwrap();
    zip.write_all(b"3\n").unwrap();
    zip.finish().unwrap();
}

/// The same keys and shapes with other values (every weight negated and shifted).
fn other_weights(weights: &BTreeMap<String, TensorData>) -> BTreeMap<String, TensorData> {
    weights
        .iter()
        .map(|(k, v)| {
            let values: Vec<f32> = v.to_vec::<f32>().unwrap().iter().map(|x| 0.5 - x).collect();
            (k.clone(), TensorData::new(values, v.shape.clone()))
        })
        .collect()
}

#[test]
fn self_forcing_pt_checkpoint_loads_generator_ema() {
    let dir = fixtures_dir().join("wan_dit_tiny");
    let meta = FixtureMeta::read(&dir).unwrap();
    let config = DitConfig::from_json(dir.join("meta.json")).unwrap();
    let weights = read_tensors(&dir.join("weights_wan.safetensors")).unwrap();
    let other = other_weights(&weights);
    let out = std::env::temp_dir().join(format!("ff-self-forcing-{}.pt", std::process::id()));
    let load_err = |tops: &[(&str, &BTreeMap<String, TensorData>)]| {
        write_pt(&out, tops);
        let model = WanDit::<NdArray>::load(&config, &out, &Default::default()).unwrap();
        check_dit_model(&model, &meta).unwrap()
    };
    // `generator_ema` holds the fixture's weights, `generator` others: the EMA weights load,
    // whichever key comes first in the file
    let ema = load_err(&[("generator", &other), ("generator_ema", &weights)]);
    let ema_first = load_err(&[("generator_ema", &weights), ("generator", &other)]);
    // without an EMA copy, `generator` loads
    let plain = load_err(&[("generator", &weights)]);
    // the other weights are far from the fixture: loading the wrong copy would show
    let wrong = load_err(&[("generator", &weights), ("generator_ema", &other)]);
    std::fs::remove_file(&out).unwrap();
    for (what, err) in [("generator_ema", ema), ("generator_ema first", ema_first), ("generator only", plain)] {
        assert!(err <= 2e-2, "bf16 .pt, {what}: relative error {err}");
    }
    assert!(wrong > 0.1, "the other weights give a different model ({wrong})");
}
