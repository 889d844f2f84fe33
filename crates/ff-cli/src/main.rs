mod progress;
mod video;

fn main() {}
