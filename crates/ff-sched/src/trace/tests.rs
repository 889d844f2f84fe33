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
fn write_produces_json_and_svg_files() {
    let (g, t) = setup();
    let dir = std::env::temp_dir().join(format!("ff-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = t.write(&g, &dir.join("ff.json")).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("ff.json")).unwrap()).unwrap();
    assert_eq!(json["traceEvents"].as_array().unwrap().len(), g.nodes.len() + 5);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<rect").count(), g.nodes.len());
    assert_eq!(svg.matches(">stage ").count(), 4);
    assert_eq!(svg.matches(">planner<").count(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn ttff_is_the_end_of_the_first_chunk() {
    let (g, t) = setup();
    // planner block (5 forwards) then chunk 0 through 4 stages
    assert_eq!(t.ttff(&g), 0.5 * 9.0);
    assert_eq!(t.busy().len(), 5);
}
