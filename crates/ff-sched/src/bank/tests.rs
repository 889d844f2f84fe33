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
