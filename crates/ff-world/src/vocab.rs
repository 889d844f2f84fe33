//! The domain's vocabulary: what a caption may say and how it is drawn.
//!
//! Captions read "a red circle bounces on a dark blue background" (one object) or "a red circle
//! bounces and a green square moves left on a black gradient background" (two). [`Prompt::parse`]
//! accepts those and natural variants ("a red ball", "slides to the left", "grey", "navy").

use crate::{Result, WorldError};
use serde::Serialize;

/// An object's shape (drawn at half-size r, see [`crate::scene::RADIUS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A disc of radius r.
    Circle,
    /// An axis-aligned square of side 1.8·r.
    Square,
    /// An upright isosceles triangle: apex r above the centre, base 2r wide r below it.
    Triangle,
}

/// An object's colour; its sRGB value is [`Colour::rgb`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Colour {
    /// "red".
    Red,
    /// "green".
    Green,
    /// "blue".
    Blue,
    /// "yellow".
    Yellow,
    /// "orange".
    Orange,
    /// "purple" (also "violet").
    Purple,
    /// "white".
    White,
}

/// The background colour, plain or as a vertical gradient ([`Background::gradient_delta`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Background {
    /// "black" (the default when a caption names no background).
    Black,
    /// "white".
    White,
    /// "gray" (also "grey").
    Gray,
    /// "dark blue" (also "navy", "navy blue").
    DarkBlue,
}

/// How an object moves ([`crate::scene`]): straight towards one wall, or bouncing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Motion {
    /// "moves left": towards the left wall, then rests against it.
    Left,
    /// "moves right".
    Right,
    /// "moves up".
    Up,
    /// "moves down".
    Down,
    /// "bounces": diagonally, reflecting off every wall.
    Bounces,
}

/// Every shape, in sampling order.
pub const SHAPES: [Shape; 3] = [Shape::Circle, Shape::Square, Shape::Triangle];
/// Every colour, in sampling order.
pub const COLOURS: [Colour; 7] = [Colour::Red, Colour::Green, Colour::Blue, Colour::Yellow, Colour::Orange, Colour::Purple, Colour::White];
/// Every background, in sampling order.
pub const BACKGROUNDS: [Background; 4] = [Background::Black, Background::White, Background::Gray, Background::DarkBlue];
/// Every motion, in sampling order.
pub const MOTIONS: [Motion; 5] = [Motion::Left, Motion::Right, Motion::Up, Motion::Down, Motion::Bounces];

impl Shape {
    /// The caption word: "circle", "square" or "triangle".
    pub fn name(self) -> &'static str {
        match self {
            Self::Circle => "circle",
            Self::Square => "square",
            Self::Triangle => "triangle",
        }
    }
}

impl Colour {
    /// The caption word, e.g. "red".
    pub fn name(self) -> &'static str {
        match self {
            Self::Red => "red",
            Self::Green => "green",
            Self::Blue => "blue",
            Self::Yellow => "yellow",
            Self::Orange => "orange",
            Self::Purple => "purple",
            Self::White => "white",
        }
    }

    /// "a" or "an" before the colour's name.
    pub fn article(self) -> &'static str {
        if self == Self::Orange { "an" } else { "a" }
    }

    /// The drawing colour (sRGB bytes).
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Self::Red => [225, 35, 35],
            Self::Green => [40, 200, 60],
            Self::Blue => [45, 95, 240],
            Self::Yellow => [245, 225, 30],
            Self::Orange => [250, 135, 20],
            Self::Purple => [155, 50, 210],
            Self::White => [245, 245, 245],
        }
    }
}

impl Background {
    /// The caption words, e.g. "gray" or "dark blue".
    pub fn name(self) -> &'static str {
        match self {
            Self::Black => "black",
            Self::White => "white",
            Self::Gray => "gray",
            Self::DarkBlue => "dark blue",
        }
    }

    /// The background colour (sRGB bytes); a gradient background's top row.
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Self::Black => [12, 12, 12],
            Self::White => [235, 235, 235],
            Self::Gray => [120, 120, 120],
            Self::DarkBlue => [18, 28, 85],
        }
    }

    /// Change of every channel from the top to the bottom row of a gradient background:
    /// brighter for dark backgrounds, darker for light ones.
    pub fn gradient_delta(self) -> f64 {
        let [r, g, b] = self.rgb().map(f64::from);
        if (r + g + b) / 3.0 < 128.0 { 45.0 } else { -45.0 }
    }

    /// Whether an object of `colour` stays distinguishable on this background (plain or
    /// gradient) after H.264: 4:2:0 keeps chroma at half resolution, so an object must differ
    /// from every row of the background by at least [`MIN_LUMA_CONTRAST`] in luma, which keeps
    /// its outline sharp.
    pub fn admits(self, colour: Colour, gradient: bool) -> bool {
        let object = luma(colour.rgb().map(f64::from));
        let top = luma(self.rgb().map(f64::from));
        let bottom = if gradient { top + self.gradient_delta() } else { top };
        let (lo, hi) = (top.min(bottom), top.max(bottom));
        object <= lo - MIN_LUMA_CONTRAST || object >= hi + MIN_LUMA_CONTRAST
    }
}

