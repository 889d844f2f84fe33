//! A bounded load test on 127.0.0.1: 8 clients at once, each asking for a fixed number of short
//! videos from one server with one worker and a small queue. Every request is either served
//! completely (every frame, then the MP4) or refused cleanly with 503; nothing fails; the peak
//! memory of the process (server and clients) is printed (docs/BENCHMARKS.md records it).

mod common;

use std::time::Instant;

use common::*;
use ff_serve::ServeConfig;

const CLIENTS: usize = 8;
const REQUESTS_EACH: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_are_each_served_completely_or_refused_cleanly() {
    let (addr, app) = start(ServeConfig { workers: 1, queue: 3, ..Default::default() });
    let start = Instant::now();
    let clients = (0..CLIENTS).map(|c| {
        tokio::spawn(async move {
            let (mut served, mut refused) = (0, 0);
            for r in 0..REQUESTS_EACH {
                let url = generate_url(addr, "a red circle bounces", 2.0, (c * REQUESTS_EACH + r) as u64);
                match open(&url).await {
                    Ok(mut socket) => {
                        let got = receive(&mut socket, |_| false).await;
                        let (frames, _) = got.planned();
                        assert_eq!(got.done(), Some((frames, None)), "client {c} request {r} served completely");
                        assert_eq!(got.frames.len(), frames);
                        assert!(got.video.is_some_and(|v| &v[4..8] == b"ftyp"), "with its MP4");
                        served += 1;
                    }
                    Err((status, body)) => {
                        assert_eq!(status, 503, "client {c} request {r}: refused only for a full queue: {body}");
                        refused += 1;
                    }
                }
            }
            (served, refused)
        })
    });
    let (mut served, mut refused) = (0, 0);
    for client in clients.collect::<Vec<_>>() {
        let (s, r) = client.await.expect("no client panicked");
        (served, refused) = (served + s, refused + r);
    }
    let status = app.status();
    assert_eq!(served + refused, CLIENTS * REQUESTS_EACH);
    assert!(served >= 4, "the worker and the queue's 3 places were served: {served}");
    assert_eq!((status.finished, status.stopped, status.failed), (served, 0, 0), "{status:?}");
    assert_eq!((status.running, status.waiting), (0, 0));
    let peak = peak_rss_mib().map_or("unknown".into(), |m| format!("{m:.0} MiB"));
    println!(
        "load: {CLIENTS} clients x {REQUESTS_EACH} requests of 2 s: {served} served, {refused} refused (503) in {:.1} s; \
         peak RSS (VmHWM, server and clients) {peak}",
        start.elapsed().as_secs_f64()
    );
}
