use super::*;
use crate::contract::{Contract, ContractConfig};
use crate::exec::Placement;
use crate::schedule::ScheduleKind;
use crate::sim::replay;

fn setup() -> (Graph, Trace) {
    let g = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(21)).unwrap()).unwrap();
    let t = replay(&g, &Placement::streaming(4), |_| 0.5);
    (g, t)
}

#[test]
fn chrome_trace_has_one_complete_event_per_forward() {
    let (g, t) = setup();
    let json = t.chrome_json(&g);
    let events = json["traceEvents"].as_array().unwrap();
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), g.nodes.len());
    let names: Vec<&str> = events.iter().filter(|e| e["ph"] == "M").map(|e| e["args"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["stage 0", "stage 1", "stage 2", "stage 3", "planner"]);
    let first = &events[0];
    assert_eq!(first["ph"], "X");
    assert_eq!(first["name"], "P(0,0)");
    assert_eq!(first["tid"], 4); // the dedicated planner worker
    assert_eq!(first["dur"], 500_000.0);
    let renders = events.iter().filter(|e| e["cat"] == "render").count();
    assert_eq!(renders, 7 * 4);
}

#[test]
fn write_produces_json_and_svg_files_in_a_new_folder() {
    let (g, t) = setup();
    let dir = std::env::temp_dir().join(format!("ff-trace-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let svg = t.write(&g, "streaming", &dir.join("ff.json")).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("ff.json")).unwrap()).unwrap();
    assert_eq!(json["traceEvents"].as_array().unwrap().len(), g.nodes.len() + 5);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("</title></rect>").count(), g.nodes.len(), "one bar per forward");
    assert_eq!(svg.matches(">stage ").count(), 4);
    assert_eq!(svg.matches(">planner<").count(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn svg_has_title_axis_legend_and_labels_inside_their_bars() {
    let (g, t) = setup();
    let svg = svg::render(&t, &g, "streaming");
    assert!(svg.contains("flashforward on the streaming executor"), "title names schedule and executor");
    // makespan 0.5 s × 19 forwards on the planner's row and more: ticks at 1-2-5 steps from 0
    let ticks: Vec<f64> = svg
        .split(r#"<g class="tick">"#)
        .skip(1)
        .map(|g| g.split("</text>").next().unwrap().rsplit('>').next().unwrap().parse().unwrap())
        .collect();
    assert!((4..=11).contains(&ticks.len()), "{ticks:?}");
    assert_eq!(ticks[0], 0.0);
    let step = ticks[1] - ticks[0];
    assert!(ticks.windows(2).all(|w| ((w[1] - w[0]) - step).abs() < 1e-9) && *ticks.last().unwrap() <= t.makespan() + 1e-9);
    assert!(svg.contains("time (s)"));
    for kind in ["planner-denoise", "planner-cache", "render"] {
        assert!(svg.contains(&format!(">{kind}</text></g>")), "legend lists {kind}");
    }
    assert!(!svg.contains(">re-encode<") && !svg.contains(">bidirectional<"), "only kinds that occur");
    // every in-bar label fits its bar: its bar is the rect just before it
    let mut labelled = 0;
    for part in svg.split("<rect ").skip(1) {
        let width: f64 = part.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        if let Some(text) = part.split(r#"<text class="label""#).nth(1) {
            let label = text.split('>').nth(1).unwrap().split('<').next().unwrap();
            assert!(svg::text_width(label) + 4.0 <= width, "{label} in a bar of {width} px");
            labelled += 1;
        }
    }
    assert!(labelled > 0, "wide bars are labelled");
}

#[test]
fn ticks_are_one_two_five_steps() {
    for (span, step) in [(4.5, 0.5), (1.0, 0.1), (0.0031, 0.0005), (120.0, 20.0), (7.0, 1.0)] {
        assert!((svg::tick_step(span) - step).abs() < step * 1e-9, "{span}: {}", svg::tick_step(span));
    }
}

#[test]
fn ttff_is_the_end_of_the_first_chunk() {
    let (g, t) = setup();
    // planner block (5 forwards) then chunk 0 through 4 stages
    assert_eq!(t.ttff(&g), 0.5 * 9.0);
    assert_eq!(t.busy().len(), 5);
}

#[test]
fn busy_time_counts_overlapping_spans_once() {
    // a batched forward of nodes 0 and 1 (one interval), then node 2 overlapping its end
    let span = |node, worker, start, end| Span { node, worker, start, end };
    let t = Trace {
        workers: 2,
        spans: vec![span(0, 0, 1.0, 3.0), span(1, 0, 1.0, 3.0), span(2, 0, 2.5, 4.0), span(3, 1, 0.0, 0.5), span(4, 1, 1.0, 1.5)],
        names: vec!["a".into(), "b".into()],
    };
    assert_eq!(t.busy(), vec![3.0, 1.0]);
}
