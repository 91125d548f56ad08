//! Repeated calls in the parsers' output ([`crate::grammar::DistinctCalls::End`], the default): a call
//! equal to an earlier call of the output (the same function, arguments equal as JSON values)
//! ends the calls. It, and any call after it, is left out of the events; text and reasoning
//! after it are kept.
//!
//! Streaming never takes anything back, so a call of a function called before is held back
//! (its start, id and arguments) until it differs from every earlier call of that function in
//! an argument it has completed or in the string value it is writing (the same test the
//! matcher's rule uses), and released then; a call that ends equal to an earlier one is
//! dropped with everything held. The events of a call whose function was not called before
//! pass at once.

use super::Event;
use serde_json::Value;

/// Filters a parser's events so that no call repeats an earlier one (see the module notes).
#[derive(Clone, Debug, Default)]
pub(crate) struct RepeatGate {
    /// The completed calls that were released: function and arguments.
    done: Vec<(String, Value)>,
    /// Per call index: the function and the arguments' JSON text so far.
    calls: Vec<(String, String)>,
    /// The call held back, by index, with the events held since its start.
    held: Option<(usize, Vec<Event>)>,
    /// A repeat came: no call passes any more.
    closed: bool,
}

impl RepeatGate {
    /// The events of `events` that pass, in order.
    pub(crate) fn filter(&mut self, events: Vec<Event>) -> Vec<Event> {
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            self.take(e, &mut out);
        }
        out
    }

    fn take(&mut self, e: Event, out: &mut Vec<Event>) {
        if self.closed {
            if matches!(e, Event::Text(_) | Event::Reasoning(_)) {
                out.push(e);
            }
            return;
        }
        match &e {
            Event::CallStart { index, name, .. } => {
                let index = *index;
                if self.calls.len() <= index {
                    self.calls.resize(index + 1, Default::default());
                }
                self.calls[index] = (name.clone(), String::new());
                if self.held.is_none() && self.done.iter().any(|(n, _)| n == name) {
                    self.held = Some((index, vec![e]));
                    return;
                }
            }
            Event::Arguments { index, delta } => {
                let index = *index;
                if let Some(c) = self.calls.get_mut(index) {
                    c.1.push_str(delta);
                }
                if self.held.as_ref().is_some_and(|(i, _)| *i == index) {
                    self.hold(e);
                    let (name, args) = &self.calls[index];
                    if args_differ(name, args, &self.done) {
                        self.release(out);
                    }
                    return;
                }
            }
            Event::CallEnd { index } => {
                let index = *index;
                let (name, args) = self.calls.get(index).cloned().unwrap_or_default();
                let text = args.trim();
                let value = if text.is_empty() {
                    Some(Value::Object(Default::default()))
                } else {
                    serde_json::from_str::<Value>(text).ok()
                };
                let held = self.held.as_ref().is_some_and(|(i, _)| *i == index);
                if let Some(v) = value {
                    let repeat = self.done.iter().any(|(n, w)| *n == name && json_eq(w, &v));
                    if held && repeat {
                        self.held = None;
                        self.closed = true;
                        return;
                    }
                    self.done.push((name, v));
                }
                if held {
                    self.hold(e);
                    self.release(out);
                    return;
                }
            }
            Event::Text(_) | Event::Reasoning(_) | Event::CallId { .. } => {}
        }
        if self.held.is_some() {
            self.hold(e);
        } else {
            out.push(e);
        }
    }

    fn hold(&mut self, e: Event) {
        if let Some((_, held)) = &mut self.held {
            held.push(e);
        }
    }

    fn release(&mut self, out: &mut Vec<Event>) {
        if let Some((_, held)) = self.held.take() {
            out.extend(held);
        }
    }
}

/// True when a call of `name` whose arguments' JSON text so far is `args` already differs
/// from every call of `name` in `done` in an argument it has completed (a key the earlier call
/// lacks, or another value) or in the string value it is writing (the characters so far are
/// not how the earlier value begins), so that whatever follows, it is new.
pub(crate) fn args_differ(name: &str, args: &str, done: &[(String, Value)]) -> bool {
    let members = completed_members(args);
    let writing = string_in_progress(args);
    if members.is_none() && writing.is_none() {
        return false;
    }
    done.iter().filter(|(n, _)| n == name).all(|(_, earlier)| {
        let earlier = earlier.as_object();
        let member_differs = members.iter().flatten().any(|(k, v)| {
            earlier
                .and_then(|o| o.get(k))
                .is_none_or(|w| !json_eq(w, v))
        });
        // A string value so far that the earlier one does not begin with: whatever
        // characters follow, the values differ.
        let string_differs = writing.as_ref().is_some_and(|(k, so_far)| {
            earlier
                .and_then(|o| o.get(k))
                .and_then(Value::as_str)
                .is_none_or(|w| !w.starts_with(so_far.as_str()))
        });
        member_differs || string_differs
    })
}

