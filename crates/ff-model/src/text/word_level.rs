//! A word-level `tokenizer.json` over a closed word list (the small world's captions), built with
//! the `tokenizers` crate and read back by [`PromptTokenizer`](super::PromptTokenizer) like
//! umT5's own: lower-casing, whitespace/punctuation splitting, one id per word, umT5's special
//! tokens at umT5's ids (`<pad>` 0, `</s>` 1, `<unk>` 2) and `</s>` appended to every prompt.
//! Words outside the list map to `<unk>`.

use crate::error::{ModelError, Result};
use tokenizers::models::wordlevel::WordLevel;
use tokenizers::normalizers::Lowercase;
use tokenizers::pre_tokenizers::whitespace::Whitespace;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, PaddingParams, Tokenizer};

/// umT5's special tokens, in id order.
pub const SPECIAL_TOKENS: [&str; 3] = ["<pad>", "</s>", "<unk>"];

/// The `tokenizer.json` text of a word-level tokenizer over `words` (ids from 3 on, in order;
/// case and duplicates are folded). `max_vocab` bounds the vocabulary (the encoder's embedding
/// rows): a longer list is an error naming both sizes.
pub fn word_level_tokenizer(words: &[&str], max_vocab: usize) -> Result<String> {
    let err = |e: tokenizers::Error| ModelError::Tokenizer(format!("cannot build the word-level tokenizer: {e}"));
    let mut vocab: Vec<String> = SPECIAL_TOKENS.iter().map(|s| s.to_string()).collect();
    for word in words.iter().map(|w| w.to_lowercase()) {
        if word.is_empty() || word.contains(char::is_whitespace) {
            return Err(ModelError::Tokenizer(format!("word {word:?} is empty or holds whitespace")));
        }
        if !vocab.contains(&word) {
            vocab.push(word);
        }
    }
    if vocab.len() > max_vocab {
        return Err(ModelError::Tokenizer(format!("{} tokens do not fit a vocabulary of {max_vocab}", vocab.len())));
    }
    let ids = vocab.iter().enumerate().map(|(i, w)| (w.clone(), i as u32)).collect();
    let model = WordLevel::builder().vocab(ids).unk_token(SPECIAL_TOKENS[2].into()).build().map_err(err)?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(Lowercase));
    tokenizer.with_pre_tokenizer(Some(Whitespace {}));
    let eos = SPECIAL_TOKENS[1];
    let template = TemplateProcessing::builder()
        .try_single(format!("$A {eos}"))
        .and_then(|b| b.try_pair(format!("$A {eos} $B {eos}")))
        .map_err(|e| ModelError::Tokenizer(format!("cannot build the word-level tokenizer's template: {e}")))?
        .special_tokens(vec![(eos, 1)])
        .build()
        .map_err(|e| ModelError::Tokenizer(format!("cannot build the word-level tokenizer's template: {e}")))?;
    tokenizer.with_post_processor(Some(template));
    tokenizer.add_special_tokens(&SPECIAL_TOKENS.map(|t| AddedToken::from(t, true)));
    tokenizer.with_padding(Some(PaddingParams { pad_id: 0, pad_token: SPECIAL_TOKENS[0].into(), ..Default::default() }));
    tokenizer.to_string(true).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::PromptTokenizer;

    fn tokenizer(words: &[&str]) -> PromptTokenizer {
        let dir = std::env::temp_dir().join(format!("ff-word-level-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.json", words.join("_")));
        std::fs::write(&path, word_level_tokenizer(words, 64).unwrap()).unwrap();
        PromptTokenizer::from_file(&path).unwrap().with_max_len(8).unwrap()
    }

    #[test]
    fn words_get_their_ids_eos_is_appended_and_the_rest_is_unk() {
        let t = tokenizer(&["a", "red", "circle", "bounces"]);
        let tokens = t.encode("A red  Circle bounces.").unwrap();
        // a=3 red=4 circle=5 bounces=6, '.' is unknown (2), then </s> (1), padding (0)
        assert_eq!(tokens.ids, vec![3, 4, 5, 6, 2, 1, 0, 0]);
        assert_eq!(tokens.mask, vec![1, 1, 1, 1, 1, 1, 0, 0]);
        assert_eq!(t.encode("").unwrap().ids[..2], [1, 0], "the empty prompt is </s> alone");
    }

    #[test]
    fn oversized_and_malformed_lists_are_refused() {
        let words: Vec<String> = (0..70).map(|i| format!("w{i}")).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let err = word_level_tokenizer(&words, 64).unwrap_err().to_string();
        assert!(err.contains("73 tokens") && err.contains("64"), "{err}");
        assert!(word_level_tokenizer(&["dark blue"], 64).unwrap_err().to_string().contains("dark blue"));
    }
}
