//! The written tokenizer covers the domain (no `<unk>` in any caption, one id per word, ids map
//! back to the words), and the frozen encoder keeps distinct prompts apart.

use super::*;
use crate::backend::{CpuBackend, cpu_device};
use ff_model::text::PromptTokenizer;
use ff_world::{Scene, SceneConfig};

fn written(name: &str) -> WorldDir {
    let dir = WorldDir(std::env::temp_dir().join(format!("ff-world-text-{name}-{}", std::process::id())));
    write(&dir, 0).unwrap();
    dir
}

#[test]
fn every_caption_word_has_its_own_token_and_captions_round_trip() {
    let dir = written("tokens");
    let tokenizer = PromptTokenizer::from_file(dir.tokenizer()).unwrap().with_max_len(32).unwrap();
    let mut by_id = HashMap::new();
    for word in ff_world::vocab::caption_words().into_iter().chain(PUNCTUATION) {
        let t = tokenizer.encode(word).unwrap();
        assert_eq!((t.valid_len(), t.ids[1]), (2, 1), "{word}: one token, then </s>");
        assert!(t.ids[0] > 2, "{word} is a special token");
        assert!(by_id.insert(t.ids[0], word).is_none(), "{word} shares id {}", t.ids[0]);
    }
    let config = SceneConfig { two_objects: 0.5, ..Default::default() };
    for seed in 0..200 {
        let caption = format!("{}.", Scene::sample(seed, &config).caption());
        let t = tokenizer.encode(&caption).unwrap();
        let n = t.valid_len() - 1;
        assert!(!t.ids[..n].contains(&2), "{caption}: unknown token");
        let back: Vec<&str> = t.ids[..n].iter().map(|i| by_id[i]).collect();
        assert_eq!(back.join(" "), caption.replace('.', " ."), "ids map back to the caption");
    }
}

#[test]
fn distinct_prompts_get_well_separated_embeddings() {
    let dir = written("separation");
    let encoder = dir.text(32).unwrap().load::<CpuBackend>(&cpu_device()).unwrap();
    // Captions that differ in one attribute each, and the empty prompt (the CFG baseline).
    let prompts = [
        "a red circle moves left on a black background",
        "a blue circle moves left on a black background",
        "a red square moves left on a black background",
        "a red circle moves right on a black background",
        "a red circle bounces on a black background",
        "a red circle moves left on a white background",
        "",
    ];
    let embeddings: Vec<Vec<f32>> = encoder.encode(&prompts).unwrap().into_iter().map(|e| e.data.to_vec().unwrap()).collect();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    for i in 0..prompts.len() - 1 {
        for j in i + 1..prompts.len() - 1 {
            let (a, b) = (&embeddings[i], &embeddings[j]);
            let distance = norm(&a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<_>>());
            // one word in nine changed: a separation of that word's share of the whole is ~1/3
            assert!(distance > 0.2 * norm(a), "{:?} vs {:?}: distance {distance}, norm {}", prompts[i], prompts[j], norm(a));
        }
    }
    assert_eq!(embeddings[6].len(), 64, "the empty prompt is </s> alone");
}
