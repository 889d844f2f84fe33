//! A minimal writer of torch zip checkpoints (`torch.save` of a dict of state dicts), so tests
//! need no torch: pickle protocol 2 with the opcodes torch.save emits for tensors, bf16 storages
//! (as Self-Forcing's checkpoints hold), in an uncompressed zip (`archive/data.pkl`,
//! `archive/data/<n>`, `archive/version`).

use burn::tensor::TensorData;
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
    /// bf16 storage.
    fn tensor(&mut self, data: &TensorData) {
        let values = data.to_vec::<f32>().expect("f32 tensor data");
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

/// The zip entries (name, bytes) of a checkpoint `{top_key: {key: tensor}}` for each
/// `(top_key, state)` of `tops`, keys as given.
pub fn pt_entries(tops: &[(&str, &BTreeMap<String, TensorData>)]) -> Vec<(String, Vec<u8>)> {
    let mut p = Pickle::default();
    p.out.extend(b"\x80\x02");
    p.dict(|p| {
        for (top, state) in tops {
            p.str(top);
            p.dict(|p| {
                for (k, v) in *state {
                    p.str(k);
                    p.tensor(v);
                }
            });
        }
    });
    p.out.push(b'.');
    let mut entries = vec![("archive/data.pkl".to_string(), p.out)];
    entries.extend(p.storages.into_iter().enumerate().map(|(i, s)| (format!("archive/data/{i}"), s)));
    entries.push(("archive/version".into(), b"3\n".to_vec()));
    entries
}

/// `entries` as an uncompressed zip (what `torch.save` writes).
pub fn zip_bytes(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), opts).expect("zip entry");
        zip.write_all(bytes).expect("zip write");
    }
    zip.finish().expect("zip finish").into_inner()
}

/// Writes `entries` as an uncompressed zip file.
pub fn write_zip(path: &Path, entries: &[(String, Vec<u8>)]) {
    std::fs::write(path, zip_bytes(entries)).expect("write .pt");
}

/// Writes a torch checkpoint (see [`pt_entries`]).
pub fn write_pt(path: &Path, tops: &[(&str, &BTreeMap<String, TensorData>)]) {
    write_zip(path, &pt_entries(tops));
}
