//! The offline stub summarizer's text (`compactlab/summarizers/stub.py`, the reference this is
//! tested against): the first and the latest user request, the tools used with their counts, the
//! files their inputs named, the error results and the end of the last assistant text, in at most
//! `max_chars` characters.
//!
//! Python's rules, to the letter: a length is in characters (code points); whitespace is what
//! `str.split()` splits on (Unicode's White_Space and the four separators U+001C..U+001F); tools
//! are ordered by count, then name. A text holding a sized placeholder's mark (U+FDD0), whose
//! length is not its characters', is not made here: `None`, and Python makes it.

use crate::facts::MARK;

/// What the summary is made of: the messages' facts, and the three texts it quotes (each as
/// `text_of(message).strip()` gives it; empty where no message has one).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Facts {
    /// how many messages are summarised
    pub messages: usize,
    pub first_user: String,
    pub latest_user: String,
    pub last_assistant: String,
    /// each tool used and how many times (any order)
    pub tools: Vec<(String, usize)>,
    /// the files the tool inputs named, in the order first named, each once
    pub files: Vec<String>,
    /// the tool results that were errors
    pub errors: usize,
}

/// Python's `str.isspace` (what `str.split()` and `str.strip()` cut on).
pub fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `len(text)`.
fn len(text: &str) -> usize {
    text.chars().count()
}

/// `text[:n]`.
fn head(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// `text[-n:]` (n > 0).
fn tail(text: &str, n: usize) -> &str {
    let count = len(text);
    if count <= n {
        return text;
    }
    let (at, _) = text.char_indices().nth(count - n).unwrap_or((0, ' '));
    &text[at..]
}

/// `" ".join(text.split())`.
fn squeezed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(py_space).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// `stub._clip`: whitespace runs made one space, cut to `n` characters (a long text normalised
/// from a prefix: the first `n` normalised characters of a prefix are those of the whole text).
fn clip(text: &str, n: usize) -> String {
    let short = if len(text) > 4 * n {
        squeezed(head(text, 4 * n))
    } else {
        String::new()
    };
    let text = if len(&short) > n {
        short
    } else {
        squeezed(text)
    };
    if len(&text) <= n {
        text
    } else {
        format!("{}…", head(&text, n - 1))
    }
}

/// `StubSummarizer(max_chars).summarize`'s text of `facts`; None where a text holds a sized
/// placeholder's mark (Python's to make) or `max_chars` is 0.
pub fn text(facts: &Facts, max_chars: usize) -> Option<String> {
    if max_chars == 0
        || [&facts.first_user, &facts.latest_user, &facts.last_assistant]
            .iter()
            .any(|t| t.contains(MARK))
    {
        return None;
    }
    let mut lines = vec![format!(
        "Summary of {} earlier messages (stub summarizer).",
        facts.messages
    )];
    if !facts.first_user.is_empty() {
        lines.push(format!("First request: {}", clip(&facts.first_user, 300)));
    }
    if !facts.latest_user.is_empty() && facts.latest_user != facts.first_user {
        lines.push(format!("Latest request: {}", clip(&facts.latest_user, 300)));
    }
    if !facts.tools.is_empty() {
        let mut tools: Vec<&(String, usize)> = facts.tools.iter().collect();
        tools.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let named: Vec<String> = tools.iter().map(|(n, c)| format!("{n}×{c}")).collect();
        lines.push(format!("Tools used: {}", named.join(", ")));
    }
    if !facts.files.is_empty() {
        let shown: Vec<&str> = facts.files.iter().take(40).map(String::as_str).collect();
        lines.push(format!("Files: {}", shown.join(", ")));
    }
    lines.push(format!("Error results: {}", facts.errors));
    if !facts.last_assistant.is_empty() {
        lines.push(format!(
            "Last assistant text: …{}",
            clip(tail(&facts.last_assistant, 400), 400)
        ));
    }
    let text = lines.join("\n");
    if text.contains(MARK) {
        return None; // (a tool's or a file's name: its length is Python's to count)
    }
    Some(if len(&text) > max_chars {
        format!("{}…", head(&text, max_chars - 1))
    } else {
        text
    })
}

/// `math.ceil(n / 4)`, the stub's tokens of `n` characters.
pub fn tokens(n: usize) -> usize {
    n.div_ceil(4)
}

/// `len(text)`, for the caller's counts.
pub fn chars(text: &str) -> usize {
    len(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            messages: 12,
            first_user: "Fix   the\tbug\u{1c}now".into(),
            latest_user: "and the tests".into(),
            last_assistant: "Done.".into(),
            tools: vec![("read".into(), 2), ("bash".into(), 2), ("edit".into(), 5)],
            files: vec!["a.py".into(), "b.py".into()],
            errors: 1,
        }
    }

    #[test]
    fn the_text_is_the_references() {
        assert_eq!(
            text(&facts(), 2000).unwrap(),
            "Summary of 12 earlier messages (stub summarizer).\n\
             First request: Fix the bug now\n\
             Latest request: and the tests\n\
             Tools used: edit×5, bash×2, read×2\n\
             Files: a.py, b.py\n\
             Error results: 1\n\
             Last assistant text: …Done."
        );
    }

    #[test]
    fn a_text_is_clipped_as_python_clips_it() {
        let long = "word ".repeat(400); // 2,000 characters: normalised from a 1,200-character prefix
        let clipped = clip(&long, 300);
        assert_eq!(len(&clipped), 300);
        assert!(clipped.ends_with('…') && clipped.starts_with("word word"));
        assert_eq!(clip("  a \u{a0} b\u{85}c  ", 300), "a b c");
        assert_eq!(
            clip("é".repeat(301).as_str(), 300),
            format!("{}…", "é".repeat(299))
        );
        assert_eq!(tail("abcdef", 2), "ef");
        assert_eq!(head("ab", 5), "ab");
    }

    #[test]
    fn the_whole_is_cut_to_its_limit_and_a_mark_is_left_to_python() {
        let made = text(&facts(), 10).unwrap();
        assert_eq!(made, "Summary o…");
        let mut marked = facts();
        marked.latest_user = "\u{fdd0}[tool_result len=30]".into();
        assert_eq!(text(&marked, 2000), None);
        assert_eq!(text(&facts(), 0), None);
        assert_eq!(tokens(9), 3);
        assert_eq!(chars("é…"), 2);
    }

    #[test]
    fn the_same_latest_request_is_said_once() {
        let mut same = facts();
        same.latest_user = same.first_user.clone();
        assert!(!text(&same, 2000).unwrap().contains("Latest request"));
        let empty = Facts::default();
        assert_eq!(
            text(&empty, 2000).unwrap(),
            "Summary of 0 earlier messages (stub summarizer).\nError results: 0"
        );
    }
}
