//! Errors reported while reading a JobProfile, each with the line and column
//! of the offending construct.

use thiserror::Error;

/// Why a JobProfile document was rejected.
///
/// Every variant carries the 1-based `line` and `column` (counted in
/// characters) of the element, attribute or text that caused the error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProfileError {
    /// The document is not well-formed XML.
    #[error("line {line}, column {column}: malformed XML: {message}")]
    Malformed {
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// What the XML reader complained about.
        message: String,
    },
    /// An element that the schema does not allow at this place.
    #[error(
        "line {line}, column {column}: unknown element <{name}> in <{parent}>; expected {expected}"
    )]
    UnknownElement {
        /// Line of the element.
        line: usize,
        /// Column of the element.
        column: usize,
        /// Name of the unexpected element.
        name: String,
        /// Name of the enclosing element (or `document` for the root).
        parent: String,
        /// What is allowed instead, already formatted.
        expected: String,
    },
    /// An attribute that the schema does not allow on this element.
    #[error("line {line}, column {column}: unknown attribute `{name}` on <{element}>; expected {expected}")]
    UnknownAttribute {
        /// Line of the attribute.
        line: usize,
        /// Column of the attribute.
        column: usize,
        /// Name of the unexpected attribute.
        name: String,
        /// Element carrying it.
        element: String,
        /// What is allowed instead, already formatted.
        expected: String,
    },
    /// A value outside a closed set (for instance a parameter name).
    #[error("line {line}, column {column}: unknown {what} \"{value}\" in <{element}>; expected {expected}")]
    UnknownValue {
        /// Line of the value.
        line: usize,
        /// Column of the value.
        column: usize,
        /// What the value names (e.g. `network parameter`).
        what: String,
        /// The value found.
        value: String,
        /// Element carrying it.
        element: String,
        /// What is allowed instead, already formatted.
        expected: String,
    },
    /// A required element or attribute is absent.
    #[error("line {line}, column {column}: <{element}> is missing {expected}")]
    Missing {
        /// Line of the element that lacks something.
        line: usize,
        /// Column of that element.
        column: usize,
        /// The element that lacks something.
        element: String,
        /// What is missing, already formatted (e.g. `<processesCount>`).
        expected: String,
    },
    /// An element that may appear once appears again.
    #[error("line {line}, column {column}: <{name}> may appear only once in <{parent}>")]
    Repeated {
        /// Line of the second occurrence.
        line: usize,
        /// Column of the second occurrence.
        column: usize,
        /// Name of the repeated element.
        name: String,
        /// Enclosing element.
        parent: String,
    },
    /// Text where the schema expects only elements.
    #[error("line {line}, column {column}: unexpected text {text:?} in <{element}>; expected only child elements")]
    UnexpectedText {
        /// Line of the text.
        line: usize,
        /// Column of the text.
        column: usize,
        /// The text (trimmed, possibly shortened).
        text: String,
        /// Enclosing element.
        element: String,
    },
    /// A figure that is not a bare, finite, non-negative number.
    #[error("line {line}, column {column}: invalid figure {value:?} in <{element}>: {reason}")]
    BadNumber {
        /// Line of the figure.
        line: usize,
        /// Column of the figure.
        column: usize,
        /// The text found.
        value: String,
        /// Element holding it, with its context (e.g. `max` of latency).
        element: String,
        /// What is expected instead.
        reason: String,
    },
    /// A reference to a template or group that is not defined.
    #[error("line {line}, column {column}: {kind} \"{id}\" is not defined; expected {expected}")]
    UndefinedReference {
        /// Line of the reference.
        line: usize,
        /// Column of the reference.
        column: usize,
        /// `network template`, `computing template` or `group`.
        kind: String,
        /// The identifier referenced.
        id: String,
        /// Defined identifiers of the right kind, already formatted.
        expected: String,
    },
    /// A template reference that names a template of the other kind.
    #[error("line {line}, column {column}: template \"{id}\" is a {found} template but <{element}> needs a {expected} template")]
    WrongTemplateKind {
        /// Line of the reference.
        line: usize,
        /// Column of the reference.
        column: usize,
        /// The identifier referenced.
        id: String,
        /// Kind of the template that was found.
        found: String,
        /// Kind the reference needs.
        expected: String,
        /// Element holding the reference.
        element: String,
    },
    /// An identifier or name used twice where it must be unique.
    #[error("line {line}, column {column}: duplicate {kind} \"{id}\" (first at line {first_line}, column {first_column})")]
    Duplicate {
        /// Line of the second definition.
        line: usize,
        /// Column of the second definition.
        column: usize,
        /// What is duplicated (e.g. `template id`, `group id`).
        kind: String,
        /// The duplicated identifier.
        id: String,
        /// Line of the first definition.
        first_line: usize,
        /// Column of the first definition.
        first_column: usize,
    },
    /// The document goes past one of the [`limits`](super::limits).
    #[error("line {line}, column {column}: too large: {message}")]
    Limit {
        /// Where the limit was passed.
        line: usize,
        /// Column there.
        column: usize,
        /// Which limit, and by how much.
        message: String,
    },
    /// A value that is well-formed but breaks a rule of the model.
    #[error("line {line}, column {column}: {message}")]
    Invalid {
        /// Line of the offending construct.
        line: usize,
        /// Column of the offending construct.
        column: usize,
        /// Explanation.
        message: String,
    },
}

