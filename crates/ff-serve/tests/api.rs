//! The API on 127.0.0.1: frames in order, a disconnect that frees the worker, refusals (400 for
//! an unknown prompt word, 503 when the queue is full). Short videos of the default model.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ff_serve::ServeConfig;
use ff_serve::protocol::Event;
use flashforward::Request;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_arrive_in_order_and_equal_the_library_s_video() {
    let (addr, app) = start(ServeConfig::default());
    let mut socket = open(&generate_url(addr, "a red circle bounces", 2.0, 3)).await.expect("accepted");
    let got = receive(&mut socket, |_| false).await;
    let (frames, latents) = got.planned();
    assert_eq!(frames, 1 + 4 * (latents - 1));
    assert_eq!(got.done(), Some((frames, None)), "ran to the end");
    assert_eq!(got.frames.len(), frames);
    // chunk events tile the video in order, each followed by its frames
    let chunks: Vec<(usize, usize, usize)> = got
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Chunk { index, first_frame, frames, .. } => Some((*index, *first_frame, *frames)),
            _ => None,
        })
        .collect();
    let mut next = 0;
    for (i, &(index, first, count)) in chunks.iter().enumerate() {
        assert_eq!((index, first), (i, next), "chunk {i} starts where the last ended");
        next += count;
    }
    assert_eq!(next, frames);
    // the forwards of the wavefront each start before they end
    let forwards = got.events.iter().filter(|e| matches!(e, Event::Forward { .. })).count();
    assert!(forwards > 0 && forwards % 2 == 0, "{forwards} forward events");
    // the same request in the library: the same frames, in the same order
    let pipe = pipeline();
    let video = tokio::task::spawn_blocking(move || pipe.generate(&Request::new("a red circle bounces").seconds(2.0).seed(3)))
        .await
        .unwrap()
        .unwrap();
    assert!(video.frames() == got.frames.as_slice(), "the streamed frames are the library's, in order");
    let red = got.frames.iter().filter(|f| red_pixels(f) > 0).count();
    assert!(2 * red > frames, "the red circle is shown: red in {red} of {frames} frames");
    let mp4 = got.video.expect("the MP4 follows");
    assert_eq!(&mp4[4..8], b"ftyp", "an MP4 file");
    assert_eq!(app.status().finished, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_changes_the_prompt_from_a_later_chunk_and_an_unknown_word_changes_nothing() {
    let (addr, app) = start(ServeConfig::default());
    let mut socket = open(&generate_url(addr, "a red circle bounces", 8.0, 0)).await.expect("accepted");
    let first = receive(&mut socket, |r| r.events.iter().any(|e| matches!(e, Event::Chunk { .. }))).await;
    command(&mut socket, serde_json::json!({ "type": "switch", "prompt": "a red banana bounces" })).await;
    command(&mut socket, serde_json::json!({ "type": "switch", "prompt": "a blue square moves left" })).await;
    let rest = receive(&mut socket, |_| false).await;
    let refused = rest.events.iter().find_map(|e| match e {
        Event::Error { message } => Some(message.clone()),
        _ => None,
    });
    let library = pipeline().check_prompt("a red banana bounces").unwrap_err().to_string();
    assert_eq!(refused.as_deref(), Some(library.as_str()), "the unknown word is refused as generate refuses it");
    let blue = pipeline().check_prompt("a blue square moves left").unwrap();
    assert!(rest.events.contains(&Event::Switching { prompt: blue.clone() }), "{:?}", rest.events);
    let prompts = [chunk_prompts(&first.events), chunk_prompts(&rest.events)].concat();
    let red = pipeline().check_prompt("a red circle bounces").unwrap();
    let switched = prompts.iter().position(|p| *p == blue).expect("a chunk under the new prompt");
    assert!(switched > 0 && prompts[..switched].iter().all(|p| *p == red), "{prompts:?}");
    assert!(prompts[switched..].iter().all(|p| *p == blue), "{prompts:?}");
    let (frames, _) = first.planned();
    assert_eq!(rest.done(), Some((frames, None)));
    let last = rest.frames.last().expect("frames after the switch");
    assert!(blue_pixels(last) > 0 && red_pixels(last) == 0, "the last frame shows the blue square, not the red circle");
    assert_eq!(app.status().finished, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_goes_away_frees_the_worker_within_a_chunk() {
    let (addr, app) = start(ServeConfig { workers: 1, queue: 1, ..Default::default() });
    let mut socket = open(&generate_url(addr, "a blue square moves left", 20.0, 0)).await.expect("accepted");
    let got = receive(&mut socket, |r| r.events.iter().any(|e| matches!(e, Event::Chunk { .. }))).await;
    assert!(got.done().is_none());
    drop(socket);
    let gone = Instant::now();
    while app.status().running > 0 {
        assert!(gone.elapsed() < Duration::from_secs(5), "the generation still runs 5 s after its page went away");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = app.status();
    assert_eq!((status.stopped, status.finished), (1, 0), "stopped, not finished: {status:?}");
    // the worker is free: the next page starts at once and gets its whole video
    let mut next = open(&generate_url(addr, "a red circle bounces", 2.0, 0)).await.expect("accepted");
    let got = receive(&mut next, |_| false).await;
    assert!(!got.events.iter().any(|e| matches!(e, Event::Queued { .. })), "not queued: {:?}", got.events.first());
    assert_eq!(got.done(), Some((got.planned().0, None)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_with_503_and_the_queued_run_after() {
    let (addr, app) = start(ServeConfig { workers: 1, queue: 1, ..Default::default() });
    let url = generate_url(addr, "a green triangle bounces", 2.0, 0);
    let mut first = open(&url).await.expect("runs");
    let started = receive(&mut first, |r| r.events.iter().any(|e| matches!(e, Event::Start { .. }))).await;
    assert!(!started.events.iter().any(|e| matches!(e, Event::Queued { position: 2.. })));
    let mut second = open(&url).await.expect("queued");
    let queued = receive(&mut second, |r| !r.events.is_empty()).await;
    assert_eq!(queued.events, [Event::Queued { position: 1 }]);
    let (status, body) = refused(&url).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("busy"), "{body}");
    let (first, second) = tokio::join!(receive(&mut first, |_| false), receive(&mut second, |_| false));
    for got in [first, second] {
        assert_eq!(got.done(), Some((got.frames.len(), None)), "served completely");
    }
    assert_eq!(app.status().finished, 2);
    assert!(open(&url).await.is_ok(), "places are free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_prompt_word_is_refused_with_generate_s_error() {
    let (addr, app) = start(ServeConfig::default());
    let (status, body) = refused(&generate_url(addr, "a red banana bounces", 2.0, 0)).await;
    assert_eq!(status, 400);
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    let message = error["error"].as_str().unwrap();
    let library = pipeline().plan(&Request::new("a red banana bounces").seconds(2.0)).unwrap_err().to_string();
    assert_eq!(message, library, "the same error as generate");
    assert!(message.contains("banana"), "{message}");
    let (status, body) = refused(&generate_url(addr, "a red circle bounces", 1e6, 0)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(app.status().running + app.status().waiting, 0, "refusals take no place");
}
