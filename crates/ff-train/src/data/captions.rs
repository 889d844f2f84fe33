//! The captions file of `encode-videos`: JSON Lines, one `{"video": "name.mp4", "caption": "..."}`
//! per line (blank lines are skipped), `video` relative to the videos directory.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Result, TrainError};

/// One line of a captions file, its video found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptionedVideo {
    /// 1-based line number in the captions file.
    pub line: usize,
    /// The video as written in the file (relative to the videos directory).
    pub video: String,
    /// The video's path.
    pub path: PathBuf,
    /// The caption (non-empty).
    pub caption: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    video: String,
    caption: String,
}

/// Reads `captions` and finds each video under `videos`. A line that is not a caption object,
/// an empty caption, a repeated (video, caption) pair, or a video that does not exist is an
/// error naming the line.
pub fn read_captions(captions: &Path, videos: &Path) -> Result<Vec<CaptionedVideo>> {
    let text = fs::read_to_string(captions).map_err(|source| TrainError::Io { path: captions.into(), source })?;
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = i + 1;
        let bad = |message: String| TrainError::Captions { captions: captions.into(), line, message };
        let Line { video, caption } =
            serde_json::from_str(raw).map_err(|e| bad(format!("{e} (expected {{\"video\": \"name.mp4\", \"caption\": \"...\"}})")))?;
        if caption.trim().is_empty() {
            return Err(bad(format!("the caption of {video} is empty")));
        }
        if let Some(first) = seen.insert((video.clone(), caption.clone()), line) {
            return Err(bad(format!("{video} with this caption is already on line {first}")));
        }
        let path = videos.join(&video);
        if !path.is_file() {
            return Err(TrainError::CaptionWithoutVideo { captions: captions.into(), line, video: path });
        }
        out.push(CaptionedVideo { line, video, path, caption });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::test_dir::TestDir;

    #[test]
    fn captions_find_their_videos_and_bad_lines_are_named() {
        let dir = TestDir::new("captions");
        let videos = dir.path().join("videos");
        fs::create_dir_all(videos.join("sub")).unwrap();
        fs::write(videos.join("a.mp4"), b"x").unwrap();
        fs::write(videos.join("sub/b.mp4"), b"x").unwrap();
        let file = dir.path().join("captions.jsonl");
        let write = |text: &str| fs::write(&file, text).unwrap();

        write("{\"video\": \"a.mp4\", \"caption\": \"a fox\"}\n\n{\"video\": \"sub/b.mp4\", \"caption\": \"a cat\"}\n");
        let read = read_captions(&file, &videos).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!((read[1].line, read[1].video.as_str(), read[1].caption.as_str()), (3, "sub/b.mp4", "a cat"));
        assert_eq!(read[1].path, videos.join("sub/b.mp4"));

        write("{\"video\": \"a.mp4\", \"caption\": \"a fox\"}\n{\"video\": \"c.mp4\", \"caption\": \"a dog\"}\n");
        let err = read_captions(&file, &videos).unwrap_err();
        assert!(matches!(&err, TrainError::CaptionWithoutVideo { line: 2, video, .. } if video == &videos.join("c.mp4")), "{err}");
        assert!(err.to_string().contains("captions.jsonl:2: caption without a video"), "{err}");

        for (text, needle) in [
            ("{\"video\": \"a.mp4\"}", ":1: missing field `caption`"),
            ("{\"video\": \"a.mp4\", \"caption\": \"x\", \"fps\": 3}", ":1: unknown field `fps`"),
            ("{\"video\": \"a.mp4\", \"caption\": \" \"}", ":1: the caption of a.mp4 is empty"),
            ("video: a.mp4", ":1: expected value"),
            (
                "{\"video\": \"a.mp4\", \"caption\": \"x\"}\n{\"video\": \"a.mp4\", \"caption\": \"x\"}",
                ":2: a.mp4 with this caption is already on line 1",
            ),
        ] {
            write(text);
            let err = read_captions(&file, &videos).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
