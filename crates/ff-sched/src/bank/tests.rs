use super::*;
use crate::error::SchedError;

#[derive(Debug)]
struct Frames(usize);

impl Entry for Frames {
    fn bytes(&self) -> usize {
        self.0 * 10
    }
}

#[test]
fn stage_bank_keeps_the_last_h_chunks() {
    let mut bank = StageBank::new(2, 5);
    for chunk in 0..12 {
        bank.publish(chunk, Frames(3)).unwrap();
        assert!(bank.bytes() <= 5 * 30);
    }
    assert_eq!(bank.bytes(), 150);
    assert_eq!(bank.get(11).unwrap().0, 3);
    assert_eq!(bank.get(7).unwrap().0, 3);
    match bank.get(6) {
        Err(SchedError::Evicted { bank: BankName::History(2), index: 6, holder: 11, capacity: 5 }) => {}
        other => panic!("{other:?}"),
    }
    match bank.get(12) {
        Err(SchedError::NotPublished { bank: BankName::History(2), index: 12 }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn anchor_bank_reports_unpublished_entries() {
    let mut bank = AnchorBank::new(21);
    bank.publish(0, Frames(1)).unwrap();
    let err = bank.get(1).unwrap_err();
    assert_eq!(err.to_string(), "anchor bank: entry 1 read before it was published");
    assert!(AnchorBank::<Frames>::new(0).publish(0, Frames(1)).is_err());
}

#[test]
fn bank_plan_does_not_grow_with_length_off_the_shared_prologue() {
    use crate::contract::{Contract, ContractConfig};
    use crate::exec::Placement;
    use crate::schedule::ScheduleKind;
    let plan = |latents, p| {
        let g = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(latents)).unwrap()).unwrap();
        bank_plan(&g, &p).into_iter().map(|w| (w.anchor_slots, w.frames)).collect::<Vec<_>>()
    };
    let streaming = plan(261, Placement::streaming(4));
    assert_eq!(streaming, plan(1001, Placement::streaming(4)));
    // renderer: window + rest of a block (5 anchors) + 5 chunks × 3; planner: 18 + 3 anchors
    assert_eq!(streaming, vec![(5, 20), (5, 20), (5, 20), (5, 20), (21, 21)]);
    let wavefront = plan(261, Placement::wavefront(4));
    assert_eq!(wavefront[1..], plan(1001, Placement::wavefront(4))[1..]);
    assert_eq!(wavefront[0], (27, 27 + 15)); // the shared prologue keeps the whole plan
    let dims = KvDims { layers: 30, dim: 1536, tokens_per_frame: 30 * 52, dtype_bytes: 2 };
    assert_eq!(dims.frame_bytes(), 2 * 30 * 1536 * 1560 * 2);
}
