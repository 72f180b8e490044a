//! The generic part of the schema walk: positions, attribute and child
//! checks, figures, and the references collected for later resolution.

use std::collections::HashMap;

use super::error::{expected_elements, Locator, ProfileError};
use super::xmltree::Element;

pub(super) type Result<T> = std::result::Result<T, ProfileError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Network,
    Computing,
}

impl Kind {
    pub(super) fn word(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Computing => "computing",
        }
    }
}

/// A reference waiting for the whole document to be read.
pub(super) enum Ref {
    Template {
        id: String,
        kind: Kind,
        element: &'static str,
        pos: usize,
    },
    Group {
        id: String,
        from: String,
        pos: usize,
    },
}

pub(super) struct Walker<'a> {
    pub(super) loc: Locator<'a>,
    /// Template id -> (kind, position of the definition).
    pub(super) templates: HashMap<String, (Kind, usize)>,
    pub(super) refs: Vec<Ref>,
}

impl Walker<'_> {
    pub(super) fn at(&self, pos: usize) -> (usize, usize) {
        self.loc.locate(pos)
    }

    /// A [`ProfileError::Limit`] at `pos`.
    pub(super) fn limit(&self, pos: usize, message: String) -> ProfileError {
        let (line, column) = self.at(pos);
        ProfileError::Limit {
            line,
            column,
            message,
        }
    }

    pub(super) fn invalid(&self, pos: usize, message: String) -> ProfileError {
        let (line, column) = self.at(pos);
        ProfileError::Invalid {
            line,
            column,
            message,
        }
    }

    pub(super) fn duplicate(&self, pos: usize, first: usize, kind: &str, id: &str) -> ProfileError {
        let (line, column) = self.at(pos);
        let (first_line, first_column) = self.at(first);
        ProfileError::Duplicate {
            line,
            column,
            kind: kind.into(),
            id: id.into(),
            first_line,
            first_column,
        }
    }

    /// Checks the attributes and the kinds of child elements of a container.
    pub(super) fn shape(&self, el: &Element, attrs: &[&str], children: &[&str]) -> Result<()> {
        for a in &el.attrs {
            let namespace = a.name == "xmlns" || a.name.starts_with("xmlns:");
            if !attrs.contains(&a.name.as_str()) && !namespace {
                let (line, column) = self.at(a.pos);
                let list: Vec<String> = attrs.iter().map(|n| format!("`{n}`")).collect();
                let expected = match list.len() {
                    0 => "no attributes".to_string(),
                    1 => list.join(""),
                    _ => format!("one of {}", list.join(", ")),
                };
                return Err(ProfileError::UnknownAttribute {
                    line,
                    column,
                    name: a.name.clone(),
                    element: el.name.clone(),
                    expected,
                });
            }
        }
        for c in &el.children {
            if !children.contains(&c.name.as_str()) {
                let (line, column) = self.at(c.pos);
                return Err(ProfileError::UnknownElement {
                    line,
                    column,
                    name: c.name.clone(),
                    parent: el.name.clone(),
                    expected: expected_elements(children),
                });
            }
        }
        if !children.is_empty() {
            if let Some(pos) = el.text_pos {
                let (line, column) = self.at(pos);
                let mut text: String = el.text.trim().chars().take(40).collect();
                if el.text.trim().chars().count() > 40 {
                    text.push('…');
                }
                return Err(ProfileError::UnexpectedText {
                    line,
                    column,
                    text,
                    element: el.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Text of an element that holds only text; `trim` strips surrounding space.
    pub(super) fn leaf<'e>(&self, el: &'e Element, trim: bool) -> Result<&'e str> {
        self.shape(el, &[], &[])?;
        Ok(if trim { el.text.trim() } else { &el.text })
    }

    /// A non-empty identifier held as text.
    pub(super) fn id_text<'e>(&self, el: &'e Element) -> Result<&'e str> {
        let text = self.leaf(el, true)?;
        if text.is_empty() {
            return Err(self.invalid(
                el.pos,
                format!("<{}> is empty; expected an identifier", el.name),
            ));
        }
        Ok(text)
    }

    pub(super) fn attr<'e>(&self, el: &'e Element, name: &str) -> Result<(&'e str, usize)> {
        match el.attrs.iter().find(|a| a.name == name) {
            Some(a) if a.value.trim().is_empty() => Err(self.invalid(
                a.pos,
                format!("attribute `{name}` of <{}> is empty", el.name),
            )),
            Some(a) => Ok((a.value.trim(), a.pos)),
            None => {
                let (line, column) = self.at(el.pos);
                Err(ProfileError::Missing {
                    line,
                    column,
                    element: el.name.clone(),
                    expected: format!("attribute `{name}`"),
                })
            }
        }
    }

    pub(super) fn once<'e>(&self, el: &'e Element, name: &str) -> Result<Option<&'e Element>> {
        let mut found = el.children.iter().filter(|c| c.name == name);
        let first = found.next();
        if let Some(second) = found.next() {
            let (line, column) = self.at(second.pos);
            return Err(ProfileError::Repeated {
                line,
                column,
                name: name.into(),
                parent: el.name.clone(),
            });
        }
        Ok(first)
    }

    pub(super) fn required<'e>(&self, el: &'e Element, name: &str) -> Result<&'e Element> {
        self.once(el, name)?.ok_or_else(|| {
            let (line, column) = self.at(el.pos);
            ProfileError::Missing {
                line,
                column,
                element: el.name.clone(),
                expected: format!("<{name}>"),
            }
        })
    }

    pub(super) fn optional_text(&self, el: &Element, name: &str) -> Result<Option<String>> {
        self.once(el, name)?
            .map(|c| self.leaf(c, true).map(str::to_string))
            .transpose()
    }

    /// A bare, finite, non-negative number in the text of `el`.
    pub(super) fn figure(
        &self,
        el: &Element,
        param: &str,
        unit: Option<&str>,
        whole: bool,
    ) -> Result<f64> {
        let raw = self.leaf(el, true)?;
        let pos = el.text_pos.unwrap_or(el.pos);
        let fail = |reason: String| {
            let (line, column) = self.at(pos);
            ProfileError::BadNumber {
                line,
                column,
                value: raw.to_string(),
                element: format!("{}> of <{param}", el.name),
                reason,
            }
        };
        match raw.parse::<f64>() {
            Ok(v) if !v.is_finite() => Err(fail("expected a finite number".into())),
            Ok(v) if v < 0.0 => Err(fail("expected a number >= 0".into())),
            Ok(v) if whole && v.fract() != 0.0 => Err(fail("expected a whole number".into())),
            Ok(v) => Ok(v + 0.0),
            Err(_) => Err(fail(number_hint(raw, unit))),
        }
    }

    pub(super) fn count(&self, el: &Element) -> Result<u32> {
        let raw = self.leaf(el, true)?;
        match raw.parse::<u32>() {
            Ok(n) if u64::from(n) > super::limits::MAX_PROCESSES => Err(self.limit(
                el.text_pos.unwrap_or(el.pos),
                format!(
                    "{n} processes in one group; a job has at most {}",
                    super::limits::MAX_PROCESSES
                ),
            )),
            Ok(n) if n >= 1 => Ok(n),
            _ => {
                let (line, column) = self.at(el.text_pos.unwrap_or(el.pos));
                let reason = if raw.parse::<f64>().is_ok() {
                    "expected a whole number of processes >= 1".to_string()
                } else {
                    number_hint(raw, None)
                };
                Err(ProfileError::BadNumber {
                    line,
                    column,
                    value: raw.to_string(),
                    element: "value> of <processesCount".into(),
                    reason,
                })
            }
        }
    }
}