/// Smallest luma difference (0–255) between an object and its background (see
/// [`Background::admits`]).
pub const MIN_LUMA_CONTRAST: f64 = 40.0;

/// BT.601 luma of an RGB colour.
pub fn luma([r, g, b]: [f64; 3]) -> f64 {
    0.299 * r + 0.587 * g + 0.114 * b
}

impl Motion {
    /// The caption's verb phrase, e.g. "moves left" or "bounces".
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Left => "moves left",
            Self::Right => "moves right",
            Self::Up => "moves up",
            Self::Down => "moves down",
            Self::Bounces => "bounces",
        }
    }
}

/// One object a caption names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ObjectPrompt {
    /// The object's colour.
    pub colour: Colour,
    /// The object's shape.
    pub shape: Shape,
    /// How it moves.
    pub motion: Motion,
}

/// What a caption says: one or two objects on a background.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Prompt {
    /// The objects in caption order (one or two).
    pub objects: Vec<ObjectPrompt>,
    /// The background ([`Background::Black`] when the caption names none).
    pub background: Background,
    /// Whether the background is a vertical gradient ("... gradient background").
    pub gradient: bool,
}

/// The vocabulary in one line, for error messages.
pub fn vocabulary() -> String {
    let list = |v: Vec<&str>| v.join(", ");
    format!(
        "shapes: {}; colours: {}; backgrounds: {}; motions: {}",
        list(SHAPES.iter().map(|s| s.name()).collect()),
        list(COLOURS.iter().map(|c| c.name()).collect()),
        list(BACKGROUNDS.iter().map(|b| b.name()).collect()),
        list(MOTIONS.iter().map(|m| m.phrase()).collect()),
    )
}

/// Natural variants and the canonical word each maps onto.
const VARIANTS: [(&str, &str); 28] = [
    ("ball", "circle"),
    ("disc", "circle"),
    ("disk", "circle"),
    ("dot", "circle"),
    ("box", "square"),
    ("block", "square"),
    ("cube", "square"),
    ("rectangle", "square"),
    ("grey", "gray"),
    ("navy", "darkblue"),
    ("violet", "purple"),
    ("moving", "moves"),
    ("slides", "moves"),
    ("sliding", "moves"),
    ("goes", "moves"),
    ("going", "moves"),
    ("travels", "moves"),
    ("drifts", "moves"),
    ("moved", "moves"),
    ("move", "moves"),
    ("bouncing", "bounces"),
    ("bounce", "bounces"),
    ("bounced", "bounces"),
    ("bounds", "bounces"),
    ("leftward", "left"),
    ("leftwards", "left"),
    ("rightward", "right"),
    ("rightwards", "right"),
];

/// Directional variants (kept apart from [`VARIANTS`] to keep each table short).
const DIRECTION_VARIANTS: [(&str, &str); 4] = [("upward", "up"), ("upwards", "up"), ("downward", "down"), ("downwards", "down")];

/// Words a caption may hold that carry nothing.
const FILLERS: [&str; 11] = ["a", "an", "the", "to", "of", "around", "across", "frame", "screen", "is", "with"];

/// Words that structure a caption: object separator, background marker and its qualifiers.
const STRUCTURE: [&str; 5] = ["and", "on", "background", "gradient", "blue"];

