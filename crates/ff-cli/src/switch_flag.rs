//! The `--switch SECONDS=PROMPT` flag of `generate` and `eval`: a prompt switch at a time.

/// Parses `SECONDS=PROMPT` (e.g. `5=a blue square moves left`).
pub fn parse(flag: &str) -> Result<(f64, String), String> {
    let (seconds, prompt) =
        flag.split_once('=').ok_or_else(|| format!("--switch '{flag}': expected SECONDS=PROMPT, e.g. 5=a blue square moves left"))?;
    let seconds: f64 = seconds.trim().parse().map_err(|_| format!("--switch '{flag}': '{seconds}' is not a number of seconds"))?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("--switch '{flag}': the time must be a positive number of seconds"));
    }
    if prompt.trim().is_empty() {
        return Err(format!("--switch '{flag}': the prompt is empty"));
    }
    Ok((seconds, prompt.trim().to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_switch_flag_is_seconds_then_a_prompt() {
        assert_eq!(super::parse("5=a blue square").unwrap(), (5.0, "a blue square".to_string()));
        assert_eq!(super::parse("2.5 = a=b").unwrap(), (2.5, "a=b".to_string()), "the first '=' splits");
        for (bad, why) in [("a blue square", "SECONDS=PROMPT"), ("x=a", "not a number"), ("-1=a", "positive"), ("5= ", "empty")] {
            let err = super::parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