pub(super) fn defined_list(names: &[String], what: &str) -> String {
    match names {
        [] => format!("a defined {what}, but none is defined"),
        [one] => one.clone(),
        many => format!("one of {}", many.join(", ")),
    }
}

/// Explains why `raw` is not a bare number, naming the implied unit when
/// the text looks like a number followed by a unit.
fn number_hint(raw: &str, unit: Option<&str>) -> String {
    let split = raw
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(raw.len()))
        .filter(|&i| i > 0)
        .rev()
        .find(|&i| raw[..i].trim().parse::<f64>().is_ok());
    match split {
        Some(i) if raw[i..].trim().chars().any(char::is_alphabetic) || raw[i..].contains('/') => {
            let number = raw[..i].trim();
            match unit {
                Some(u) => format!("the unit is implied: {u}; write the bare number {number}"),
                None => format!("this figure takes no unit; write the bare number {number}"),
            }
        }
        _ => "expected a bare number".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::number_hint;

    #[test]
    fn hints_name_the_implied_unit() {
        assert_eq!(
            number_hint("10ms", Some("ms")),
            "the unit is implied: ms; write the bare number 10"
        );
        assert_eq!(
            number_hint("2.5 GB", Some("MiB")),
            "the unit is implied: MiB; write the bare number 2.5"
        );
        assert_eq!(number_hint("fast", Some("ms")), "expected a bare number");
        assert!(number_hint("4cpus", None).contains("takes no unit"));
    }
}