/// Every word the caption parser reads, canonical names and variants, each once (`dark blue` and
/// `navy blue` as their two words): the vocabulary a tokenizer of the domain must cover.
pub fn caption_words() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let canonical = SHAPES.iter().map(|s| s.name()).chain(COLOURS.iter().map(|c| c.name()));
    let backgrounds = BACKGROUNDS.iter().flat_map(|b| b.name().split(' '));
    let motions = MOTIONS.iter().flat_map(|m| m.phrase().split(' '));
    let variants = VARIANTS.iter().chain(&DIRECTION_VARIANTS).map(|(v, _)| *v);
    for w in canonical.chain(backgrounds).chain(motions).chain(variants).chain(FILLERS).chain(STRUCTURE).chain(["dark", "navy"]) {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The words of `text` outside [`caption_words`], lower case, each once, in order.
pub fn unknown_words(text: &str) -> Vec<String> {
    let known = caption_words();
    let mut out: Vec<String> = Vec::new();
    for w in lowered(text).split_whitespace() {
        if !known.contains(&w) && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// `text` in lower case with punctuation turned into spaces.
fn lowered(text: &str) -> String {
    text.to_lowercase().replace(['.', ',', '!', ';'], " ")
}

/// Canonical words of a caption: lower case, synonyms mapped, fillers dropped.
fn words(text: &str) -> Vec<String> {
    let lower = lowered(text);
    let lower = lower.replace("dark blue", "darkblue").replace("navy blue", "darkblue");
    lower
        .split_whitespace()
        .filter(|w| !FILLERS.contains(w))
        .map(|w| VARIANTS.iter().chain(&DIRECTION_VARIANTS).find(|(v, _)| *v == w).map_or(w, |(_, c)| *c).to_string())
        .collect()
}

fn colour_of(w: &str) -> Option<Colour> {
    COLOURS.iter().copied().find(|c| c.name() == w)
}

fn shape_of(w: &str) -> Option<Shape> {
    SHAPES.iter().copied().find(|s| s.name() == w)
}

fn background_of(w: &str) -> Option<Background> {
    BACKGROUNDS.iter().copied().find(|b| b.name().replace(' ', "") == w)
}

fn direction_of(w: &str) -> Option<Motion> {
    match w {
        "left" => Some(Motion::Left),
        "right" => Some(Motion::Right),
        "up" => Some(Motion::Up),
        "down" => Some(Motion::Down),
        _ => None,
    }
}

impl Prompt {
    /// Parses a caption of the domain; anything outside the vocabulary is an error that lists it
    /// (every unknown word first, then what is missing or misplaced).
    ///
    /// ```
    /// use ff_world::{Background, Colour, Motion, Prompt, Shape};
    ///
    /// let p = Prompt::parse("a red circle bounces").unwrap();
    /// let o = p.objects[0];
    /// assert_eq!((o.colour, o.shape, o.motion), (Colour::Red, Shape::Circle, Motion::Bounces));
    /// assert_eq!((p.background, p.gradient), (Background::Black, false));
    /// assert_eq!(p.caption(), "a red circle bounces on a black background");
    ///
    /// // Natural variants map onto the canonical words.
    /// let v = Prompt::parse("A red ball slides to the left on a grey gradient background.").unwrap();
    /// assert_eq!((v.objects[0].shape, v.objects[0].motion), (Shape::Circle, Motion::Left));
    /// assert!(v.gradient && v.background == Background::Gray);
    ///
    /// // A word outside the vocabulary is named in the error.
    /// let e = Prompt::parse("a red shiny circle bounces").unwrap_err().to_string();
    /// assert!(e.contains("unknown word 'shiny'"));
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        let fail = |message: String| WorldError::Prompt { prompt: text.to_string(), message, vocabulary: vocabulary() };
        let unknown = unknown_words(text);
        if !unknown.is_empty() {
            let quoted: Vec<String> = unknown.iter().map(|w| format!("'{w}'")).collect();
            let plural = if unknown.len() > 1 { "s" } else { "" };
            return Err(fail(format!("unknown word{plural} {}", quoted.join(", "))));
        }
        let w = words(text);
        let (scene_words, background_words) = match w.iter().position(|x| x == "on") {
            Some(i) => (&w[..i], &w[i + 1..]),
            None => (&w[..], &w[w.len()..]),
        };
        let mut objects = Vec::new();
        for part in scene_words.split(|x| x == "and") {
            let colour = part.iter().find_map(|x| colour_of(x)).ok_or_else(|| fail("no colour".into()))?;
            let shape = part.iter().find_map(|x| shape_of(x)).ok_or_else(|| fail("no shape".into()))?;
            let motion = if part.iter().any(|x| x == "bounces") {
                Motion::Bounces
            } else {
                part.iter().find_map(|x| direction_of(x)).ok_or_else(|| fail("no motion".into()))?
            };
            let known = |x: &String| {
                colour_of(x).is_some() || shape_of(x).is_some() || direction_of(x).is_some() || matches!(x.as_str(), "moves" | "bounces")
            };
            if let Some(unknown) = part.iter().find(|x| !known(x)) {
                return Err(fail(format!("unknown word '{unknown}'")));
            }
            objects.push(ObjectPrompt { colour, shape, motion });
        }
        if objects.len() > 2 {
            return Err(fail("at most two objects".into()));
        }
        let background = background_words.iter().find_map(|x| background_of(x)).unwrap_or(Background::Black);
        let gradient = background_words.iter().any(|x| x == "gradient");
        if let Some(unknown) =
            background_words.iter().find(|x| background_of(x).is_none() && !matches!(x.as_str(), "gradient" | "background"))
        {
            return Err(fail(format!("unknown word '{unknown}'")));
        }
        Ok(Self { objects, background, gradient })
    }

    /// Why the domain never draws this prompt, if it does not: an object whose colour the
    /// background does not admit ([`Background::admits`]) or two objects of one colour. A model of
    /// the domain has seen no such clip.
    pub fn undrawn(&self) -> Option<String> {
        let gradient = if self.gradient { " gradient" } else { "" };
        if let Some(o) = self.objects.iter().find(|o| !self.background.admits(o.colour, self.gradient)) {
            let fits: Vec<&str> = BACKGROUNDS.iter().filter(|b| b.admits(o.colour, self.gradient)).map(|b| b.name()).collect();
            return Some(format!(
                "the small world never draws {} on a {}{gradient} background (too little contrast); {} objects go on: {}",
                o.colour.name(),
                self.background.name(),
                o.colour.name(),
                fits.join(", ")
            ));
        }
        match self.objects.as_slice() {
            [a, b] if a.colour == b.colour => Some(format!("the small world never draws two {} objects", a.colour.name())),
            _ => None,
        }
    }

    /// The canonical caption.
    pub fn caption(&self) -> String {
        let objects: Vec<String> = self
            .objects
            .iter()
            .map(|o| format!("{} {} {} {}", o.colour.article(), o.colour.name(), o.shape.name(), o.motion.phrase()))
            .collect();
        let gradient = if self.gradient { " gradient" } else { "" };
        format!("{} on a {}{gradient} background", objects.join(" and "), self.background.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_the_domain_never_draws_are_named_and_sampled_scenes_are_not() {
        let undrawn = |p: &str| Prompt::parse(p).unwrap().undrawn();
        let blue = undrawn("a blue circle moves right on a gray background").unwrap();
        assert!(blue.contains("blue on a gray background") && blue.ends_with("black, white, dark blue"), "{blue}");
        assert!(undrawn("a red circle bounces and a red square moves up").unwrap().contains("two red objects"));
        assert_eq!(undrawn("a white circle moves right on a gray background"), None);
        let config = crate::scene::SceneConfig { two_objects: 0.5, gradient: 0.25, ..Default::default() };
        for seed in 0..500 {
            let scene = crate::scene::Scene::sample(seed, &config);
            assert_eq!(scene.prompt.undrawn(), None, "{}", scene.prompt.caption());
        }
    }

    #[test]
    fn canonical_captions_round_trip_and_variants_map_onto_them() {
        let p = Prompt::parse("a red circle bounces on a dark blue background").unwrap();
        assert_eq!(p.objects, vec![ObjectPrompt { colour: Colour::Red, shape: Shape::Circle, motion: Motion::Bounces }]);
        assert_eq!(p.background, Background::DarkBlue);
        assert_eq!(Prompt::parse(&p.caption()).unwrap(), p);
        let v = Prompt::parse("A red ball slides to the left on a grey gradient background.").unwrap();
        assert_eq!(v.objects[0].shape, Shape::Circle);
        assert_eq!(v.objects[0].motion, Motion::Left);
        assert!(v.gradient && v.background == Background::Gray);
        let two = Prompt::parse("a yellow triangle moves up and a white square bounces on a black background").unwrap();
        assert_eq!(two.objects.len(), 2);
        assert_eq!(Prompt::parse(&two.caption()).unwrap(), two);
    }

    #[test]
    fn caption_words_cover_every_caption_and_variant() {
        let words = caption_words();
        for w in "a red ball slides to the left on a navy blue gradient background and a grey box bounces upwards".split(' ') {
            assert!(words.contains(&w), "{w}");
        }
        for (variant, canonical) in VARIANTS.iter().chain(&DIRECTION_VARIANTS) {
            assert!(words.contains(variant), "{variant}");
            assert!(words.contains(canonical) || *canonical == "darkblue", "{canonical}");
        }
        assert!(!words.contains(&"darkblue"), "the parser's joined form is not a caption word");
    }

    #[test]
    fn words_outside_the_vocabulary_are_named() {
        let e = Prompt::parse("a red fox running through fresh snow").unwrap_err().to_string();
        assert!(e.contains("shape") && e.contains("circle, square, triangle"), "{e}");
        let e = Prompt::parse("a red circle dances on a black background").unwrap_err().to_string();
        assert!(e.contains("motion"), "{e}");
        let e = Prompt::parse("a red shiny circle bounces").unwrap_err().to_string();
        assert!(e.contains("unknown word 'shiny'"), "{e}");
        let e = Prompt::parse("A purple dragon flies, a purple dragon!").unwrap_err().to_string();
        assert!(e.contains("unknown words 'dragon', 'flies'.") && e.contains("motions: moves left"), "{e}");
        assert_eq!(unknown_words("a red circle bounces on a dark blue gradient background"), Vec::<String>::new());
    }
}