/// The members of a JSON object's text `args` (a prefix of one) that are complete: all but
/// the one in progress (all of them once the object is closed); `None` when there are none.
pub(crate) fn completed_members(args: &str) -> Option<serde_json::Map<String, Value>> {
    let text = args.trim_start();
    if !text.starts_with('{') {
        return None;
    }
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    let mut cut = None;
    for (i, c) in text.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return serde_json::from_str::<Value>(&text[..=i])
                        .ok()?
                        .as_object()
                        .cloned();
                }
            }
            ',' if depth == 1 => cut = Some(i),
            _ => {}
        }
    }
    let closed = format!("{}}}", &text[..cut?]);
    match serde_json::from_str::<Value>(&closed).ok()? {
        Value::Object(m) if !m.is_empty() => Some(m),
        _ => None,
    }
}

/// The key and the characters so far of the member of a JSON object's text `args` (a prefix
/// of one) whose string value is being written: every character of the value's final text
/// after them (an escape not yet complete is left out, and counts among those after).
fn string_in_progress(args: &str) -> Option<(String, String)> {
    let text = args.trim_start();
    if !text.starts_with('{') {
        return None;
    }
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    let (mut member, mut escape_at) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => {
                    escaped = true;
                    escape_at = i;
                }
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => {
                depth += 1;
                member = i + 1;
            }
            '}' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 1 => member = i + 1,
            _ => {}
        }
    }
    if depth != 1 || !in_str {
        return None;
    }
    // `"key" : "value so far`: the key is a whole JSON string, then the colon, then the value.
    let rest = text[member..].trim_start();
    let mut keys = serde_json::Deserializer::from_str(rest).into_iter::<String>();
    let key = keys.next()?.ok()?;
    let after_key = rest[keys.byte_offset()..].trim_start();
    let value = after_key
        .strip_prefix(':')?
        .trim_start()
        .strip_prefix('"')?;
    let offset = text.len() - value.len();
    let decode = |v: &str| serde_json::from_str::<String>(&format!("\"{v}\"")).ok();
    let so_far = decode(value).or_else(|| {
        // The last escape is not complete yet: the characters before it.
        decode(&text[offset..escape_at.max(offset)])
    })?;
    Some((key, so_far))
}

/// JSON values equal as values: objects whatever their key order, numbers by value.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let int = |n: &serde_json::Number| {
                n.as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
            };
            match (int(x), int(y)) {
                (Some(i), Some(j)) => i == j,
                _ => match (x.as_f64(), y.as_f64()) {
                    (Some(f), Some(g)) => f == g,
                    _ => false,
                },
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_value_being_written() {
        let got = |a: &str| string_in_progress(a).map(|(k, v)| format!("{k}={v}"));
        assert_eq!(got(r#"{"location": "Par"#).as_deref(), Some("location=Par"));
        assert_eq!(got(r#"{"a": 1, "b" : "x\ny\"#).as_deref(), Some("b=x\ny"));
        assert_eq!(got(r#"{"a": 1, "b": "\u00e"#).as_deref(), Some("b="));
        assert_eq!(got(r#"{"b": "a\\"#).as_deref(), Some("b=a\\"));
        assert_eq!(got(r#"{"b": "\ud83d\ude0"#).as_deref(), None);
        assert_eq!(got(r#"{"b": "x", "c": 1"#), None);
        assert_eq!(got(r#"{"lo"#), None);
        assert_eq!(got(r#"{"a": ["x"#), None);
        assert_eq!(got(r#"{"a": {"b": "x"#), None);
        assert_eq!(got(r#"{"a": "x"}"#), None);
    }

    fn start(index: usize, name: &str) -> Event {
        Event::CallStart {
            index,
            id: format!("call_{index}"),
            name: name.into(),
        }
    }

    fn args(index: usize, delta: &str) -> Event {
        Event::Arguments {
            index,
            delta: delta.into(),
        }
    }

    #[test]
    fn a_repeat_and_what_follows_are_left_out_and_a_new_call_is_released_once_it_differs() {
        let mut g = RepeatGate::default();
        let first = vec![
            start(0, "f"),
            args(0, "{\"a\": 1}"),
            Event::CallEnd { index: 0 },
        ];
        assert_eq!(g.filter(first.clone()), first);
        // Held while it may still be the same call, released where it differs.
        assert_eq!(g.filter(vec![start(1, "f"), args(1, "{\"a\": 1")]), vec![]);
        let differs = g.filter(vec![args(1, ", \"b\": 2"), args(1, "}")]);
        assert_eq!(differs.len(), 4, "{differs:?}");
        assert_eq!(g.filter(vec![Event::CallEnd { index: 1 }]).len(), 1);
        // Equal as values (another key order, 1.0 for 1): dropped, and the calls end.
        let again = vec![
            start(2, "f"),
            args(2, "{\"b\": 2, \"a\": 1.0}"),
            Event::CallEnd { index: 2 },
            Event::Text("done".into()),
            start(3, "g"),
            args(3, "{}"),
            Event::CallEnd { index: 3 },
        ];
        assert_eq!(g.filter(again), vec![Event::Text("done".into())]);
    }

    #[test]
    fn a_string_value_that_parts_from_the_earlier_one_releases_the_call() {
        let mut g = RepeatGate::default();
        g.filter(vec![
            start(0, "f"),
            args(0, "{\"s\": \"abc\"}"),
            Event::CallEnd { index: 0 },
        ]);
        assert!(g
            .filter(vec![start(1, "f"), args(1, "{\"s\": \"ab")])
            .is_empty());
        assert_eq!(g.filter(vec![args(1, "x")]).len(), 3);
    }
}
