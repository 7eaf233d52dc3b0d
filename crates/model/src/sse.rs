//! A small incremental parser for server-sent events, fed with the body's bytes as they
//! arrive (pieces may split lines and UTF-8 characters anywhere).
//!
//! Only what the Chat Completions stream uses is kept: the `data` field of each event.
//! Lines end with `\n`, `\r\n` or `\r`; a line starting with `:` is a comment; `data:`
//! lines of one event are joined with `\n`; an empty line ends the event. Other fields
//! (`event`, `id`, `retry`) are read and ignored. Unlike a browser, data still pending at the
//! end of the stream is delivered, because some servers omit the last empty line.

/// The longest line the parser buffers, in bytes; a longer one is refused.
pub(crate) const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Why a byte stream is not a usable event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A line is not UTF-8.
    NotUtf8,
    /// A line or event exceeds [`MAX_LINE_BYTES`].
    TooLong,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::NotUtf8 => f.write_str("the event stream is not valid UTF-8"),
            SseError::TooLong => write!(
                f,
                "an event stream line is longer than {MAX_LINE_BYTES} bytes"
            ),
        }
    }
}

/// The parser's state between two pieces of input.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the line read so far.
    line: Vec<u8>,
    /// The data of the event read so far.
    data: String,
    /// Whether the event has at least one `data` line (an empty `data:` counts).
    has_data: bool,
    /// The previous piece ended with `\r`: a `\n` opening the next one belongs to it.
    after_cr: bool,
    /// The first line has been seen (a byte-order mark is only skipped there).
    started: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub(crate) fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next piece of the body, appending the data of every event it completes.
    pub(crate) fn feed(&mut self, bytes: &[u8], events: &mut Vec<String>) -> Result<(), SseError> {
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(after) = rest.strip_prefix(b"\n") {
                rest = after;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_bytes(&rest[..end])?;
            self.end_line(events)?;
            let ending = rest[end];
            rest = &rest[end + 1..];
            if ending == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.push_bytes(rest)
    }

    /// Ends the stream: delivers a last line and event that had no terminator.
    pub(crate) fn finish(&mut self, events: &mut Vec<String>) -> Result<(), SseError> {
        if !self.line.is_empty() {
            self.end_line(events)?;
        }
        self.dispatch(events);
        Ok(())
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            return Err(SseError::TooLong);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<(), SseError> {
        let bytes = std::mem::take(&mut self.line);
        let mut line = String::from_utf8(bytes).map_err(|_| SseError::NotUtf8)?;
        if !self.started {
            self.started = true;
            if let Some(stripped) = line.strip_prefix('\u{FEFF}') {
                line = stripped.to_owned();
            }
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        if field == "data" {
            if self.has_data {
                self.data.push('\n');
            }
            if self.data.len() + value.len() > MAX_LINE_BYTES {
                return Err(SseError::TooLong);
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<String>) {
        if self.has_data {
            self.has_data = false;
            events.push(std::mem::take(&mut self.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_in(pieces: &[&[u8]]) -> Result<Vec<String>, SseError> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in pieces {
            parser.feed(piece, &mut events)?;
        }
        parser.finish(&mut events)?;
        Ok(events)
    }

    #[test]
    fn reads_data_lines_and_ignores_the_rest() {
        let body = b"\xEF\xBB\xBF: keep-alive\nevent: message\nid: 7\ndata: {\"a\":1}\n\ndata:x\ndata: y\r\n\r\ndata\n\ndata: [DONE]";
        assert_eq!(
            parse_in(&[body]).unwrap(),
            vec!["{\"a\":1}", "x\ny", "", "[DONE]"]
        );
    }

    #[test]
    fn bare_carriage_returns_end_lines() {
        assert_eq!(
            parse_in(&[b"data: a\r\rdata: b\r", b"\r"]).unwrap(),
            vec!["a", "b"]
        );
        assert_eq!(
            parse_in(&[b"data: a\r", b"\n\r", b"\n"]).unwrap(),
            vec!["a"]
        );
    }

    #[test]
    fn refuses_invalid_utf8_and_endless_lines() {
        assert_eq!(parse_in(&[b"data: \xFF\n\n"]), Err(SseError::NotUtf8));
        let long = vec![b'a'; MAX_LINE_BYTES + 1];
        assert_eq!(parse_in(&[&long]), Err(SseError::TooLong));
    }

    proptest! {
        /// Wherever the body is cut, the events are the same as when it arrives whole.
        #[test]
        fn any_split_gives_the_same_events(
            cuts in proptest::collection::vec(0usize..200, 0..8),
            crlf in any::<bool>(),
        ) {
            let newline = if crlf { "\r\n" } else { "\n" };
            let body = [
                ": ping", "data: {\"text\":\"héllo → wörld\"}", "", "data: one",
                "data: two", "", "event: x", "data: ✓", "", "data: [DONE]", "",
            ]
            .join(newline);
            let bytes = body.as_bytes();
            let whole = parse_in(&[bytes]).unwrap();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for point in points {
                pieces.push(&bytes[start..point]);
                start = point;
            }
            pieces.push(&bytes[start..]);
            prop_assert_eq!(parse_in(&pieces).unwrap(), whole);
        }
    }

    #[test]
    fn every_single_cut_gives_the_same_events() {
        let body = "data: {\"x\":\"é\"}\r\n\r\ndata: [DONE]\r\n\r\n".as_bytes();
        let whole = parse_in(&[body]).unwrap();
        for cut in 0..=body.len() {
            assert_eq!(
                parse_in(&[&body[..cut], &body[cut..]]).unwrap(),
                whole,
                "cut at {cut}"
            );
        }
    }
}