impl ProfileError {
    /// The 1-based line of the error.
    pub fn line(&self) -> usize {
        self.position().0
    }

    /// The 1-based column (in characters) of the error.
    pub fn column(&self) -> usize {
        self.position().1
    }

    fn position(&self) -> (usize, usize) {
        match self {
            Self::Malformed { line, column, .. }
            | Self::UnknownElement { line, column, .. }
            | Self::UnknownAttribute { line, column, .. }
            | Self::UnknownValue { line, column, .. }
            | Self::Missing { line, column, .. }
            | Self::Repeated { line, column, .. }
            | Self::UnexpectedText { line, column, .. }
            | Self::BadNumber { line, column, .. }
            | Self::UndefinedReference { line, column, .. }
            | Self::WrongTemplateKind { line, column, .. }
            | Self::Duplicate { line, column, .. }
            | Self::Limit { line, column, .. }
            | Self::Invalid { line, column, .. } => (*line, *column),
        }
    }
}

/// Converts byte offsets of the input into 1-based line and column numbers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Locator<'a> {
    input: &'a str,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(input: &'a str) -> Self {
        Self { input }
    }

    /// Line and column (in characters) of the byte `offset`.
    pub(crate) fn locate(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.input.len());
        while !self.input.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.input[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}

/// Formats a list of element names as `<a>` or `one of <a>, <b>`.
pub(crate) fn expected_elements(names: &[&str]) -> String {
    match names {
        [] => "no child elements (text only)".to_string(),
        [one] => format!("<{one}>"),
        many => {
            let list: Vec<String> = many.iter().map(|n| format!("<{n}>")).collect();
            format!("one of {}", list.join(", "))
        }
    }
}

/// Formats a list of plain words as `a` or `one of a, b`.
pub(crate) fn expected_words(names: &[&str]) -> String {
    match names {
        [] => "nothing".to_string(),
        [one] => (*one).to_string(),
        many => format!("one of {}", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_counts_lines_and_characters() {
        let loc = Locator::new("ab\ncé\nx");
        assert_eq!(loc.locate(0), (1, 1));
        assert_eq!(loc.locate(3), (2, 1));
        assert_eq!(loc.locate(6), (2, 3));
        assert_eq!(loc.locate(7), (3, 1));
        assert_eq!(loc.locate(100), (3, 2));
    }

    #[test]
    fn display_has_position_and_expectation() {
        let e = ProfileError::UnknownElement {
            line: 12,
            column: 9,
            name: "foo".into(),
            parent: "group".into(),
            expected: expected_elements(&["processes", "processesConnection"]),
        };
        assert_eq!(
            e.to_string(),
            "line 12, column 9: unknown element <foo> in <group>; expected one of <processes>, <processesConnection>"
        );
        assert_eq!((e.line(), e.column()), (12, 9));
    }
}
